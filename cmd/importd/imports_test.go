package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/status"
)

// End-to-end tests of E3, E4 and E10 to E13: the real service,
// started by run() on port 0, against PostgreSQL and Redis of the test's own.

const (
	pathValidateAccount = "/v1/data-import/validate-account/"
	pathStageAccount    = "/v1/data-import/account-import-process/create-or-update/"
)

func pathTransferStatus(supplier, ean string) string {
	return "/v1/data-import/account-transfer-status/" + url.PathEscape(supplier) + "/" + url.PathEscape(ean) + "/"
}

// pathList is E11 ("all"), E12 ("pending") or E13 ("imported").
func pathList(which, supplier, query string) string {
	p := "/v1/data-import/" + which + "-account-import-processes/" + url.PathEscape(supplier) + "/"
	if query != "" {
		p += "?" + query
	}
	return p
}

// fixtureTariffCodes are the tariffs that the agreements of
// jobs/account/testdata/account.json name.
var fixtureTariffCodes = map[string][]string{
	"E-1R":    {"E-1R-FIX-24M-C", "E-1R-VAR-C"},
	"WH-RENT": {"WH-RENT-STD"},
	"HP":      {"HP-STD"},
}

// fixtureContractID is the business contract the fixture's account belongs to.
const fixtureContractID = "BC-2024-0042"

// importsEnv is a running API with the catalogue the account fixture needs,
// and tokens of two keys: one that sees every supplier and one limited to
// supplier OTHER.
type importsEnv struct {
	s        *service
	tok      string
	otherTok string
}

// newImportsEnv starts the API with suppliers DEMO and OTHER (both GB,
// Ongoing, each with business contract BC-2024-0042) and the fixture's
// tariffs.
func newImportsEnv(t testing.TB) *importsEnv {
	t.Helper()
	e := &importsEnv{s: startService(t, "api", nil)}
	ctx := context.Background()
	for product, tariffs := range fixtureTariffCodes {
		if _, err := admin.CreateProduct(ctx, e.s.db, product, tariffs); err != nil {
			t.Fatal(err)
		}
	}
	e.addSupplier(t, "DEMO", status.Ongoing)
	e.addSupplier(t, "OTHER", status.Ongoing)
	e.tok = e.s.accessToken(t, e.s.newKey(t, "all-suppliers"))
	e.otherTok = e.s.accessToken(t, e.s.newKey(t, "other-only", "OTHER"))
	return e
}

// addSupplier creates a GB supplier with the fixture's business contract.
func (e *importsEnv) addSupplier(t testing.TB, code, status string) {
	t.Helper()
	sup, err := admin.CreateSupplier(context.Background(), e.s.db, admin.Supplier{Code: code, Status: status})
	if err != nil {
		t.Fatal(err)
	}
	e.exec(t, `WITH b AS (INSERT INTO businesses (supplier_id, external_business_identifier, business_type, company_number, company_name)
		VALUES ($1, 'BIZ-' || $2::text, 'LTD', '01234567', 'Hughes Ltd') RETURNING id)
		INSERT INTO business_contracts (business_id, supplier_id, identifier) SELECT id, $1, $3 FROM b`, sup.ID, code, fixtureContractID)
}

func (e *importsEnv) exec(t testing.TB, q string, args ...any) int64 {
	t.Helper()
	res, err := e.s.db.Exec(q, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	n, _ := res.RowsAffected()
	return n
}

// setProcess changes the import process row of (supplier, ean) with SQL
// (set is the SET list; $3 onwards are its arguments), as the worker would.
func (e *importsEnv) setProcess(t testing.TB, supplier, ean, set string, args ...any) {
	t.Helper()
	n := e.exec(t, `UPDATE import_processes SET `+set+`
		WHERE supplier_id = (SELECT id FROM import_suppliers WHERE code = $1) AND external_account_number = $2`,
		append([]any{supplier, ean}, args...)...)
	if n != 1 {
		t.Fatalf("setProcess %s/%s: %d rows updated", supplier, ean, n)
	}
}

// processRows is every import process of the supplier, all columns, as JSON.
func (e *importsEnv) processRows(t testing.TB, supplier string) []string {
	t.Helper()
	rows := []string{}
	if err := e.s.db.Select(&rows, `SELECT to_jsonb(p)::text FROM import_processes p
		JOIN import_suppliers s ON s.id = p.supplier_id WHERE s.code = $1 ORDER BY p.id`, supplier); err != nil {
		t.Fatal(err)
	}
	return rows
}

// storedPayload is the staged JSONB of (supplier, ean), decoded.
func (e *importsEnv) storedPayload(t testing.TB, supplier, ean string) map[string]any {
	t.Helper()
	var raw []byte
	if err := e.s.db.Get(&raw, `SELECT payload FROM import_processes p JOIN import_suppliers s ON s.id = p.supplier_id
		WHERE s.code = $1 AND p.external_account_number = $2`, supplier, ean); err != nil {
		t.Fatalf("payload of %s/%s: %v", supplier, ean, err)
	}
	return decodeJSON(t, raw)
}

// stageOK stages body and fails the test unless the answer is 200 or 201.
func (e *importsEnv) stageOK(t testing.TB, body any) response {
	t.Helper()
	r := e.s.do(t, "POST", pathStageAccount, e.tok, body)
	if r.Status != http.StatusCreated && r.Status != http.StatusOK {
		t.Fatalf("staging: %d %s", r.Status, r.Raw)
	}
	return r
}

// decodeJSON decodes raw keeping numbers as written, so that a payload and
// its stored copy compare exactly.
func decodeJSON(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return m
}

// accountDoc is jobs/account/testdata/account.json (valid for DEMO, GB)
// decoded for editing, with the supplier and external account number given.
func accountDoc(t testing.TB, supplier, ean string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../../jobs/account/testdata/account.json")
	if err != nil {
		t.Fatal(err)
	}
	m := decodeJSON(t, raw)
	m["import_supplier"] = supplier
	m["external_account_number"] = ean
	return m
}

// deleteField, as the value of an edit, removes the field.
var deleteField = &struct{ deleted bool }{}

// edit sets the value at a dot path of doc ("customers.0.mobile"; numeric
// parts index arrays), or removes it when value is deleteField.
func edit(t testing.TB, doc map[string]any, path string, value any) {
	t.Helper()
	parts := strings.Split(path, ".")
	var cur any = doc
	for i, p := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				if value == deleteField {
					delete(c, p)
				} else {
					c[p] = value
				}
				return
			}
			cur = c[p]
		case []any:
			n, err := strconv.Atoi(p)
			if err != nil || n >= len(c) {
				t.Fatalf("edit %s: no element %s", path, p)
			}
			if last {
				c[n] = value
				return
			}
			cur = c[n]
		default:
			t.Fatalf("edit %s: %s is not inside an object or array", path, p)
		}
	}
}

// get returns the value at a dot path of a decoded JSON document.
func get(t testing.TB, doc any, path string) any {
	t.Helper()
	cur := doc
	for _, p := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[p]
			if !ok {
				t.Fatalf("get %s: no field %s", path, p)
			}
			cur = v
		case []any:
			n, err := strconv.Atoi(p)
			if err != nil || n >= len(c) {
				t.Fatalf("get %s: no element %s", path, p)
			}
			cur = c[n]
		default:
			t.Fatalf("get %s: %s is not inside an object or array", path, p)
		}
	}
	return cur
}

// fieldProblem is one element of a section 7 errors array, without its
// human-readable detail.
type fieldProblem struct{ Attr, Code string }

// problemsOf returns the (attr, code) pairs of a section 7 body, sorted, and
// fails the test if an element has no detail.
func problemsOf(t testing.TB, body map[string]any) []fieldProblem {
	t.Helper()
	errs, ok := body["errors"].([]any)
	if !ok {
		t.Fatalf("no errors array in %v", body)
	}
	out := []fieldProblem{}
	for _, x := range errs {
		m, _ := x.(map[string]any)
		if d, _ := m["detail"].(string); d == "" {
			t.Errorf("problem without detail: %v", m)
		}
		a, _ := m["attr"].(string)
		c, _ := m["code"].(string)
		out = append(out, fieldProblem{a, c})
	}
	slices.SortFunc(out, func(a, b fieldProblem) int { return strings.Compare(a.Attr+" "+a.Code, b.Attr+" "+b.Code) })
	return out
}

func TestValidateAccount_FixtureAnswers200WithNormalisedData(t *testing.T) {
	t.Parallel()
	e := newImportsEnv(t)
	r := e.s.do(t, "POST", pathValidateAccount, e.tok, accountDoc(t, "DEMO", "A-00012345"))
	if r.Status != http.StatusOK {
		t.Fatalf("fixture: %d %s", r.Status, r.Raw)
	}
	got := decodeJSON(t, r.Raw)
	cases := []struct {
		name, path string
		want       any
	}{
		{"supplier kept", "import_supplier", "DEMO"},
		{"account number kept", "external_account_number", "A-00012345"},
		{"mobile with spaces to E.164", "customers.0.mobile", "+447911123456"},
		{"national landline read in the supplier's country", "customers.0.landline", "+441614960123"},
		{"alternative phone number to E.164", "customers.0.alternative_phone_numbers.0.phone_number", "+442079460018"},
		{"empty landline stays empty", "customers.1.landline", ""},
		{"e-mail domain lower-cased", "customers.0.email", "Amelia.Hughes@brightmail.co.uk"},
		{"billing postcode upper-cased and spaced", "billing_address.postal_code", "M20 2GL"},
		{"supply postcode upper-cased and spaced", "supply_addresses.1.supply_postcode", "SK4 1AB"},
		{"agreements sorted by effective_from", "supply_addresses.0.supply_points.0.agreements.0.effective_from", "2019-04-01"},
		{"decimal kept as written", "supply_addresses.0.supply_points.0.meters.0.meter_type.volts_high", json.Number("253.0")},
		{"free-form metadata kept", "metadata.0.value", map[string]any{"system": "legacy-crm", "id": json.Number("883421")}},
		{"empty ledgers kept", "ledgers", []any{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, get(t, got, tc.path)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.path, diff)
			}
		})
	}
	t.Run("no internal fields leak", func(t *testing.T) {
		t.Parallel()
		for k := range got {
			if k == "Supplier" || k == "supplier" {
				t.Errorf("the answer has the resolved supplier as %q", k)
			}
		}
	})
	t.Run("normalised data validates to itself", func(t *testing.T) {
		t.Parallel()
		again := e.s.do(t, "POST", pathValidateAccount, e.tok, string(r.Raw))
		if again.Status != http.StatusOK {
			t.Fatalf("the normalised data is refused: %d %s", again.Status, again.Raw)
		}
		if diff := cmp.Diff(got, decodeJSON(t, again.Raw)); diff != "" {
			t.Errorf("normalising twice changes the data (-once +twice):\n%s", diff)
		}
	})
}

// problemCase is one way to break the fixture and the problem it must cause.
type problemCase struct {
	name, path string
	value      any
	want       fieldProblem
}

var accountProblems = []problemCase{
	{"wrong JSON type", "customers.0.given_name", json.Number("42"), fieldProblem{"customers.0.given_name", "invalid"}},
	{"bad date", "supply_addresses.0.supply_points.1.supply_start_date", "2021-02-30", fieldProblem{"supply_addresses.0.supply_points.1.supply_start_date", "invalid_date"}},
	{"code of 65 characters", "supply_addresses.0.supply_points.0.meters.0.status", strings.Repeat("B", 65), fieldProblem{"supply_addresses.0.supply_points.0.meters.0.status", "invalid_choice"}},
	{"missing required field", "billing_address.country", deleteField, fieldProblem{"billing_address.country", "required"}},
	{"unknown field", "customers.1.nickname", "Tommy", fieldProblem{"customers.1.nickname", "unknown_field"}},
	{"invalid phone number", "customers.0.landline", "12", fieldProblem{"customers.0.landline", "invalid_phone_number"}},
}

// brokenAccount is the fixture with the given problems introduced.
func brokenAccount(t testing.TB, supplier, ean string, cases ...problemCase) map[string]any {
	t.Helper()
	doc := accountDoc(t, supplier, ean)
	for _, c := range cases {
		edit(t, doc, c.path, c.value)
	}
	return doc
}

func TestValidateAccount_ReportsEveryProblemAtItsAttr(t *testing.T) {
	t.Parallel()
	e := newImportsEnv(t)
	type tcase struct {
		name     string
		problems []problemCase
	}
	cases := []tcase{}
	for _, p := range accountProblems {
		cases = append(cases, tcase{p.name, []problemCase{p}})
	}
	cases = append(cases, tcase{"all of them at once", accountProblems})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.s.do(t, "POST", pathValidateAccount, e.tok, brokenAccount(t, "DEMO", "A-1", tc.problems...))
			if r.Status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", r.Status, r.Raw)
			}
			if r.Body["detail"] != "Could not validate account data." || r.Body["code"] != "account_failed_validation" {
				t.Errorf("top level detail %q code %q", r.Body["detail"], r.Body["code"])
			}
			want := []fieldProblem{}
			for _, p := range tc.problems {
				want = append(want, p.want)
			}
			slices.SortFunc(want, func(a, b fieldProblem) int { return strings.Compare(a.Attr+" "+a.Code, b.Attr+" "+b.Code) })
			if diff := cmp.Diff(want, problemsOf(t, r.Body)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// E3 of an imported account answers as the reference's validate endpoint
// (reference-api.md 4.3, AccountAlreadyImportedResponse) in the section 7
// body, and E4 and E5 answer it the same way.
func TestValidateAccount_ImportedAccountAnswers400WithBothNumbers(t *testing.T) {
	t.Parallel()
	e := newImportsEnv(t)
	e.stageOK(t, accountDoc(t, "DEMO", "IMP-1"))
	e.setProcess(t, "DEMO", "IMP-1", `status = 'COMPLETED', service_account_number = 'A-0000BEEF', account_created_at = now()`)
	detail := "The account import process with the account number IMP-1 has already been imported."
	want := map[string]any{
		"detail": detail, "code": "account_import_process_already_imported",
		"errors":                  []any{map[string]any{"detail": detail, "code": "account_import_process_already_imported", "attr": "non_field_errors"}},
		"external_account_number": "IMP-1", "service_account_number": "A-0000BEEF",
	}
	for _, path := range []string{pathValidateAccount, pathStageAccount} {
		r := e.s.do(t, "POST", path, e.tok, accountDoc(t, "DEMO", "IMP-1"))
		if diff := cmp.Diff(want, r.Body); r.Status != http.StatusBadRequest || diff != "" {
			t.Errorf("%s: status %d (-want +got):\n%s", path, r.Status, diff)
		}
	}
	if r := e.s.do(t, "POST", pathValidateAccount, e.tok, accountDoc(t, "DEMO", "NOT-IMPORTED")); r.Status != http.StatusOK {
		t.Errorf("account not imported: %d %s", r.Status, r.Raw)
	}
}

func TestValidateAccount_BodyThatIsNotAJSONObjectIsAParseError(t *testing.T) {
	t.Parallel()
	e := newImportsEnv(t)
	cases := []struct {
		name, body string
		// offset is the byte offset the detail must name; -1 when the JSON
		// is well formed but not an object.
		offset int
	}{
		{"truncated object", `{"import_supplier": "DEMO"`, 26},
		{"missing colon", `{"import_supplier" "DEMO"}`, 19},
		{"trailing comma", `{"import_supplier": "DEMO",}`, 27},
		{"bad literal", `{"unknown_occupier": tru}`, 24},
		{"second value after the object", `{} {}`, 3},
		{"empty body", ``, 0},
		{"array", `[]`, -1},
		{"string", `"x"`, -1},
		{"number", `42`, -1},
		{"null", `null`, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest("POST", e.s.base+pathValidateAccount, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Token "+e.tok)
			r := doReq(t, req)
			if r.Status != http.StatusBadRequest || r.Body["code"] != "parse_error" {
				t.Fatalf("got %d %s, want 400 parse_error", r.Status, r.Raw)
			}
			detail, _ := r.Body["detail"].(string)
			if tc.offset >= 0 && !strings.Contains(detail, fmt.Sprintf("byte offset %d:", tc.offset)) {
				t.Errorf("detail %q does not name byte offset %d", detail, tc.offset)
			}
			if _, ok := r.Body["errors"].([]any); !ok {
				t.Errorf("no errors array: %s", r.Raw)
			}
		})
	}
}

// An API key limited to some suppliers must not learn whether another
// supplier exists: every endpoint answers for an invisible supplier exactly
// as for a missing one. The invisible answers come from a service where
// HIDDEN exists (with a staged account), the missing ones from a second
// service where it never did, so that both answer byte-identical requests.
func TestVisibility_InvisibleSupplierAnswersExactlyLikeAMissingOne(t *testing.T) {
	t.Parallel()
	e := newImportsEnv(t)
	e.addSupplier(t, "HIDDEN", status.Ongoing)
	account := accountDoc(t, "HIDDEN", "H-1")
	e.stageOK(t, account)
	without := newImportsEnv(t)

	cases := []struct {
		name, method, path string
		body               any
		visible            int // the answer to a key that sees HIDDEN
		hidden             int
	}{
		{"E3 validate", "POST", pathValidateAccount, account, http.StatusOK, http.StatusBadRequest},
		{"E4 stage", "POST", pathStageAccount, account, http.StatusOK, http.StatusBadRequest},
		{"E10 status", "GET", pathTransferStatus("HIDDEN", "H-1"), nil, http.StatusOK, http.StatusNotFound},
		{"E11 all", "GET", pathList("all", "HIDDEN", ""), nil, http.StatusOK, http.StatusNotFound},
		{"E12 pending", "GET", pathList("pending", "HIDDEN", ""), nil, http.StatusOK, http.StatusNotFound},
		{"E13 imported", "GET", pathList("imported", "HIDDEN", ""), nil, http.StatusOK, http.StatusNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if r := e.s.do(t, tc.method, tc.path, e.tok, tc.body); r.Status != tc.visible {
				t.Fatalf("with a key that sees HIDDEN: %d %s, want %d", r.Status, r.Raw, tc.visible)
			}
			invisible := e.s.do(t, tc.method, tc.path, e.otherTok, tc.body)
			missing := without.s.do(t, tc.method, tc.path, without.tok, tc.body)
			if missing.Status != tc.hidden || invisible.Status != tc.hidden {
				t.Fatalf("status invisible %d, missing %d, want %d both", invisible.Status, missing.Status, tc.hidden)
			}
			if diff := cmp.Diff(string(missing.Raw), string(invisible.Raw)); diff != "" {
				t.Errorf("invisible supplier answers unlike a missing one (-missing +invisible):\n%s", diff)
			}
			if code, _ := invisible.Body["code"].(string); code == "" {
				t.Errorf("no code: %s", invisible.Raw)
			}
		})
	}
}

func TestStageAccount_FirstStagingIs201ThenLaterOnes200ReplaceTheData(t *testing.T) {
	t.Parallel()
	e := newImportsEnv(t)
	first := accountDoc(t, "DEMO", "A-00012345")
	second := accountDoc(t, "DEMO", "A-00012345")
	edit(t, second, "customers.0.given_name", "Amy")
	edit(t, second, "customers.1.mobile", "+44 7911 123458")
	third := accountDoc(t, "DEMO", "A-00012345")
	edit(t, third, "unknown_occupier", true)
	edit(t, third, "customers", deleteField)
	// An unknown occupier has one supply address at most (reference 6.1).
	edit(t, third, "supply_addresses", get(t, third, "supply_addresses").([]any)[:1])

	var lastUpdate time.Time
	for i, tc := range []struct {
		name string
		body map[string]any
		want int
	}{
		{"first staging", first, http.StatusCreated},
		{"second staging replaces", second, http.StatusOK},
		{"third staging replaces", third, http.StatusOK},
	} {
		r := e.s.do(t, "POST", pathStageAccount, e.tok, tc.body)
		if r.Status != tc.want {
			t.Fatalf("%s: %d %s, want %d", tc.name, r.Status, r.Raw, tc.want)
		}
		if diff := cmp.Diff(map[string]any{"import_supplier": "DEMO", "external_account_number": "A-00012345"}, r.Body); diff != "" {
			t.Errorf("%s: body (-want +got):\n%s", tc.name, diff)
		}
		// The stored payload is what E3 answers for the same input: the
		// normalised data, not the raw request.
		v := e.s.do(t, "POST", pathValidateAccount, e.tok, tc.body)
		if v.Status != http.StatusOK {
			t.Fatalf("%s: E3 %d %s", tc.name, v.Status, v.Raw)
		}
		if diff := cmp.Diff(decodeJSON(t, v.Raw), e.storedPayload(t, "DEMO", "A-00012345")); diff != "" {
			t.Errorf("%s: stored payload is not the normalised one (-E3 +stored):\n%s", tc.name, diff)
		}
		var row struct {
			N         int       `db:"n"`
			Status    string    `db:"status"`
			UpdatedAt time.Time `db:"updated_at"`
		}
		if err := e.s.db.Get(&row, `SELECT count(*) OVER () AS n, status, updated_at FROM import_processes`); err != nil {
			t.Fatal(err)
		}
		if row.N != 1 || row.Status != "UNKNOWN" {
			t.Errorf("%s: %d rows, status %s; want one UNKNOWN row", tc.name, row.N, row.Status)
		}
		if i > 0 && !row.UpdatedAt.After(lastUpdate) {
			t.Errorf("%s: updated_at %v did not move past %v", tc.name, row.UpdatedAt, lastUpdate)
		}
		lastUpdate = row.UpdatedAt
	}
	if got := get(t, e.storedPayload(t, "DEMO", "A-00012345"), "unknown_occupier"); got != true {
		t.Errorf("the last write did not win: unknown_occupier = %v", got)
	}
}

func TestStageAccount_RefusalsHaveTheirOwnCodeAndChangeNothing(t *testing.T) {
	t.Parallel()
	e := newImportsEnv(t)
	ctx := context.Background()
	// Each case has a supplier of its own, so that the cases run at once and
	// "nothing changed" can be checked over the supplier's whole table.
	cases := []struct {
		name   string
		status string // of the supplier
		// prepare runs before the refused staging.
		prepare func(t *testing.T, supplier, ean string)
		body    func(t *testing.T, supplier, ean string) map[string]any
		code    string
		attr    string // of the single problem; "" when there is none
		extra   map[string]any
	}{
		{
			name: "invalid payload",
			body: func(t *testing.T, supplier, ean string) map[string]any {
				return brokenAccount(t, supplier, ean, accountProblems...)
			},
			code: "account_failed_validation",
		},
		{
			name: "invalid payload of a staged account",
			prepare: func(t *testing.T, supplier, ean string) {
				e.stageOK(t, accountDoc(t, supplier, ean))
			},
			body: func(t *testing.T, supplier, ean string) map[string]any {
				return brokenAccount(t, supplier, ean, accountProblems[0])
			},
			code: "account_failed_validation",
		},
		{
			name: "already imported",
			prepare: func(t *testing.T, supplier, ean string) {
				e.stageOK(t, accountDoc(t, supplier, ean))
				e.setProcess(t, supplier, ean, `status = 'COMPLETED', service_account_number = 'A-0000BEEF', account_created_at = now()`)
			},
			code:  "account_import_process_already_imported",
			extra: map[string]any{"service_account_number": "A-0000BEEF"},
		},
		{
			name: "being created now",
			prepare: func(t *testing.T, supplier, ean string) {
				e.stageOK(t, accountDoc(t, supplier, ean))
				e.setProcess(t, supplier, ean, `status = 'IN_PROGRESS'`)
			},
			code: "account_import_in_progress",
			attr: "external_account_number",
		},
		{
			name: "marked to be skipped",
			prepare: func(t *testing.T, supplier, ean string) {
				if err := admin.SkipAccount(ctx, e.s.db, supplier, ean); err != nil {
					t.Fatal(err)
				}
			},
			code: "account_marked_to_be_skipped",
			attr: "external_account_number",
		},
		{
			name: "marked to be skipped after staging",
			prepare: func(t *testing.T, supplier, ean string) {
				e.stageOK(t, accountDoc(t, supplier, ean))
				if err := admin.SkipAccount(ctx, e.s.db, supplier, ean); err != nil {
					t.Fatal(err)
				}
			},
			code: "account_marked_to_be_skipped",
			attr: "external_account_number",
		},
		{
			name:   "supplier paused",
			status: status.Paused,
			code:   "import_supplier_migration_not_ongoing",
			attr:   "import_supplier",
		},
		{
			name: "supplier paused after staging",
			prepare: func(t *testing.T, supplier, ean string) {
				e.stageOK(t, accountDoc(t, supplier, ean))
				if err := admin.SetSupplierStatus(ctx, e.s.db, supplier, status.Paused); err != nil {
					t.Fatal(err)
				}
			},
			code: "import_supplier_migration_not_ongoing",
			attr: "import_supplier",
		},
		{
			name:   "supplier complete",
			status: status.Complete,
			code:   "import_supplier_migration_not_ongoing",
			attr:   "import_supplier",
		},
		{
			name: "supplier complete after staging",
			prepare: func(t *testing.T, supplier, ean string) {
				e.stageOK(t, accountDoc(t, supplier, ean))
				if err := admin.SetSupplierStatus(ctx, e.s.db, supplier, status.Complete); err != nil {
					t.Fatal(err)
				}
			},
			code: "import_supplier_migration_not_ongoing",
			attr: "import_supplier",
		},
	}
	for i, tc := range cases {
		supplier, ean := fmt.Sprintf("REFUSE_%d", i), fmt.Sprintf("R-%d", i)
		state := tc.status
		if state == "" {
			state = status.Ongoing
		}
		e.addSupplier(t, supplier, state)
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.prepare != nil {
				tc.prepare(t, supplier, ean)
			}
			body := accountDoc(t, supplier, ean)
			edit(t, body, "customers.0.given_name", "Changed")
			if tc.body != nil {
				body = tc.body(t, supplier, ean)
			}
			before := e.processRows(t, supplier)
			r := e.s.do(t, "POST", pathStageAccount, e.tok, body)
			if r.Status != http.StatusBadRequest || r.Body["code"] != tc.code {
				t.Fatalf("got %d %s, want 400 %s", r.Status, r.Raw, tc.code)
			}
			if diff := cmp.Diff(before, e.processRows(t, supplier)); diff != "" {
				t.Errorf("the refusal changed the database (-before +after):\n%s", diff)
			}
			if tc.code == "account_failed_validation" {
				// The same body as E3 gives for the same input.
				v := e.s.do(t, "POST", pathValidateAccount, e.tok, body)
				if diff := cmp.Diff(string(v.Raw), string(r.Raw)); v.Status != r.Status || diff != "" {
					t.Errorf("E4 answers unlike E3 (%d vs %d) (-E3 +E4):\n%s", v.Status, r.Status, diff)
				}
			}
			if tc.attr != "" {
				if diff := cmp.Diff([]fieldProblem{{tc.attr, tc.code}}, problemsOf(t, r.Body)); diff != "" {
					t.Errorf("problems (-want +got):\n%s", diff)
				}
			}
			for k, v := range tc.extra {
				if r.Body[k] != v {
					t.Errorf("%s = %v, want %v", k, r.Body[k], v)
				}
			}
			if tc.extra != nil && r.Body["external_account_number"] != ean {
				t.Errorf("external_account_number = %v, want %s", r.Body["external_account_number"], ean)
			}
		})
	}
}

// Two stagings of one account at the same moment: the unique key makes one
// the insert (201) and the other an update (200). The update waits for the
// insert to commit, so the row always ends with the 200 request's payload.
func TestStageAccount_ConcurrentStagingsCreateOneRowAndTheUpdateWins(t *testing.T) {
	t.Parallel()
	e := newImportsEnv(t)
	const pairs = 20
	type result struct {
		status int
		raw    []byte
		name   string // the given_name that request sent
	}
	results := make([][2]result, pairs)
	var wg sync.WaitGroup
	for p := range pairs {
		ean := fmt.Sprintf("PAIR-%02d", p)
		var ready sync.WaitGroup
		start := make(chan struct{})
		for side := range 2 {
			body := accountDoc(t, "DEMO", ean)
			name := fmt.Sprintf("Side%d", side)
			edit(t, body, "customers.0.given_name", name)
			raw, _ := json.Marshal(body)
			req, _ := http.NewRequest("POST", e.s.base+pathStageAccount, bytes.NewReader(raw))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Token "+e.tok)
			ready.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				<-start
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer res.Body.Close()
				var buf bytes.Buffer
				_, _ = buf.ReadFrom(res.Body)
				results[p][side] = result{res.StatusCode, buf.Bytes(), name}
			}()
		}
		go func() { ready.Wait(); close(start) }()
	}
	wg.Wait()
	for p := range pairs {
		ean := fmt.Sprintf("PAIR-%02d", p)
		t.Run(ean, func(t *testing.T) {
			t.Parallel()
			r := results[p]
			statuses := []int{r[0].status, r[1].status}
			slices.Sort(statuses)
			if !slices.Equal(statuses, []int{http.StatusOK, http.StatusCreated}) {
				t.Fatalf("statuses %v, want one 200 and one 201 (%s | %s)", statuses, r[0].raw, r[1].raw)
			}
			var n int
			if err := e.s.db.Get(&n, `SELECT count(*) FROM import_processes WHERE external_account_number = $1`, ean); err != nil || n != 1 {
				t.Fatalf("%d rows (%v), want 1", n, err)
			}
			winner := r[0]
			if r[1].status == http.StatusOK {
				winner = r[1]
			}
			if got := get(t, e.storedPayload(t, "DEMO", ean), "customers.0.given_name"); got != winner.name {
				t.Errorf("stored given_name %v, want %s (the payload of the 200, which committed last)", got, winner.name)
			}
		})
	}
}

func TestTransferStatus_AnswersTheStateOfTheImportProcess(t *testing.T) {
	t.Parallel()
	e := newImportsEnv(t)
	for _, ean := range []string{"S-STAGED", "S-FAILED", "S-BUSY", "S-DONE", "S/WITH/SLASH", "S 100%?#"} {
		e.stageOK(t, accountDoc(t, "DEMO", ean))
	}
	lastError := `{"detail": "Could not validate account data.", "code": "account_failed_validation", "errors": [{"detail": "Tariff \"X\" not found.", "code": "tariff_code_not_found", "attr": "supply_addresses.0.supply_points.0.agreements.0.tariff_code"}]}`
	e.setProcess(t, "DEMO", "S-FAILED", `last_error = $3`, lastError)
	e.setProcess(t, "DEMO", "S-BUSY", `status = 'IN_PROGRESS'`)
	// A completed process keeps no error from an earlier attempt.
	e.setProcess(t, "DEMO", "S-DONE", `status = 'COMPLETED', service_account_number = 'A-0000CAFE', account_created_at = now(), last_error = $3`, lastError)

	var lastErrorValue any
	if err := json.Unmarshal([]byte(lastError), &lastErrorValue); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, supplier, ean string
		status              int
		want                map[string]any // the whole body for 200
		code                string         // for 404
	}{
		{"staged", "DEMO", "S-STAGED", 200, map[string]any{"status": "UNKNOWN", "service_account_number": "", "last_error": nil}, ""},
		{"earlier attempt failed", "DEMO", "S-FAILED", 200, map[string]any{"status": "UNKNOWN", "service_account_number": "", "last_error": lastErrorValue}, ""},
		{"being created", "DEMO", "S-BUSY", 200, map[string]any{"status": "IN_PROGRESS", "service_account_number": "", "last_error": nil}, ""},
		{"created", "DEMO", "S-DONE", 200, map[string]any{"status": "COMPLETED", "service_account_number": "A-0000CAFE", "last_error": nil}, ""},
		{"account number with escaped slashes", "DEMO", "S/WITH/SLASH", 200, map[string]any{"status": "UNKNOWN", "service_account_number": "", "last_error": nil}, ""},
		{"account number with space, percent, ? and #", "DEMO", "S 100%?#", 200, map[string]any{"status": "UNKNOWN", "service_account_number": "", "last_error": nil}, ""},
		{"unknown account", "DEMO", "S-NEVER", 404, nil, "import_process_does_not_exist"},
		{"account staged for another supplier", "OTHER", "S-STAGED", 404, nil, "import_process_does_not_exist"},
		{"unknown supplier", "NOPE", "S-STAGED", 404, nil, "import_supplier_not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.s.do(t, "GET", pathTransferStatus(tc.supplier, tc.ean), e.tok, nil)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Raw)
			}
			if tc.want != nil {
				if diff := cmp.Diff(tc.want, r.Body); diff != "" {
					t.Errorf("body (-want +got):\n%s", diff)
				}
				return
			}
			if r.Body["code"] != tc.code {
				t.Errorf("code %v, want %s: %s", r.Body["code"], tc.code, r.Raw)
			}
		})
	}
}

// listItem is the exact shape of a list element; nil fields must be null.
func listItem(ean string, number, createdAt any) map[string]any {
	return map[string]any{"external_account_number": ean, "service_account_number": number, "account_created_at": createdAt}
}

func TestListProcesses_ItemsPagesAndFilters(t *testing.T) {
	t.Parallel()
	e := newImportsEnv(t)
	e.addSupplier(t, "LISTS", status.Ongoing)
	e.addSupplier(t, "NO_IMPORTS", status.Ongoing)
	// Inserted out of order; lists are ordered by external account number.
	// Imported rows carry times with fractions and offsets: lists give them
	// in UTC, to the second.
	e.exec(t, `INSERT INTO import_processes (supplier_id, external_account_number, payload, status, service_account_number, account_created_at)
		SELECT s.id, v.ean, '{}', v.status, v.number, v.created::timestamptz
		FROM import_suppliers s, (VALUES
			('ACC-005', 'UNKNOWN', NULL, NULL),
			('ACC-002', 'COMPLETED', 'A-00000002', '2025-06-01 10:20:30.987654+02'),
			('ACC-008', 'IN_PROGRESS', NULL, NULL),
			('ACC-001', 'UNKNOWN', NULL, NULL),
			('ACC-004', 'COMPLETED', 'A-00000004', '2025-12-31 23:59:59.5+00'),
			('ACC-007', 'UNKNOWN', NULL, NULL),
			('ACC-003', 'UNKNOWN', NULL, NULL),
			('ACC-006', 'COMPLETED', 'A-00000006', '2026-01-02 03:04:05-05')
		) AS v (ean, status, number, created)
		WHERE s.code = 'LISTS'`)
	e.exec(t, `INSERT INTO import_processes (supplier_id, external_account_number, payload)
		SELECT s.id, v.ean, '{}' FROM import_suppliers s, (VALUES ('ACC-000'), ('ACC-009')) AS v (ean) WHERE s.code IN ('OTHER', 'NO_IMPORTS')`)

	all := []map[string]any{
		listItem("ACC-001", nil, nil),
		listItem("ACC-002", "A-00000002", "2025-06-01T08:20:30Z"),
		listItem("ACC-003", nil, nil),
		listItem("ACC-004", "A-00000004", "2025-12-31T23:59:59Z"),
		listItem("ACC-005", nil, nil),
		listItem("ACC-006", "A-00000006", "2026-01-02T08:04:05Z"),
		listItem("ACC-007", nil, nil),
		listItem("ACC-008", nil, nil),
	}
	pick := func(idx ...int) []map[string]any {
		out := []map[string]any{}
		for _, i := range idx {
			out = append(out, all[i-1])
		}
		return out
	}
	none := []map[string]any{}
	cases := []struct {
		name, which, supplier, query string
		want                         []map[string]any
	}{
		{"E11 lists pending and imported", "all", "LISTS", "", all},
		{"E12 lists only pending", "pending", "LISTS", "", pick(1, 3, 5, 7, 8)},
		{"E13 lists only imported", "imported", "LISTS", "", pick(2, 4, 6)},
		{"E13 with nothing imported is an empty list", "imported", "NO_IMPORTS", "", none},
		{"E11 first page", "all", "LISTS", "limit=3", pick(1, 2, 3)},
		{"E11 next page", "all", "LISTS", "after=ACC-003&limit=3", pick(4, 5, 6)},
		{"E11 last page is short", "all", "LISTS", "after=ACC-006&limit=3", pick(7, 8)},
		{"E11 after the last item", "all", "LISTS", "after=ACC-008", none},
		{"E11 after a number that does not exist", "all", "LISTS", "after=ACC-0045", pick(5, 6, 7, 8)},
		{"E11 largest limit", "all", "LISTS", "limit=10000", all},
		{"E12 paged", "pending", "LISTS", "after=ACC-001&limit=2", pick(3, 5)},
		{"E13 paged", "imported", "LISTS", "after=ACC-002&limit=1", pick(4)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.s.do(t, "GET", pathList(tc.which, tc.supplier, tc.query), e.tok, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("status %d: %s", r.Status, r.Raw)
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			var got []map[string]any
			if err := json.Unmarshal(r.Raw, &got); err != nil || got == nil {
				t.Fatalf("not a JSON array (%v): %s", err, r.Raw)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("items (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("paging through E11 gives every item once", func(t *testing.T) {
		t.Parallel()
		got := []map[string]any{}
		after := ""
		for range len(all) + 2 {
			r := e.s.do(t, "GET", pathList("all", "LISTS", "limit=3&after="+url.QueryEscape(after)), e.tok, nil)
			var page []map[string]any
			if err := json.Unmarshal(r.Raw, &page); r.Status != 200 || err != nil {
				t.Fatalf("page after %q: %d %s", after, r.Status, r.Raw)
			}
			if len(page) == 0 {
				break
			}
			got = append(got, page...)
			after = page[len(page)-1]["external_account_number"].(string)
		}
		if diff := cmp.Diff(all, got); diff != "" {
			t.Errorf("pages (-want +got):\n%s", diff)
		}
	})
}

func TestListProcesses_RefusesABadLimitAndAnUnknownSupplier(t *testing.T) {
	t.Parallel()
	e := newImportsEnv(t)
	cases := []struct {
		name, which, supplier, query string
		status                       int
		want                         []fieldProblem
		code                         string
	}{
		{"limit zero", "all", "DEMO", "limit=0", 400, []fieldProblem{{"limit", "invalid"}}, "invalid"},
		{"limit not a number", "all", "DEMO", "limit=abc", 400, []fieldProblem{{"limit", "invalid"}}, "invalid"},
		{"limit over 10000", "all", "DEMO", "limit=10001", 400, []fieldProblem{{"limit", "invalid"}}, "invalid"},
		{"negative limit", "pending", "DEMO", "limit=-1", 400, []fieldProblem{{"limit", "invalid"}}, "invalid"},
		{"empty limit", "imported", "DEMO", "limit=", 400, []fieldProblem{{"limit", "invalid"}}, "invalid"},
		{"E11 unknown supplier", "all", "NOPE", "", 404, []fieldProblem{}, "import_supplier_not_found"},
		{"E12 unknown supplier", "pending", "NOPE", "", 404, []fieldProblem{}, "import_supplier_not_found"},
		{"E13 unknown supplier", "imported", "NOPE", "", 404, []fieldProblem{}, "import_supplier_not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.s.do(t, "GET", pathList(tc.which, tc.supplier, tc.query), e.tok, nil)
			if r.Status != tc.status || r.Body["code"] != tc.code {
				t.Fatalf("got %d %s, want %d %s", r.Status, r.Raw, tc.status, tc.code)
			}
			if diff := cmp.Diff(tc.want, problemsOf(t, r.Body)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// E11 for a supplier with a million import processes streams: the server
// holds one cursor page at a time, and the client below never holds the list.
// The test's process is also the server's, so its heap is the server's plus a
// streaming client's.
//
// The heap is the whole process's, so no other test may run meanwhile: this
// test does not call t.Parallel, and Go runs a top-level test that does not
// alone (parallel tests wait until every sequential one has returned), while
// other packages' tests run in processes of their own. It is long, so it
// runs in `make test-long`, not under -short.
func TestListProcesses_MillionItemsStreamWithFlatMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts and lists a million rows")
	}
	const total = 1_000_000
	// The whole list as JSON is about 80 MB, and far more as Go values.
	const bound = 64 << 20
	e := newImportsEnv(t)
	e.addSupplier(t, "MILLION", status.Ongoing)
	began := time.Now()
	// The progress counters' per-row triggers (migration 00015) would make
	// one million-row statement quadratic; a bulk change turns them off and
	// recounts afterwards, as the migration's comment prescribes.
	e.exec(t, `ALTER TABLE import_processes DISABLE TRIGGER USER`)
	e.exec(t, `INSERT INTO import_processes (supplier_id, external_account_number, payload, status, service_account_number, account_created_at)
		SELECT s.id, 'ACC-' || lpad(g::text, 7, '0'), '{}',
		       CASE WHEN g % 10 = 0 THEN 'COMPLETED' ELSE 'UNKNOWN' END,
		       CASE WHEN g % 10 = 0 THEN 'A-' || lpad(upper(to_hex(g)), 8, '0') END,
		       CASE WHEN g % 10 = 0 THEN timestamptz '2025-01-01 00:00:00Z' + g * interval '1 second' END
		FROM import_suppliers s, generate_series(1, $1::int) g WHERE s.code = 'MILLION'`, total)
	e.exec(t, `ALTER TABLE import_processes ENABLE TRIGGER USER`)
	e.exec(t, `SELECT progress_rebuild()`)
	e.exec(t, `ANALYZE import_processes`)
	t.Logf("inserted %d processes in %v", total, time.Since(began).Round(time.Millisecond))

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseline := ms.HeapInuse
	var peak uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()

	began = time.Now()
	req, _ := http.NewRequest("GET", e.s.base+pathList("all", "MILLION", ""), nil)
	req.Header.Set("Authorization", "Token "+e.tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	dec := json.NewDecoder(res.Body)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		t.Fatalf("first token %v (%v), want [", tok, err)
	}
	var n, imported int
	prev := ""
	for dec.More() {
		var it struct {
			ExternalAccountNumber string  `json:"external_account_number"`
			ServiceAccountNumber  *string `json:"service_account_number"`
			AccountCreatedAt      *string `json:"account_created_at"`
		}
		if err := dec.Decode(&it); err != nil {
			t.Fatalf("item %d: %v", n, err)
		}
		if it.ExternalAccountNumber <= prev {
			t.Fatalf("item %d: %q after %q, want ascending", n, it.ExternalAccountNumber, prev)
		}
		if (it.ServiceAccountNumber == nil) != (it.AccountCreatedAt == nil) {
			t.Fatalf("item %d: number %v, created %v", n, it.ServiceAccountNumber, it.AccountCreatedAt)
		}
		if it.ServiceAccountNumber != nil {
			imported++
		}
		prev = it.ExternalAccountNumber
		n++
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		t.Fatalf("last token %v (%v), want ]", tok, err)
	}
	close(stop)
	<-sampled
	elapsed := time.Since(began)

	if n != total || imported != total/10 || prev != "ACC-1000000" {
		t.Errorf("listed %d items (%d imported, last %s), want %d (%d imported, last ACC-1000000)", n, imported, prev, total, total/10)
	}
	grew := int64(peak) - int64(baseline)
	t.Logf("listed %d items in %v; heap in use %d MiB at start, peak %d MiB (+%d MiB)",
		n, elapsed.Round(time.Millisecond), baseline>>20, peak>>20, grew>>20)
	if grew > bound {
		t.Errorf("heap in use grew by %d MiB while listing, want under %d MiB: the list is being held", grew>>20, bound>>20)
	}
}
