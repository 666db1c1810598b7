package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// An array one element over its limit gets 400 with too_many_items at the
// array's path, in the endpoint's own section 7 answer, and nothing is
// written: an unbounded array lets one request hold a CPU and memory. E1
// and E6 to E8 have the same test in
// business_limits_test.go and jobs/postimport.
func TestArrayLimits_OneElementTooManyIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newImportsEnv(t)
	times := func(n int, v any) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	tooManyCustomers := accountDoc(t, "DEMO", "A-LIMIT-1")
	tooManyCustomers["customers"] = times(1001, tooManyCustomers["customers"].([]any)[0])
	tooManyPoints := accountDoc(t, "DEMO", "A-LIMIT-2")
	edit(t, tooManyPoints, "supply_addresses.0.supply_points", times(1001, map[string]any{"supply_type": "HEAT_PUMP", "supply_start_date": "2024-01-01"}))
	e2 := strings.Replace(e2Body(10_001, false), `"PAY"`, `"DEMO"`, 1)
	tests := []struct {
		name, path string
		body       any
		code, attr string
		written    string // a query counting what the request could have written
	}{
		{"E4 customers", pathStageAccount, tooManyCustomers, "account_failed_validation", "customers",
			`SELECT count(*) FROM import_processes WHERE external_account_number = 'A-LIMIT-1'`},
		{"E4 supply points", pathStageAccount, tooManyPoints, "account_failed_validation", "supply_addresses.0.supply_points",
			`SELECT count(*) FROM import_processes WHERE external_account_number = 'A-LIMIT-2'`},
		{"E3 supply points", pathValidateAccount, tooManyPoints, "account_failed_validation", "supply_addresses.0.supply_points", ""},
		{"E2 accounts", pathE2, e2, "payment_instruction_failed_validation", "accounts", `SELECT count(*) FROM payment_instructions`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.s.do(t, "POST", tt.path, e.tok, tt.body)
			if r.Status != 400 || r.Body["code"] != tt.code {
				t.Fatalf("%d %.300s", r.Status, r.Raw)
			}
			if codes := codesAt(t, r); !slices.Contains(codes, "too_many_items@"+tt.attr) {
				t.Errorf("no too_many_items@%s in %.300v", tt.attr, codes)
			}
			if tt.written == "" {
				return
			}
			var n int
			if err := e.s.db.Get(&n, tt.written); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d rows written", n)
			}
		})
	}
}

// Without limits, a 10 MiB body of [0,0,...] costs gigabytes and seconds to
// refuse on E5. It is refused at once, as is the same array in a field. The
// memory bound and the parse time are measured in jobs/validate, where
// nothing else runs; here the time only catches a return of the minutes.
// Three 10 MiB bodies take long under -race: make test-long runs it.
func TestArrayLimits_TenMiBArrayOnE5IsRefusedFast(t *testing.T) {
	if testing.Short() {
		t.Skip("three 10 MiB bodies; run without -short")
	}
	t.Parallel()
	e := newImportsEnv(t)
	arr := "[" + strings.TrimSuffix(strings.Repeat("0,", 5<<20-100), ",") + "]"
	tests := []struct {
		name, body string
		code       string
		errs       []string
	}{
		{"the body", arr, "parse_error", []string{}},
		{"an unknown field", `{"external_account_number": "A", "import_supplier_code": "DEMO", "operations_team_name": "T", "x": ` + arr + `}`,
			"invalid_request", []string{"unknown_field@x"}},
		{"a boolean field", `{"external_account_number": "A", "import_supplier_code": "DEMO", "operations_team_name": "T", "dry_run": ` + arr + `}`,
			"invalid_request", []string{"invalid@dry_run"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			r := e.s.do(t, "POST", "/v1/data-import/account-import-process/process/", e.tok, tt.body)
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("answered in %v, want under 30s", took)
			}
			if r.Status != 400 || r.Body["code"] != tt.code {
				t.Fatalf("%d %.300s", r.Status, r.Raw)
			}
			if got := codesAt(t, r); !slices.Equal(got, tt.errs) {
				t.Errorf("errors %v, want %v", got, tt.errs)
			}
		})
	}
}
