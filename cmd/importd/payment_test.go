package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/payment"
	"github.com/bulkimport/bulkimport/jobs/payment/vendorsim"
)

// paymentEnv is `importd serve` (API and worker) with supplier PAY, team
// ops, and vendors that are real simulators on 127.0.0.1, each with short
// timeouts and backoff.
type paymentEnv struct {
	*service
	tok  string
	sims map[string]*vendorsim.Simulator
	seq  atomic.Int64
}

func newPaymentEnv(t *testing.T) *paymentEnv {
	t.Helper()
	s := startService(t, "serve", nil)
	ctx := context.Background()
	if _, err := admin.CreateSupplier(ctx, s.db, admin.Supplier{Code: "PAY"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTeam(ctx, s.db, "ops"); err != nil {
		t.Fatal(err)
	}
	e := &paymentEnv{service: s, tok: s.accessToken(t, s.newKey(t, "pay-team")), sims: map[string]*vendorsim.Simulator{}}
	var list []map[string]any
	for i := range 50 {
		list = append(list, map[string]any{"reference": fmt.Sprintf("CARD-%d", i), "type": "CARD", "status": "ACTIVE", "last4": "4242"})
	}
	instructions, _ := json.Marshal(list)
	for _, v := range []struct {
		name    string
		cfg     vendorsim.Config
		timeout time.Duration
	}{
		{"OK", vendorsim.Config{}, time.Second},
		{"FLAKY", vendorsim.Config{FailFirst: 2}, time.Second},
		{"DOWN", vendorsim.Config{AlwaysFail: true}, time.Second},
		{"SLOW", vendorsim.Config{Delay: 3 * time.Second}, 200 * time.Millisecond},
	} {
		v.cfg.Instructions = instructions
		sim, err := vendorsim.New(v.cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		e.sims[v.name] = sim
		if _, err := payment.AddVendor(ctx, s.db, payment.Vendor{Name: v.name, BaseURL: srv.URL, Timeout: v.timeout,
			Attempts: 3, Backoff: 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// account creates an imported account of PAY as E5 leaves one (E5 is
// tested elsewhere), linked to the business contract when contract is not
// empty, and returns its service account number.
func (e *paymentEnv) account(t *testing.T, ean, contract string) string {
	t.Helper()
	number := fmt.Sprintf("A-%08X", 0x10000000+e.seq.Add(1))
	_, err := e.db.Exec(`
		WITH p AS (
			INSERT INTO import_processes (supplier_id, external_account_number, payload, status, service_account_number, account_created_at)
			SELECT id, $1, '{}', 'COMPLETED', $2, now() FROM import_suppliers WHERE code = 'PAY' RETURNING id, supplier_id)
		INSERT INTO accounts (service_account_number, supplier_id, external_account_number, import_process_id, operations_team_id,
			business_contract_id, billing_country)
		SELECT $2, p.supplier_id, $1, p.id, (SELECT id FROM operations_teams WHERE name = 'ops'),
			(SELECT id FROM business_contracts WHERE supplier_id = p.supplier_id AND identifier = $3), 'GB'
		FROM p`, ean, number, contract)
	if err != nil {
		t.Fatal(err)
	}
	return number
}

// business creates a business of PAY with one contract over E1.
func (e *paymentEnv) business(t *testing.T, ext, contract string) {
	t.Helper()
	r := e.do(t, "POST", "/v1/data-import/business/", e.tok, map[string]any{
		"import_supplier_code": "PAY", "external_business_identifier": ext,
		"business": map[string]any{"business_type": "SOLE_TRADER", "company_name": ext + " Trading",
			"business_contracts": []any{map[string]any{"valid_from_date": "2024-01-01", "identifier": contract,
				"versions": []any{map[string]any{"applicable_at_date": "2024-01-01", "terms": []any{}}}}}},
	})
	if r.Status != 201 {
		t.Fatalf("E1: %d %s", r.Status, r.Raw)
	}
}

const (
	pathE9 = "/v1/data-import/payment-instruction/create/"
	pathE2 = "/v1/data-import/business-payment-instruction/create/"
)

// E9 and E2 over HTTP, through the real worker and simulated vendors. One
// service runs every case, to keep the suite's load down.
func TestPaymentInstruction_OverHTTP(t *testing.T) {
	t.Parallel()
	e := newPaymentEnv(t)
	t.Run("account", func(t *testing.T) { t.Parallel(); paymentAccountCases(t, e) })
	t.Run("duplicate reference", func(t *testing.T) { t.Parallel(); paymentDuplicateCase(t, e) })
	t.Run("business", func(t *testing.T) { t.Parallel(); paymentBusinessCases(t, e) })
	t.Run("concurrent duplicates", func(t *testing.T) { t.Parallel(); paymentConcurrentDuplicateCases(t, e) })
}

// paymentAccountCases are the E9 cases of the payment-instruction
// requirements.
func paymentAccountCases(t *testing.T, e *paymentEnv) {
	tests := []struct {
		name     string
		vendor   string
		ref      string
		typ      string
		status   int
		code     string
		errors   []string
		requests int
	}{
		{name: "success", vendor: "OK", ref: "CARD-1", typ: "CARD", status: 201, requests: 1},
		{name: "an unknown reference", vendor: "OK", ref: "NOPE-1", typ: "CARD", status: 400,
			code: "payment_instruction_not_found_at_vendor", errors: []string{"payment_instruction_not_found_at_vendor@reference"}, requests: 1},
		{name: "503 twice, then 200", vendor: "FLAKY", ref: "CARD-2", typ: "CARD", status: 201, requests: 3},
		{name: "always 503", vendor: "DOWN", ref: "CARD-3", typ: "CARD", status: 500, code: "payment_vendor_unavailable", errors: []string{}, requests: 3},
		{name: "hangs past the timeout", vendor: "SLOW", ref: "CARD-4", typ: "CARD", status: 500, code: "payment_vendor_unavailable", errors: []string{}, requests: 3},
		{name: "unknown vendor", vendor: "NOBODY", ref: "CARD-5", typ: "CARD", status: 400,
			code: "payment_instruction_failed_validation", errors: []string{"payment_vendor_not_found@vendor"}},
		{name: "a type of 65 characters", vendor: "OK", ref: "CARD-6", typ: strings.Repeat("C", 65), status: 400,
			code: "payment_instruction_failed_validation", errors: []string{"invalid_choice@type"}},
		{name: "type the vendor does not store", vendor: "OK", ref: "CARD-7", typ: "DIRECT_DEBIT", status: 400,
			code: "payment_instruction_type_mismatch", errors: []string{"payment_instruction_type_mismatch@type"}, requests: 1},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ean := fmt.Sprintf("E9-%d", i)
			number := e.account(t, ean, "")
			r := e.do(t, "POST", pathE9, e.tok, map[string]any{"import_supplier": "PAY", "external_account_number": ean,
				"vendor": tc.vendor, "reference": tc.ref, "type": tc.typ})
			if r.Status != tc.status {
				t.Fatalf("status %d %s, want %d", r.Status, r.Raw, tc.status)
			}
			if tc.status == 201 {
				if diff := cmp.Diff(map[string]any{"service_account_number": number, "reference": tc.ref}, r.Body); diff != "" {
					t.Errorf("201 body (-want +got):\n%s", diff)
				}
			} else {
				if r.Body["code"] != tc.code {
					t.Errorf("code %v, want %s", r.Body["code"], tc.code)
				}
				if diff := cmp.Diff(tc.errors, codesAt(t, r)); diff != "" {
					t.Errorf("errors (-want +got):\n%s", diff)
				}
			}
			stored := e.count(t, `SELECT count(*) FROM payment_instructions pi JOIN accounts a ON a.id = pi.account_id
				WHERE a.external_account_number = $1`, ean)
			if want := map[bool]int{true: 1, false: 0}[tc.status == 201]; stored != want {
				t.Errorf("%d instructions stored, want %d", stored, want)
			}
			if sim := e.sims[tc.vendor]; sim != nil && sim.Requests(tc.ref) != tc.requests {
				t.Errorf("the vendor was asked %d times, want %d", sim.Requests(tc.ref), tc.requests)
			}
		})
	}
	t.Run("a missing account", func(t *testing.T) {
		t.Parallel()
		r := e.do(t, "POST", pathE9, e.tok, map[string]any{"import_supplier": "PAY", "external_account_number": "NEVER-IMPORTED",
			"vendor": "OK", "reference": "CARD-8", "type": "CARD"})
		if diff := cmp.Diff([]string{"account_not_found@external_account_number"}, codesAt(t, r)); diff != "" || r.Status != 400 {
			t.Errorf("status %d, errors (-want +got):\n%s", r.Status, diff)
		}
	})
}

func paymentDuplicateCase(t *testing.T, e *paymentEnv) {
	number := e.account(t, "DUP-1", "")
	body := map[string]any{"import_supplier": "PAY", "external_account_number": "DUP-1", "vendor": "OK", "reference": "CARD-9", "type": "CARD"}
	if r := e.do(t, "POST", pathE9, e.tok, body); r.Status != 201 {
		t.Fatalf("first: %d %s", r.Status, r.Raw)
	}
	r := e.do(t, "POST", pathE9, e.tok, body)
	if r.Status != 400 || r.Body["code"] != "payment_instruction_already_exists" ||
		r.Body["service_account_number"] != number || r.Body["reference"] != "CARD-9" {
		t.Fatalf("repeat: %d %s", r.Status, r.Raw)
	}
	if diff := cmp.Diff([]string{"payment_instruction_already_exists@reference"}, codesAt(t, r)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if n := e.count(t, `SELECT count(*) FROM payment_instructions WHERE reference = 'CARD-9'`); n != 1 {
		t.Errorf("%d instructions stored, want 1", n)
	}
}

func paymentBusinessCases(t *testing.T, e *paymentEnv) {
	e.business(t, "BIZ-1", "BC-1")
	e.business(t, "BIZ-2", "BC-2")
	e.account(t, "B1-A", "BC-1")
	e.account(t, "B1-B", "BC-1")
	e.account(t, "B2-A", "BC-2")
	body := func(ref string, accounts ...string) map[string]any {
		accs := []any{}
		for _, a := range accounts {
			accs = append(accs, map[string]any{"external_account_number": a})
		}
		return map[string]any{"import_supplier_code": "PAY", "external_business_identifier": "BIZ-1", "vendor": "FLAKY",
			"reference": ref, "type": "CARD", "accounts": accs}
	}
	r := e.do(t, "POST", pathE2, e.tok, body("CARD-10", "B1-A", "B1-B"))
	if r.Status != 201 {
		t.Fatalf("E2: %d %s", r.Status, r.Raw)
	}
	if diff := cmp.Diff(map[string]any{"reference": "CARD-10", "external_business_identifier": "BIZ-1"}, r.Body); diff != "" {
		t.Errorf("201 body (-want +got):\n%s", diff)
	}
	if n := e.count(t, `SELECT count(*) FROM payment_instruction_accounts pa JOIN payment_instructions pi ON pi.id = pa.instruction_id
		WHERE pi.reference = 'CARD-10'`); n != 2 {
		t.Errorf("%d accounts linked, want 2", n)
	}
	tests := []struct {
		name   string
		body   map[string]any
		code   string
		errors []string
	}{
		{"the same reference again", body("CARD-10", "B1-A"), "payment_instruction_already_exists", []string{"payment_instruction_already_exists@reference"}},
		{"an account of another business", body("CARD-11", "B1-A", "B2-A"), "payment_instruction_failed_validation",
			[]string{"account_not_in_business@accounts.1.external_account_number"}},
		{"an account not imported", body("CARD-12", "NOT-IMPORTED", "B1-A"), "payment_instruction_failed_validation",
			[]string{"account_not_found@accounts.0.external_account_number"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.do(t, "POST", pathE2, e.tok, tc.body)
			if r.Status != 400 || r.Body["code"] != tc.code {
				t.Fatalf("%d %s, want 400 %s", r.Status, r.Raw, tc.code)
			}
			if diff := cmp.Diff(tc.errors, codesAt(t, r)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	// A business the supplier does not have is not found, as the
	// reference's E2 answers (404).
	t.Run("a business that does not exist", func(t *testing.T) {
		t.Parallel()
		b := body("CARD-13", "B1-A")
		b["external_business_identifier"] = "BIZ-NOPE"
		r := e.do(t, "POST", pathE2, e.tok, b)
		if r.Status != 404 || r.Body["code"] != "business_not_found" {
			t.Fatalf("%d %s, want 404 business_not_found", r.Status, r.Raw)
		}
		if diff := cmp.Diff([]string{"business_not_found@external_business_identifier"}, codesAt(t, r)); diff != "" {
			t.Errorf("errors (-want +got):\n%s", diff)
		}
	})
}

// Concurrent requests with the same new reference share one verification
// task: exactly one of them answers 201, and every other one the 400 that a
// later duplicate gets, as for requests one after the other.
func paymentConcurrentDuplicateCases(t *testing.T, e *paymentEnv) {
	const concurrent, rounds = 6, 3
	number := e.account(t, "RACE-1", "")
	e.business(t, "BIZ-RACE", "BC-RACE")
	e.account(t, "RACE-B1", "BC-RACE")
	tests := []struct {
		name    string
		path    string
		body    func(ref string) map[string]any
		created func(ref string) map[string]any
		keys    map[string]any // of the duplicate 400, besides reference
	}{
		{
			name: "E9", path: pathE9,
			body: func(ref string) map[string]any {
				return map[string]any{"import_supplier": "PAY", "external_account_number": "RACE-1", "vendor": "OK", "reference": ref, "type": "CARD"}
			},
			created: func(ref string) map[string]any {
				return map[string]any{"service_account_number": number, "reference": ref}
			},
			keys: map[string]any{"service_account_number": number},
		},
		{
			name: "E2", path: pathE2,
			body: func(ref string) map[string]any {
				return map[string]any{"import_supplier_code": "PAY", "external_business_identifier": "BIZ-RACE", "vendor": "OK",
					"reference": ref, "type": "CARD", "accounts": []any{map[string]any{"external_account_number": "RACE-B1"}}}
			},
			created: func(ref string) map[string]any {
				return map[string]any{"reference": ref, "external_business_identifier": "BIZ-RACE"}
			},
			keys: map[string]any{"external_business_identifier": "BIZ-RACE"},
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for round := range rounds {
				ref := fmt.Sprintf("CARD-%d", 20+10*i+round)
				results := make([]response, concurrent)
				var wg sync.WaitGroup
				start := make(chan struct{})
				for n := range concurrent {
					wg.Go(func() {
						<-start
						results[n] = e.do(t, "POST", tc.path, e.tok, tc.body(ref))
					})
				}
				close(start)
				wg.Wait()
				var created int
				for n, r := range results {
					switch r.Status {
					case 201:
						created++
						if diff := cmp.Diff(tc.created(ref), r.Body); diff != "" {
							t.Errorf("%s call %d: 201 body (-want +got):\n%s", ref, n, diff)
						}
					case 400:
						got := map[string]any{"code": r.Body["code"], "errors": codesAt(t, r), "reference": r.Body["reference"]}
						want := map[string]any{"code": "payment_instruction_already_exists",
							"errors": []string{"payment_instruction_already_exists@reference"}, "reference": ref}
						for k := range tc.keys {
							got[k] = r.Body[k]
							want[k] = tc.keys[k]
						}
						if diff := cmp.Diff(want, got); diff != "" {
							t.Errorf("%s call %d: 400 (-want +got):\n%s", ref, n, diff)
						}
					default:
						t.Errorf("%s call %d: %d %s", ref, n, r.Status, r.Raw)
					}
				}
				if created != 1 {
					t.Errorf("%s: %d of %d concurrent requests answered 201, want exactly 1", ref, created, concurrent)
				}
				if n := e.count(t, `SELECT count(*) FROM payment_instructions WHERE reference = $1`, ref); n != 1 {
					t.Errorf("%s: %d instructions stored, want 1", ref, n)
				}
			}
		})
	}
}
