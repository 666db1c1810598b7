package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	docs, err := documents.Open(ctx, "file://"+dir)
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

	// E8: 201 with the validated data; the statement ends the closed history
	// 30 days ago.
	st := fmt.Sprintf(`{"import_supplier": "PI", "external_account_number": "ACC-1", "statements": [{"statement_id": "S1", "number": "0001",
		"bill_period_from_date": %q, "bill_period_to_date": %q, "issued_date": %q, "gross_amount": 123.4, "statement_path": "statements/s1.pdf"}]}`,
		day(-59), day(-30), day(-29))
	r = e.do(t, "POST", pathStatements, e.tok, st)
	if r.Status != 201 || !strings.Contains(string(r.Raw), `"gross_amount":"123.40"`) || !strings.Contains(string(r.Raw), `"statement_id":"S1"`) {
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
		tx("T1", day(-10), "71"), tx("T2", day(-29), "0.10"))
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
	wantData := map[string]any{"transaction_id": "T4", "transaction_date": day(-31), "amount": 2.5, "type": "CHARGE", "reason": "IMPORTED_CHARGE"}
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
	if r.Status != 201 || !strings.Contains(string(r.Raw), fmt.Sprintf(`"transaction_date":%q`, day(-29))) ||
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
