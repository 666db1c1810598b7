package account

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkValidate validates the fixture against the real PostgreSQL
// catalogue: one parse, the schema walk, the semantic rules, and either one
// catalogue round trip (database) or none once the answers are cached.
func BenchmarkValidate(b *testing.B) {
	bn := setup(b)
	body := fixture(b)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		v    Validator
	}{
		{"database", bn.v},
		{"cached", Validator{Catalog: NewCatalogCache(bn.db, time.Hour).View(nil), Now: bn.v.Now}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.v.Validate(ctx, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeBaseline is what a bare handler that only decodes the
// fixture costs (encoding/json into a generic map), for comparison with
// BenchmarkValidate.
func BenchmarkDecodeBaseline(b *testing.B) {
	body := fixture(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			b.Fatal(err)
		}
	}
}
