package account

import (
	"bytes"
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

// BenchmarkEncode writes the fixture's normalised payload as E3 answers it:
// AppendJSON beside encoding/json (a json.Encoder without HTML escaping),
// which wrote it before.
func BenchmarkEncode(b *testing.B) {
	bn := setup(b)
	a, err := bn.v.Validate(context.Background(), fixture(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			if buf, err = a.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(a); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(int64(buf.Len()))
	})
}
