package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/documents"
)

const (
	pathNotes        = "/v1/data-import/notes/create/"
	pathTransactions = "/v1/data-import/transactions/create/"
	pathStatements   = "/v1/data-import/historical-statements/create/"
)

// postImportEnv is a running API with a file:// document store, supplier
// PI (document root pi/docs, requiring documents) and OTHER, and a token
// that may use both.
type postImportEnv struct {
	*service
	docs *documents.Store
	tok  string
}

func newPostImportEnv(t *testing.T) *postImportEnv {
	t.Helper()
	dir := t.TempDir()
	s := startService(t, "api", map[string]string{"DOCUMENTS_URL": "file://" + dir})
	ctx := context.Background()
	for _, sup := range []admin.Supplier{{Code: "PI", DocumentRoot: "pi/docs", RequireDocuments: true}, {Code: "OTHER"}} {
		if _, err := admin.CreateSupplier(ctx, s.db, sup); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CreateTeam(ctx, s.db, "ops"); err != nil {
		t.Fatal(err)
	}
	// The same directory, opened as the service opened it.
	docs, err := documents.Open(ctx, "file://"+dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docs.Close() })
	return &postImportEnv{service: s, docs: docs, tok: s.accessToken(t, s.newKey(t, "pi-team"))}
}

// account creates an imported account of supplier as E5 leaves one; E5
// itself is tested elsewhere. lastBilled may be "".
func (e *postImportEnv) account(t *testing.T, supplier, ean, lastBilled string) {
	t.Helper()
	var lb *string
	if lastBilled != "" {
		lb = &lastBilled
	}
	_, err := e.db.Exec(`
		WITH p AS (
			INSERT INTO import_processes (supplier_id, external_account_number, payload, status, service_account_number, account_created_at)
			SELECT id, $2, '{}', 'COMPLETED', $3, now() - interval '400 days' FROM import_suppliers WHERE code = $1 RETURNING id, supplier_id),
		a AS (
			INSERT INTO accounts (service_account_number, supplier_id, external_account_number, import_process_id, operations_team_id,
				billing_country, last_billed_to_date, created_at)
			SELECT $3, p.supplier_id, $2, p.id, (SELECT id FROM operations_teams WHERE name = 'ops'), 'GB', $4::date, now() - interval '400 days'
			FROM p RETURNING id)
		INSERT INTO ledgers (account_id) SELECT id FROM a`,
		supplier, ean, fmt.Sprintf("A-%08X", time.Now().UnixNano()&0x7fffffff), lb)
	if err != nil {
		t.Fatal(err)
	}
}

// day is today (UTC) moved by n days.
func day(n int) string { return time.Now().UTC().AddDate(0, 0, n).Format(time.DateOnly) }

func TestPostImport_NotesStatementsAndTransactionsOverHTTP(t *testing.T) {
	t.Parallel()
	e := newPostImportEnv(t)
	e.account(t, "PI", "ACC-1", day(-60))
	if _, err := e.docs.Put(context.Background(), "pi/docs", "letters/welcome.pdf", strings.NewReader("%PDF")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.docs.Put(context.Background(), "pi/docs", "statements/s1.pdf", strings.NewReader("%PDF")); err != nil {
		t.Fatal(err)
	}

	// E6: created, then the same notes again are known.
	notes := map[string]any{"import_supplier": "PI", "external_account_number": "ACC-1", "notes": []any{
		map[string]any{"body": "Moved from the old platform.", "created_at": "2024-05-01T10:00:00Z", "is_pinned": true, "unpin_at": "2030-01-01T00:00:00Z"},
		map[string]any{"document_paths": []any{map[string]any{"document_path": "letters/welcome.pdf"}}},
	}}
	for _, want := range []string{"NOTE_CREATION_SUCCESS", "NOTE_ALREADY_EXISTS"} {
		r := e.do(t, "POST", pathNotes, e.tok, notes)
		var got []map[string]any
		if err := json.Unmarshal(r.Raw, &got); r.Status != 201 || err != nil || len(got) != 2 {
			t.Fatalf("E6: %d %s", r.Status, r.Raw)
		}
		if got[0]["status"] != want || got[1]["status"] != want || got[0]["created_at"] != "2024-05-01T10:00:00Z" {
			t.Errorf("E6 answered %s, want status %s", r.Raw, want)
		}
	}
	// A missing document is a 400 at its attr.
	r := e.do(t, "POST", pathNotes, e.tok, map[string]any{"import_supplier": "PI", "external_account_number": "ACC-1",
		"notes": []any{map[string]any{"document_paths": []any{map[string]any{"document_path": "letters/missing.pdf"}}}}})
	if r.Status != 400 || r.Body["code"] != "notes_failed_validation" ||
		!strings.Contains(string(r.Raw), `"attr":"notes.0.document_paths.0.document_path"`) ||
		!strings.Contains(string(r.Raw), `"code":"path_does_not_exist_in_file_store"`) {
		t.Errorf("missing document: %d %s", r.Status, r.Raw)
	}

	// E8: 201 with the validated data; the statement, billed up to and
	// including 31 days ago, makes the open period start 30 days ago.
	st := fmt.Sprintf(`{"import_supplier": "PI", "external_account_number": "ACC-1", "statements": [{"statement_id": "S1", "number": "0001",
		"bill_period_from_date": %q, "bill_period_to_date": %q, "issued_date": %q, "gross_amount": 12340, "statement_path": "statements/s1.pdf"}]}`,
		day(-59), day(-31), day(-29))
	r = e.do(t, "POST", pathStatements, e.tok, st)
	if r.Status != 201 || !strings.Contains(string(r.Raw), `"gross_amount":12340`) || !strings.Contains(string(r.Raw), `"statement_id":"S1"`) {
		t.Fatalf("E8: %d %s", r.Status, r.Raw)
	}
	if r = e.do(t, "POST", pathStatements, e.tok, st); r.Status != 400 ||
		!strings.Contains(string(r.Raw), `"code":"historical_statement_already_exists"`) {
		t.Errorf("E8 again: %d %s", r.Status, r.Raw)
	}

	// E7: inside the period it is added with amounts as strings.
	tx := func(id, date, amount string) string {
		return fmt.Sprintf(`{"transaction_id": %q, "transaction_date": %q, "amount": %s, "type": "CHARGE", "reason": "IMPORTED_CHARGE"}`, id, date, amount)
	}
	body := fmt.Sprintf(`{"import_supplier": "PI", "external_account_number": "ACC-1", "transactions": [%s, %s]}`,
		tx("T1", day(-10), "71"), tx("T2", day(-30), "0.10"))
	r = e.do(t, "POST", pathTransactions+"?force_add_to_current_statement=false", e.tok, body)
	if r.Status != 201 {
		t.Fatalf("E7: %d %s", r.Status, r.Raw)
	}
	var res struct {
		Results []struct {
			Status string         `json:"status"`
			Data   map[string]any `json:"transaction_data"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.Raw, &res); err != nil || len(res.Results) != 2 {
		t.Fatalf("E7 answer %s", r.Raw)
	}
	if res.Results[0].Status != "TRANSACTION_ADDED_TO_ACCOUNT" || res.Results[0].Data["amount"] != "71.00" ||
		res.Results[0].Data["status"] != "TRANSACTION_IMPORT_SUCCESS" || res.Results[1].Data["amount"] != "0.10" {
		t.Errorf("E7 answer %s", r.Raw)
	}
	// Re-sent: nothing twice.
	r = e.do(t, "POST", pathTransactions, e.tok, body)
	if r.Status != 201 || strings.Count(string(r.Raw), "TRANSACTION_ALREADY_EXISTS") != 2 {
		t.Errorf("E7 re-sent: %d %s", r.Status, r.Raw)
	}
	var balance string
	if err := e.db.Get(&balance, `SELECT balance::text FROM ledgers`); err != nil || balance != "71.10" {
		t.Errorf("balance %q %v, want 71.10", balance, err)
	}

	// Before the period (the statement moved it) without force: E7's 400.
	bad := fmt.Sprintf(`{"import_supplier": "PI", "external_account_number": "ACC-1", "transactions": [%s, %s]}`,
		tx("T3", day(-5), "1"), tx("T4", day(-31), "2.50"))
	r = e.do(t, "POST", pathTransactions+"?force_add_to_current_statement=false", e.tok, bad)
	if r.Status != 400 {
		t.Fatalf("E7 refusal: %d %s", r.Status, r.Raw)
	}
	for k, want := range map[string]any{"status": "TRANSACTION_IMPORT_ERROR", "code": "transactions_failed_validation"} {
		if r.Body[k] != want {
			t.Errorf("%s = %v, want %v", k, r.Body[k], want)
		}
	}
	if d, _ := r.Body["error_detail"].(string); !strings.Contains(d, "open statement period") {
		t.Errorf("error_detail %q", d)
	}
	wantData := map[string]any{"transaction_id": "T4", "transaction_date": day(-31), "amount": "2.50", "type": "CHARGE", "reason": "IMPORTED_CHARGE"}
	if diff := cmp.Diff(wantData, r.Body["transaction_data"]); diff != "" {
		t.Errorf("transaction_data (-want +got):\n%s", diff)
	}
	wantErrors := []any{map[string]any{"attr": "transactions.1.transaction_date", "code": "transaction_not_in_open_statement_period",
		"detail": r.Body["error_detail"]}}
	if diff := cmp.Diff(wantErrors, r.Body["errors"]); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	// With force (the default) it is moved into the period.
	r = e.do(t, "POST", pathTransactions, e.tok, bad)
	if r.Status != 201 || !strings.Contains(string(r.Raw), fmt.Sprintf(`"transaction_date":%q`, day(-30))) ||
		!strings.Contains(string(r.Raw), fmt.Sprintf(`"original_transaction_date":%q`, day(-31))) {
		t.Errorf("E7 forced: %d %s", r.Status, r.Raw)
	}
}

// An account that is only staged, unknown, or of a supplier the key may not
// see answers the same 404 on all three endpoints.
func TestPostImport_AccountNotFoundLooksTheSame(t *testing.T) {
	t.Parallel()
	e := newPostImportEnv(t)
	e.account(t, "OTHER", "HIDDEN-1", "")
	if _, err := e.db.Exec(`INSERT INTO import_processes (supplier_id, external_account_number, payload)
		SELECT id, 'STAGED-1', '{}' FROM import_suppliers WHERE code = 'PI'`); err != nil {
		t.Fatal(err)
	}
	piOnly := e.accessToken(t, e.newKey(t, "pi-only", "PI"))
	cases := []struct{ name, tok, supplier, ean string }{
		{"staged only", e.tok, "PI", "STAGED-1"},
		{"unknown", e.tok, "PI", "NOPE"},
		{"supplier the key may not see", piOnly, "OTHER", "HIDDEN-1"},
	}
	items := map[string]string{
		pathNotes:        `"notes": [{"body": "x"}]`,
		pathTransactions: `"transactions": [{"transaction_id": "T", "transaction_date": "2020-01-01", "amount": 1, "type": "CREDIT", "reason": "GENERAL_CREDIT"}]`,
		pathStatements:   `"statements": []`,
	}
	for _, tc := range cases {
		for path, list := range items {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				t.Parallel()
				r := e.do(t, "POST", path, tc.tok, fmt.Sprintf(`{"import_supplier": %q, "external_account_number": %q, %s}`, tc.supplier, tc.ean, list))
				if r.Status != 404 || r.Body["code"] != "account_not_found" {
					t.Errorf("%d %s", r.Status, r.Raw)
				}
				if strings.Contains(string(r.Raw), "OTHER") && tc.supplier != "OTHER" {
					t.Errorf("the answer names another supplier: %s", r.Raw)
				}
			})
		}
	}
}

func TestPostImport_UnknownFieldsAndBadBodies(t *testing.T) {
	t.Parallel()
	e := newPostImportEnv(t)
	e.account(t, "PI", "ACC-2", "")
	cases := []struct {
		name, path, body string
		code, attr       string
	}{
		{"unknown top-level field", pathNotes, `{"import_supplier": "PI", "external_account_number": "ACC-2", "notes": [], "pin_all": true}`, "unknown_field", "pin_all"},
		{"unknown transaction field", pathTransactions, `{"import_supplier": "PI", "external_account_number": "ACC-2", "transactions": [{"transaction_id": "T", "transaction_date": "2020-01-01", "amount": 1, "type": "CREDIT", "reason": "GENERAL_CREDIT", "vat": 0}]}`, "unknown_field", "transactions.0.vat"},
		{"not JSON", pathStatements, `{"statements": [`, "parse_error", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.do(t, "POST", tc.path, e.tok, tc.body)
			if r.Status != 400 {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
			if tc.attr == "" {
				if r.Body["code"] != tc.code {
					t.Errorf("code %v", r.Body["code"])
				}
				return
			}
			found := false
			errs, _ := r.Body["errors"].([]any)
			for _, x := range errs {
				if m, _ := x.(map[string]any); m["attr"] == tc.attr && m["code"] == tc.code {
					found = true
				}
			}
			if !found {
				t.Errorf("no %s at %s: %s", tc.code, tc.attr, r.Raw)
			}
		})
	}
}

// DOCUMENTS_URL opens file:// and s3:// buckets; anything else stops the
// start, naming the variable.
func TestPostImport_DocumentsURLSchemes(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"file://" + t.TempDir(), "s3://bulkimport-documents?region=eu-west-2"} {
		s := startService(t, "api", map[string]string{"DOCUMENTS_URL": u})
		if r := s.do(t, "GET", "/healthz", "", nil); r.Status != 200 {
			t.Errorf("%s: %d", u, r.Status)
		}
	}
	env := map[string]string{"DATABASE_URL": dbtest.NewDatabase(t), "REDIS_URL": dbtest.NewRedis(t), "TOKEN_SECRET": testSecret,
		"HTTP_ADDR": "127.0.0.1:0", "LOG_LEVEL": "error", "DOCUMENTS_URL": "ftp://nowhere/documents"}
	err := run(context.Background(), []string{"api"}, func(k string) string { return env[k] }, io.Discard, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "DOCUMENTS_URL") {
		t.Fatalf("start with an unknown scheme: %v, want an error naming DOCUMENTS_URL", err)
	}
}

// referenceTransactions is the reference's E7 request example
// (reference-api.md section 10, transactions/create), verbatim.
const referenceTransactions = `{
  "import_supplier": "TENTACLE_ENERGY",
  "external_account_number": "EXTERNAL-1234",
  "transactions": [
    {"transaction_id": "1", "transaction_date": "2019-10-01", "amount": 10.0, "type": "CHARGE", "reason": "IMPORTED_CHARGE",
     "display_note": "Some customer facing note about the charge.", "reference": "charge-reference-1", "note": "Some internal note about the charge."},
    {"transaction_id": "2", "transaction_date": "2019-10-01", "amount": 10.0, "type": "CHARGE", "reason": "PREPAY_DEBT_ADJUSTMENT",
     "display_note": "Some customer facing note about the prepay charge.", "reference": "prepay-charge-reference-1",
     "note": "Some internal note about the prepay charge.", "to_prepay_meter_serial_number": "Z16N389556"},
    {"transaction_id": "3", "transaction_date": "2019-10-01", "amount": 10.0, "type": "CREDIT", "reason": "IMPORTED_CREDIT",
     "display_note": "Some customer facing note about the credit.", "reference": "credit-reference-1", "note": "Some internal note about the credit."},
    {"transaction_id": "4", "transaction_date": "2019-10-01", "amount": 10.0, "type": "PAYMENT", "reason": "ACCOUNT_CHARGE_PAYMENT",
     "reference": "payment-reference-1", "payment_type": "DD_REGULAR_COLLECTION", "note": "Some internal note about the payment."},
    {"transaction_id": "5", "transaction_date": "2019-10-01", "amount": 10.0, "type": "REPAYMENT", "reason": "FULL_CREDIT_REFUND",
     "reference": "repayment-reference-1", "payment_type": "DIRECT_CREDIT", "note": "Some internal note about the repayment."},
    {"transaction_id": "6", "transaction_date": "2019-10-01", "amount": 53.24, "type": "SUPPLY_CHARGE",
     "display_note": "Some customer facing note about the supply charge.", "reference": "supply-charge-reference-1",
     "product_code": "SOME-PRODUCT-CODE-4321",
     "line_items": [{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2019-10-01", "end_date": "2019-11-01", "number_of_units": 4.0,
       "net_amount": 44.0, "price_per_unit": 11.0, "units": [4.0, 8.0]}],
     "tax_items": [{"amount": 9.24, "tax_type": "VAT", "value_taxed": 44.0, "rate": 0.21, "unit_type": "PROPORTION"}]}
  ]
}`

// newReferenceEnv is a postImportEnv with the reference's supplier
// TENTACLE_ENERGY (document root tentacle), the product of its example, and
// accounts billed to 2019-09-30, so that the examples' 2019-10-01 is the
// first day of their open statement period.
func newReferenceEnv(t *testing.T, eans ...string) *postImportEnv {
	t.Helper()
	e := newPostImportEnv(t)
	ctx := context.Background()
	if _, err := admin.CreateSupplier(ctx, e.db, admin.Supplier{Code: "TENTACLE_ENERGY", DocumentRoot: "tentacle"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateProduct(ctx, e.db, "SOME-PRODUCT-CODE-4321", []string{"E-1R-SOME-PRODUCT-CODE-4321-A"}); err != nil {
		t.Fatal(err)
	}
	for _, ean := range eans {
		e.account(t, "TENTACLE_ENERGY", ean, "2019-09-30")
	}
	return e
}

// The reference's E7 example is accepted as sent, without moving anything,
// and every field is read back from the database as sent.
func TestPostImport_ReferenceTransactionsExampleIsStoredAsSent(t *testing.T) {
	t.Parallel()
	e := newReferenceEnv(t, "EXTERNAL-1234")
	r := e.do(t, "POST", pathTransactions+"?force_add_to_current_statement=false", e.tok, referenceTransactions)
	if r.Status != 201 || strings.Count(string(r.Raw), "TRANSACTION_ADDED_TO_ACCOUNT") != 6 {
		t.Fatalf("E7: %d %s", r.Status, r.Raw)
	}
	var rows []string
	if err := e.db.Select(&rows, `SELECT concat_ws(' | ', t.transaction_id, t.transaction_date, t.amount, t.type, COALESCE(t.reason, '-'),
			COALESCE(t.display_note, '-'), COALESCE(t.reference, '-'), COALESCE(t.note, '-'), COALESCE(t.payment_type, '-'),
			COALESCE(t.to_prepay_meter_serial_number, '-'), COALESCE(p.code, '-'), COALESCE(t.original_transaction_date::text, '-'))
		FROM transactions t LEFT JOIN products p ON p.id = t.product_id ORDER BY t.transaction_id`); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1 | 2019-10-01 | 10.00 | CHARGE | IMPORTED_CHARGE | Some customer facing note about the charge. | charge-reference-1 | Some internal note about the charge. | - | - | - | -",
		"2 | 2019-10-01 | 10.00 | CHARGE | PREPAY_DEBT_ADJUSTMENT | Some customer facing note about the prepay charge. | prepay-charge-reference-1 | Some internal note about the prepay charge. | - | Z16N389556 | - | -",
		"3 | 2019-10-01 | 10.00 | CREDIT | IMPORTED_CREDIT | Some customer facing note about the credit. | credit-reference-1 | Some internal note about the credit. | - | - | - | -",
		"4 | 2019-10-01 | 10.00 | PAYMENT | ACCOUNT_CHARGE_PAYMENT | - | payment-reference-1 | Some internal note about the payment. | DD_REGULAR_COLLECTION | - | - | -",
		"5 | 2019-10-01 | 10.00 | REPAYMENT | FULL_CREDIT_REFUND | - | repayment-reference-1 | Some internal note about the repayment. | DIRECT_CREDIT | - | - | -",
		"6 | 2019-10-01 | 53.24 | SUPPLY_CHARGE | - | Some customer facing note about the supply charge. | supply-charge-reference-1 | - | - | - | SOME-PRODUCT-CODE-4321 | -",
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("stored transactions (-want +got):\n%s", diff)
	}
	var items []string
	if err := e.db.Select(&items, `SELECT concat_ws(' ', rate_band, start_date, end_date, number_of_units, net_amount, price_per_unit, units::text)
		FROM transaction_line_items UNION ALL
		SELECT concat_ws(' ', amount, tax_type, value_taxed, rate, unit_type) FROM transaction_tax_items`); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"CONSUMPTION_STANDARD 2019-10-01 2019-11-01 4.0 44.00 11.0 {4.0,8.0}", "9.24 VAT 44.00 0.21 PROPORTION"}, items); diff != "" {
		t.Errorf("stored items (-want +got):\n%s", diff)
	}
}

// A SUPPLY_CHARGE whose amount is not what its line and tax items add up
// to, or that has no line items, is refused with the reference's codes at
// their attrs, and nothing of the request is added.
func TestPostImport_InconsistentSupplyChargeIsRefused(t *testing.T) {
	t.Parallel()
	e := newReferenceEnv(t, "EXTERNAL-1234")
	cases := []struct {
		name, old, new string
		want           map[string]any
	}{
		{"amount 99 with net 44.0 and tax 9.24", `"amount": 53.24`, `"amount": 99`,
			map[string]any{"code": "ledger_transaction_amount_does_not_match_with_line_item_net_amount_and_tax_amount", "attr": "transactions.5.amount"}},
		{"no line items", `"line_items": [{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2019-10-01", "end_date": "2019-11-01", "number_of_units": 4.0,
       "net_amount": 44.0, "price_per_unit": 11.0, "units": [4.0, 8.0]}],`, ``,
			map[string]any{"code": "required", "attr": "transactions.5.line_items"}},
		{"net amount that is not units times price", `"net_amount": 44.0, "price_per_unit": 11.0`, `"net_amount": 44.0, "price_per_unit": 12.0`,
			map[string]any{"code": "incorrect_line_item_net_amount", "attr": "transactions.5.line_items.0.net_amount"}},
	}
	for _, tc := range cases {
		body := strings.Replace(referenceTransactions, tc.old, tc.new, 1)
		if body == referenceTransactions {
			t.Fatalf("%s: the example does not contain %s", tc.name, tc.old)
		}
		r := e.do(t, "POST", pathTransactions, e.tok, body)
		errs, _ := r.Body["errors"].([]any)
		if r.Status != 400 || r.Body["code"] != "transactions_failed_validation" || len(errs) != 1 {
			t.Fatalf("%s: %d %s", tc.name, r.Status, r.Raw)
		}
		got := errs[0].(map[string]any)
		delete(got, "detail")
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: error (-want +got):\n%s", tc.name, diff)
		}
	}
	var n int
	if err := e.db.Get(&n, `SELECT count(*) FROM transactions`); err != nil || n != 0 {
		t.Errorf("%d transactions added by refused requests (%v)", n, err)
	}
}

// The spec's own E7 examples: the 201 (PAYMENT with reason GENERAL_CREDIT)
// and the 400 for a date before the open period, whose transaction_data
// shows the amount as a two-place string.
func TestPostImport_SpecTransactionExamplesAnswerAsShown(t *testing.T) {
	t.Parallel()
	e := newReferenceEnv(t, "EXTERNAL-1234")
	payment := func(id, date, amount string) string {
		return fmt.Sprintf(`{"transaction_id": %q, "transaction_date": %q, "amount": %s, "type": "PAYMENT", "reason": "GENERAL_CREDIT",
			"reference": "reference %s", "payment_type": "DEBIT_CARD"}`, id, date, amount, id)
	}
	early := fmt.Sprintf(`{"import_supplier": "TENTACLE_ENERGY", "external_account_number": "EXTERNAL-1234", "transactions": [%s]}`,
		payment("1", "2019-09-28", "71.00"))
	r := e.do(t, "POST", pathTransactions+"?force_add_to_current_statement=false", e.tok, early)
	wantData := map[string]any{"transaction_id": "1", "transaction_date": "2019-09-28", "amount": "71.00", "type": "PAYMENT",
		"reason": "GENERAL_CREDIT", "reference": "reference 1", "payment_type": "DEBIT_CARD"}
	if r.Status != 400 || r.Body["status"] != "TRANSACTION_IMPORT_ERROR" {
		t.Fatalf("400 example: %d %s", r.Status, r.Raw)
	}
	if diff := cmp.Diff(wantData, r.Body["transaction_data"]); diff != "" {
		t.Errorf("400 transaction_data (-want +got):\n%s", diff)
	}

	ok := fmt.Sprintf(`{"import_supplier": "TENTACLE_ENERGY", "external_account_number": "EXTERNAL-1234", "transactions": [%s, %s]}`,
		payment("1", "2019-10-01", "71.00"), payment("2", "2019-10-04", "180"))
	result := func(status, id, date, amount string) map[string]any {
		return map[string]any{"status": status, "transaction_data": map[string]any{"transaction_id": id, "transaction_date": date,
			"amount": amount, "type": "PAYMENT", "reason": "GENERAL_CREDIT", "reference": "reference " + id, "payment_type": "DEBIT_CARD",
			"status": "TRANSACTION_IMPORT_SUCCESS"}}
	}
	for _, status := range []string{"TRANSACTION_ADDED_TO_ACCOUNT", "TRANSACTION_ALREADY_EXISTS"} {
		r = e.do(t, "POST", pathTransactions, e.tok, ok)
		want := map[string]any{"results": []any{result(status, "1", "2019-10-01", "71.00"), result(status, "2", "2019-10-04", "180.00")}}
		if diff := cmp.Diff(want, r.Body); r.Status != 201 || diff != "" {
			t.Errorf("201 example (%d, -want +got):\n%s", r.Status, diff)
		}
	}
}

// dry_run in the body answers 201 with dry_run true and writes nothing.
func TestPostImport_TransactionsDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	e := newReferenceEnv(t, "EXTERNAL-1234")
	dry := strings.Replace(referenceTransactions, `"transactions": [`, `"dry_run": true, "transactions": [`, 1)
	r := e.do(t, "POST", pathTransactions, e.tok, dry)
	if r.Status != 201 || r.Body["dry_run"] != true || strings.Count(string(r.Raw), "TRANSACTION_ADDED_TO_ACCOUNT") != 6 {
		t.Fatalf("dry run: %d %s", r.Status, r.Raw)
	}
	var n int
	var balance string
	if err := e.db.Get(&n, `SELECT count(*) FROM transactions`); err != nil || n != 0 {
		t.Errorf("%d transactions after a dry run (%v)", n, err)
	}
	if err := e.db.Get(&balance, `SELECT balance::text FROM ledgers`); err != nil || balance != "0.00" {
		t.Errorf("balance %q after a dry run (%v)", balance, err)
	}
	if r = e.do(t, "POST", pathTransactions, e.tok, referenceTransactions); r.Status != 201 || r.Body["dry_run"] != nil {
		t.Errorf("real run: %d %s", r.Status, r.Raw)
	}
}

// The reference's E8 example is accepted as sent: gross_amount 100 is an
// integer in the lowest denomination, stored and answered as 100. So are
// the statements of its account example, which share a boundary day.
func TestPostImport_ReferenceStatementExamplesAreStoredAsSent(t *testing.T) {
	t.Parallel()
	e := newReferenceEnv(t, "EXTERNAL-1234")
	if _, err := e.docs.Put(context.Background(), "tentacle", "path/to/statement-1.pdf", strings.NewReader("%PDF")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"EXTERNAL-1234/2019-06-01-to-2019-07-01.pdf", "EXTERNAL-1234/2019-07-01-to-2019-08-01.pdf"} {
		if _, err := e.docs.Put(context.Background(), "tentacle", f, strings.NewReader("%PDF")); err != nil {
			t.Fatal(err)
		}
	}
	example := `{"import_supplier": "TENTACLE_ENERGY", "external_account_number": "EXTERNAL-1234", "statements": [{
		"bill_period_from_date": "2022-01-01", "bill_period_to_date": "2022-01-31", "statement_id": "1", "issued_date": "2022-02-02",
		"number": "1", "gross_amount": 100, "statement_path": "path/to/statement-1.pdf"}]}`
	r := e.do(t, "POST", pathStatements, e.tok, example)
	wantBody := map[string]any{"import_supplier": "TENTACLE_ENERGY", "external_account_number": "EXTERNAL-1234", "statements": []any{
		map[string]any{"statement_id": "1", "number": "1", "bill_period_from_date": "2022-01-01", "bill_period_to_date": "2022-01-31",
			"issued_date": "2022-02-02", "gross_amount": float64(100), "statement_path": "path/to/statement-1.pdf"}}}
	if diff := cmp.Diff(wantBody, r.Body); r.Status != 201 || diff != "" {
		t.Errorf("E8 example (%d, -want +got):\n%s", r.Status, diff)
	}
	// From the account example; its leading slash is not a relative path
	// (spec 2.8), so the paths are sent without it.
	accountExample := `{"import_supplier": "TENTACLE_ENERGY", "external_account_number": "EXTERNAL-1234", "statements": [
		{"bill_period_from_date": "2019-06-01", "bill_period_to_date": "2019-07-01", "statement_path": "EXTERNAL-1234/2019-06-01-to-2019-07-01.pdf", "statement_id": "54321"},
		{"bill_period_from_date": "2019-07-01", "bill_period_to_date": "2019-08-01", "statement_path": "EXTERNAL-1234/2019-07-01-to-2019-08-01.pdf", "statement_id": "12345"}]}`
	if r = e.do(t, "POST", pathStatements, e.tok, accountExample); r.Status != 201 {
		t.Errorf("statements sharing a boundary day: %d %s", r.Status, r.Raw)
	}
	var rows []string
	if err := e.db.Select(&rows, `SELECT concat_ws(' ', statement_id, COALESCE(number, '-'), bill_period_from_date, bill_period_to_date,
			COALESCE(issued_date::text, '-'), COALESCE(gross_amount::text, '-'), statement_path)
		FROM historical_statements ORDER BY bill_period_from_date`); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"54321 - 2019-06-01 2019-07-01 - - EXTERNAL-1234/2019-06-01-to-2019-07-01.pdf",
		"12345 - 2019-07-01 2019-08-01 - - EXTERNAL-1234/2019-07-01-to-2019-08-01.pdf",
		"1 1 2022-01-01 2022-01-31 2022-02-02 100 path/to/statement-1.pdf",
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("stored statements (-want +got):\n%s", diff)
	}
}

// The open statement period's boundaries over HTTP: a statement's last day
// (bill_period_to_date, inclusive) is billed and the period opens the day
// after it, so a statement ending yesterday leaves today open and one
// ending today leaves nothing open; a last_billed_to_date later than the
// last statement wins; an account billed to today takes no transaction, and
// force never moves one into the future.
func TestPostImport_OpenStatementPeriodBoundaries(t *testing.T) {
	t.Parallel()
	e := newPostImportEnv(t)
	e.account(t, "PI", "ENDS-YESTERDAY", "")
	e.account(t, "PI", "ENDS-TODAY", "")
	e.account(t, "PI", "BILLED-LATER", day(-5))
	e.account(t, "PI", "BILLED-TODAY", day(0))
	statement := func(ean, id, from, to string) {
		t.Helper()
		r := e.do(t, "POST", pathStatements, e.tok, fmt.Sprintf(`{"import_supplier": "PI", "external_account_number": %q,
			"statements": [{"statement_id": %q, "bill_period_from_date": %q, "bill_period_to_date": %q}]}`, ean, id, from, to))
		if r.Status != 201 {
			t.Fatalf("E8 %s: %d %s", ean, r.Status, r.Raw)
		}
	}
	statement("ENDS-YESTERDAY", "S1", day(-30), day(-1))
	statement("ENDS-TODAY", "S1", day(-30), day(0))
	statement("BILLED-LATER", "S1", day(-60), day(-30))
	statement("BILLED-TODAY", "S1", day(-60), day(-30))

	post := func(ean, date, query string) response {
		return e.do(t, "POST", pathTransactions+query, e.tok, fmt.Sprintf(`{"import_supplier": "PI", "external_account_number": %q,
			"transactions": [{"transaction_id": "T-%s", "transaction_date": %q, "amount": 1, "type": "CREDIT", "reason": "GENERAL_CREDIT"}]}`, ean, date, date))
	}
	cases := []struct {
		name, ean, date, query string
		status                 int
		movedTo                string // the date answered, when 201
	}{
		{"statement ending yesterday: today is open", "ENDS-YESTERDAY", day(0), "?force_add_to_current_statement=false", 201, day(0)},
		{"statement ending yesterday: its last day is billed", "ENDS-YESTERDAY", day(-1), "?force_add_to_current_statement=false", 400, ""},
		{"statement ending yesterday: forced to the day after its last", "ENDS-YESTERDAY", day(-1), "", 201, day(0)},
		{"statement ending today: today is billed", "ENDS-TODAY", day(0), "?force_add_to_current_statement=false", 400, ""},
		{"statement ending today: force does not move into tomorrow", "ENDS-TODAY", day(-3), "", 400, ""},
		{"billed date after the statement: its day is closed", "BILLED-LATER", day(-5), "?force_add_to_current_statement=false", 400, ""},
		{"billed date after the statement: forced to the day after it", "BILLED-LATER", day(-20), "", 201, day(-4)},
		{"billed to today: today is closed", "BILLED-TODAY", day(0), "?force_add_to_current_statement=false", 400, ""},
		{"billed to today: force does not move into tomorrow", "BILLED-TODAY", day(-3), "?force_add_to_current_statement=true", 400, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := post(tc.ean, tc.date, tc.query)
			if r.Status != tc.status {
				t.Fatalf("%d, want %d: %s", r.Status, tc.status, r.Raw)
			}
			if tc.status == 400 {
				if !strings.Contains(string(r.Raw), `"code":"transaction_not_in_open_statement_period"`) {
					t.Errorf("refused for another reason: %s", r.Raw)
				}
				return
			}
			if !strings.Contains(string(r.Raw), fmt.Sprintf(`"transaction_date":%q`, tc.movedTo)) {
				t.Errorf("answered %s, want transaction_date %s", r.Raw, tc.movedTo)
			}
		})
	}
	var n int
	if err := e.db.Get(&n, `SELECT count(*) FROM transactions WHERE transaction_date > $1::date`, day(0)); err != nil || n != 0 {
		t.Errorf("%d transactions dated in the future (%v)", n, err)
	}
}
