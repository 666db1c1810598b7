package main

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// A free-form object with 100,000 keys (a 1.3 MB E3 body) once held a CPU
// for 16.7 s, as each key was compared with every key before it: in a
// metadata value, in a supply point of a type without a schema, and in E1's
// terms. Every object now has at most 1,000 members: such a body is refused
// with too_many_items at the object's path, in milliseconds. The time bound
// is generous for -race on a loaded machine (a linear check took 10 s there
// at a load average of 15); it only catches a return of the quadratic
// check, which takes 16.7 s of CPU without -race and several times that
// with it.
func TestFreeFormLimits_HundredThousandKeysAreRefusedFast(t *testing.T) {
	t.Parallel()
	e := newImportsEnv(t)
	big := func() map[string]any {
		m := make(map[string]any, 100_000)
		for i := range 100_000 {
			m[fmt.Sprintf("k%d", i)] = i
		}
		return m
	}
	metadata := accountDoc(t, "DEMO", "A-KEYS-1")
	edit(t, metadata, "metadata", []any{map[string]any{"key": "many", "value": big()}})
	point := accountDoc(t, "DEMO", "A-KEYS-2")
	p := big()
	p["supply_type"], p["supply_start_date"] = "NEW_KIND", "2024-01-01"
	edit(t, point, "supply_addresses.0.supply_points", []any{p})
	business := businessRequest()
	business["business"].(map[string]any)["business_contracts"].([]any)[0].(map[string]any)["versions"].([]any)[0].(map[string]any)["terms"] = []any{big()}
	tests := []struct {
		name, path string
		body       any
		code, attr string
	}{
		{"E3 metadata value", pathValidateAccount, metadata, "account_failed_validation", "metadata.0.value"},
		{"E3 supply point of a type without a schema", pathValidateAccount, point, "account_failed_validation", "supply_addresses.0.supply_points.0"},
		{"E1 terms", "/v1/data-import/business/", business, "business_failed_validation", "business.business_contracts.0.versions.0.terms.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			r := e.s.do(t, "POST", tt.path, e.tok, tt.body)
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("answered in %v, want under 30s", took)
			}
			if r.Status != 400 || r.Body["code"] != tt.code {
				t.Fatalf("%d %.300s", r.Status, r.Raw)
			}
			if codes := codesAt(t, r); !slices.Contains(codes, "too_many_items@"+tt.attr) {
				t.Errorf("no too_many_items@%s in %.300v", tt.attr, codes)
			}
		})
	}
}
