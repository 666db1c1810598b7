package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/bulkimport/bulkimport/api"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/payment"
	"github.com/bulkimport/bulkimport/jobs/payment/vendorsim"
)

// openAPIDoc is api/openapi.yaml, loaded once.
var openAPIDoc = sync.OnceValues(func() (*openapi3.T, error) {
	return openapi3.NewLoader().LoadFromData(api.OpenAPI)
})

func loadOpenAPI(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openAPIDoc()
	if err != nil {
		t.Fatalf("load api/openapi.yaml: %v", err)
	}
	return doc
}

func TestOpenAPI_DocumentIsValid(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi %q, want 3.0.3", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// checked wraps a running service so that every answer is validated against
// the OpenAPI document: its status must be documented for the operation,
// and its headers (Content-Type, WWW-Authenticate, Retry-After) and body
// must match. It records which operations were exercised.
type checked struct {
	*service
	doc    *openapi3.T
	router routers.Router

	mu  sync.Mutex
	hit map[string][]int // operationId -> statuses seen
}

func newChecked(t testing.TB, s *service) *checked {
	t.Helper()
	doc := loadOpenAPI(t)
	// The same document, with this service's address as its server, so
	// that the router matches requests to it.
	local := *doc
	local.Servers = openapi3.Servers{{URL: s.base}}
	router, err := gorillamux.NewRouter(&local)
	if err != nil {
		t.Fatal(err)
	}
	return &checked{service: s, doc: doc, router: router, hit: map[string][]int{}}
}

// do is service.do with the answer validated, and, when the service
// accepted the request (2xx), the request too: a body the service takes
// must be one the document allows, or clients generated from the document
// could not send it.
func (c *checked) do(t testing.TB, method, path, token string, body any) response {
	t.Helper()
	r := c.service.do(t, method, path, token, body)
	req, _ := http.NewRequest(method, c.base+path, nil)
	c.check(t, req, r)
	// GraphQL answers its refusals with 200 too; one with errors[] did not
	// accept the request.
	errs, _ := r.Body["errors"].([]any)
	refusedGraphQL := path == "/v1/graphql/" && len(errs) > 0
	if r.Status >= 200 && r.Status < 300 && body != nil && !refusedGraphQL {
		c.checkRequest(t, method, path, body)
	}
	return r
}

// checkRequest validates an accepted request's body against the document.
// Authentication is not checked here: answers 401 are, by check.
func (c *checked) checkRequest(t testing.TB, method, path string, body any) {
	t.Helper()
	raw, ok := body.(string)
	if !ok {
		j, _ := json.Marshal(body)
		raw = string(j)
	}
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return // check has reported it
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		t.Errorf("%s %s: the service accepted a request body that the OpenAPI document refuses: %v\nbody: %.2000s", method, path, err, raw)
	}
}

// doReq is doReq with the answer validated, for requests do cannot make
// (another Content-Type).
func (c *checked) doReq(t testing.TB, req *http.Request) response {
	t.Helper()
	r := doReq(t, req)
	c.check(t, req, r)
	return r
}

func (c *checked) check(t testing.TB, req *http.Request, r response) {
	t.Helper()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		t.Errorf("%s %s answered %d, but the OpenAPI document has no such operation: %v", req.Method, req.URL.Path, r.Status, err)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 r.Status,
		Header:                 r.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(r.Raw)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s: the %d answer does not match the OpenAPI document: %v\nbody: %.2000s", req.Method, req.URL.Path, r.Status, err, r.Raw)
	}
	// ValidateResponse accepts any body for a response without content;
	// every answer with a body must have its schema in the document.
	if resp := route.Operation.Responses.Status(r.Status); len(r.Raw) > 0 && resp != nil && len(resp.Value.Content) == 0 {
		t.Errorf("%s %s: the %d answer has a body, but the document describes none", req.Method, req.URL.Path, r.Status)
	}
	c.mu.Lock()
	c.hit[route.Operation.OperationID] = append(c.hit[route.Operation.OperationID], r.Status)
	c.mu.Unlock()
}

// checkError validates an answer of a path or method the document has no
// operation for (404, 400 method_not_allowed) against its Error schema.
func (c *checked) checkError(t testing.TB, r response) {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var v any
	if err := json.Unmarshal(r.Raw, &v); err != nil {
		t.Fatalf("not JSON: %s", r.Raw)
	}
	if err := c.doc.Components.Schemas["Error"].Value.VisitJSON(v); err != nil {
		t.Errorf("the %d answer is not an Error: %v\n%s", r.Status, err, r.Raw)
	}
}

// want fails the test unless r has the status (and, when code is not
// empty, the top-level code).
func want(t testing.TB, what string, r response, status int, code string) {
	t.Helper()
	if r.Status != status || (code != "" && r.Body["code"] != code) {
		t.Errorf("%s: %d %.1000s, want %d %s", what, r.Status, r.Raw, status, code)
	}
}

// openAPIEnv seeds what the cases below need in a running `importd serve`:
// supplier DEMO with the fixture's catalogue (seedDemo), vendors OK (serves
// CARD-*) and DOWN (always 503), the business BIZ-OA with contract BC-OA,
// and three imported accounts made as E5 leaves them: PI-1 (last billed 60
// days ago, 400 days old) and BA-1, BA-2 of BIZ-OA.
func openAPIEnv(t *testing.T, c *checked) {
	t.Helper()
	ctx := context.Background()
	seedDemo(t, c.service, admin.Supplier{RequireDocuments: true}) // so that E6 can answer path_does_not_exist_in_file_store
	var list []map[string]any
	for i := range 10 {
		list = append(list, map[string]any{"reference": fmt.Sprintf("CARD-%d", i), "type": "CARD", "status": "ACTIVE"})
	}
	instructions, _ := json.Marshal(list)
	for _, v := range []struct {
		name string
		cfg  vendorsim.Config
	}{{"OK", vendorsim.Config{Instructions: instructions}}, {"DOWN", vendorsim.Config{Instructions: instructions, AlwaysFail: true}}} {
		sim, err := vendorsim.New(v.cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		if _, err := payment.AddVendor(ctx, c.db, payment.Vendor{Name: v.name, BaseURL: srv.URL, Timeout: time.Second,
			Attempts: 2, Backoff: 10 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.db.Exec(`WITH b AS (INSERT INTO businesses (supplier_id, external_business_identifier, business_type, company_number, company_name)
		SELECT id, 'BIZ-OA', 'LTD', '07654321', 'OA Ltd' FROM import_suppliers WHERE code = 'DEMO' RETURNING id, supplier_id)
		INSERT INTO business_contracts (business_id, supplier_id, identifier) SELECT id, supplier_id, 'BC-OA' FROM b`); err != nil {
		t.Fatal(err)
	}
	for i, a := range []struct{ ean, contract, lastBilled string }{{"PI-1", "", day(-60)}, {"BA-1", "BC-OA", ""}, {"BA-2", "BC-OA", ""}} {
		insertImportedAccount(t, c.service, a.ean, fmt.Sprintf("A-%08X", 0x0A000000+i), a.contract, a.lastBilled)
	}
}

// insertImportedAccount writes an account of supplier DEMO as E5 would have
// created it 400 days ago, with team Ops, an empty ledger and, when given,
// a business contract and a last-billed date.
func insertImportedAccount(t *testing.T, s *service, ean, number, contract, lastBilled string) {
	t.Helper()
	var lb *string
	if lastBilled != "" {
		lb = &lastBilled
	}
	if _, err := s.db.Exec(`
		WITH p AS (
			INSERT INTO import_processes (supplier_id, external_account_number, payload, status, service_account_number, account_created_at)
			SELECT id, $1, '{}', 'COMPLETED', $2, now() - interval '400 days' FROM import_suppliers WHERE code = 'DEMO' RETURNING id, supplier_id),
		a AS (
			INSERT INTO accounts (service_account_number, supplier_id, external_account_number, import_process_id, operations_team_id,
				business_contract_id, billing_country, last_billed_to_date, created_at)
			SELECT $2, p.supplier_id, $1, p.id, (SELECT id FROM operations_teams WHERE name = 'Ops'),
				(SELECT id FROM business_contracts WHERE supplier_id = p.supplier_id AND identifier = $3), 'GB', $4::date, now() - interval '400 days'
			FROM p RETURNING id)
		INSERT INTO ledgers (account_id) SELECT id FROM a`, ean, number, contract, lb); err != nil {
		t.Fatal(err)
	}
}

// Every endpoint, through the running service, in its success and main
// error answers; each answer is validated against api/openapi.yaml, and
// every operation of the document must have been exercised.
func TestOpenAPI_RealAnswersMatchTheDocument(t *testing.T) {
	t.Parallel()
	c := newChecked(t, startService(t, "serve", map[string]string{"MAX_BODY_BYTES": "65536",
		"MONITORING_USER": pageUser, "MONITORING_PASSWORD": pagePass}))
	openAPIEnv(t, c)
	// limited has no worker (E5 never finishes there) and no document store
	// (E6 naming a document is refused with 500).
	limited := newChecked(t, startService(t, "api", map[string]string{"PROCESS_CONCURRENCY_LIMIT": "1", "PROCESS_WAIT_TIMEOUT": "200ms", "DOCUMENTS_URL": ""}))
	seedDemo(t, limited.service, admin.Supplier{RequireDocuments: true})
	insertImportedAccount(t, limited.service, "PI-NS", "A-0B000000", "", "")

	t.Run("operations", func(t *testing.T) {
		t.Run("token and identity", func(t *testing.T) {
			t.Parallel()
			key := c.newKey(t, "oa-graphql")
			gql := func(input string) map[string]any {
				return map[string]any{"query": `mutation($input: ObtainJSONWebTokenInput!) { obtainServiceToken(input: $input) { token payload refreshToken refreshExpiresIn } }`,
					"variables": map[string]any{"input": json.RawMessage(input)}}
			}
			r := c.do(t, "POST", "/v1/graphql/", "", gql(fmt.Sprintf(`{"APIKey": %q}`, key)))
			want(t, "obtainServiceToken", r, 200, "")
			data, _ := r.Body["data"].(map[string]any)
			out, _ := data["obtainServiceToken"].(map[string]any)
			tok, _ := out["token"].(string)
			want(t, "refresh", c.do(t, "POST", "/v1/graphql/", "", gql(fmt.Sprintf(`{"refreshToken": %q}`, out["refreshToken"]))), 200, "")
			r = c.do(t, "POST", "/v1/graphql/", "", gql(`{"APIKey": "bik_nope"}`))
			if want(t, "unknown key", r, 200, ""); !strings.Contains(string(r.Raw), "invalid_api_key") {
				t.Errorf("unknown key: %s", r.Raw)
			}
			wantGraphQLError(t, "malformed GraphQL", c.do(t, "POST", "/v1/graphql/", "", "{"), "parse_error")
			req, _ := http.NewRequest("POST", c.base+"/v1/graphql/", strings.NewReader("hello"))
			req.Header.Set("Content-Type", "text/plain")
			wantGraphQLError(t, "not JSON", c.doReq(t, req), "unsupported_media_type")
			wantGraphQLError(t, "too large", c.do(t, "POST", "/v1/graphql/", "", `{"query": "`+strings.Repeat("x", 70000)+`"}`), "request_too_large")

			want(t, "whoami", c.do(t, "GET", "/v1/data-import/whoami/", tok, nil), 200, "")
			want(t, "whoami without a token", c.do(t, "GET", "/v1/data-import/whoami/", "", nil), 401, "not_authenticated")
			want(t, "whoami with a bad token", c.do(t, "GET", "/v1/data-import/whoami/", "abc.def.ghi", nil), 401, "authentication_failed")
		})

		tok := c.accessToken(t, c.newKey(t, "oa"))

		t.Run("E1 business", func(t *testing.T) {
			t.Parallel()
			body := businessRequest()
			body["external_business_identifier"] = "BIZ-E1"
			body["business"].(map[string]any)["business_contracts"].([]any)[0].(map[string]any)["identifier"] = "BC-E1"
			want(t, "E1", c.do(t, "POST", "/v1/data-import/business/", tok, body), 201, "")
			want(t, "E1 again", c.do(t, "POST", "/v1/data-import/business/", tok, body), 400, "business_already_exists")
			want(t, "E1 invalid", c.do(t, "POST", "/v1/data-import/business/", tok, map[string]any{"import_supplier_code": "DEMO"}), 400, "business_failed_validation")
			want(t, "E1 without a token", c.do(t, "POST", "/v1/data-import/business/", "", body), 401, "not_authenticated")
		})

		t.Run("E3 E4 E5 E10", func(t *testing.T) {
			t.Parallel()
			const validate = "/v1/data-import/validate-account/"
			want(t, "E3", c.do(t, "POST", validate, tok, fixture(t, "OA-1")), 200, "")
			bad := fixture(t, "OA-1")
			bad["customers"].([]any)[0].(map[string]any)["landline"] = "12"
			want(t, "E3 invalid", c.do(t, "POST", validate, tok, bad), 400, "account_failed_validation")
			want(t, "E4 first", c.do(t, "POST", stagePath, tok, fixture(t, "OA-1")), 201, "")
			want(t, "E4 again", c.do(t, "POST", stagePath, tok, fixture(t, "OA-1")), 200, "")
			want(t, "E4 invalid", c.do(t, "POST", stagePath, tok, bad), 400, "account_failed_validation")
			want(t, "E10 staged", c.do(t, "GET", pathTransferStatus("DEMO", "OA-1"), tok, nil), 200, "")
			want(t, "E5", c.do(t, "POST", processPath, tok, processBody("OA-1", false)), 201, "")
			want(t, "E5 again", c.do(t, "POST", processPath, tok, processBody("OA-1", false)), 400, "account_import_process_already_imported")
			want(t, "E4 of an imported account", c.do(t, "POST", stagePath, tok, fixture(t, "OA-1")), 400, "account_import_process_already_imported")
			want(t, "E3 of an imported account", c.do(t, "POST", validate, tok, fixture(t, "OA-1")), 400, "account_import_process_already_imported")
			want(t, "E5 missing field", c.do(t, "POST", processPath, tok, map[string]any{"external_account_number": "OA-1"}), 400, "invalid_request")
			want(t, "E10 created", c.do(t, "GET", pathTransferStatus("DEMO", "OA-1"), tok, nil), 200, "")
			c.stage(t, tok, fixture(t, "OA-DRY"))
			want(t, "E5 dry run", c.do(t, "POST", processPath, tok, processBody("OA-DRY", true)), 400, "dry_run_rolled_back")
			want(t, "E10 unknown account", c.do(t, "GET", pathTransferStatus("DEMO", "NOPE"), tok, nil), 404, "import_process_does_not_exist")
			want(t, "E10 unknown supplier", c.do(t, "GET", pathTransferStatus("NOPE", "OA-1"), tok, nil), 404, "import_supplier_not_found")
		})

		t.Run("E10 after a failed attempt", func(t *testing.T) {
			t.Parallel()
			// Staged data that names a tariff which does not exist
			// (changed behind the API's back, as a catalogue change
			// would) fails the worker's re-validation: E10's last_error
			// is then an object.
			c.stage(t, tok, fixture(t, "OA-BAD"))
			if _, err := c.db.Exec(`UPDATE import_processes SET payload = jsonb_set(payload, '{supply_addresses,0,supply_points,0,agreements,0,tariff_code}', '"GONE"')
				WHERE external_account_number = 'OA-BAD'`); err != nil {
				t.Fatal(err)
			}
			want(t, "E5 of data that no longer validates", c.do(t, "POST", processPath, tok, processBody("OA-BAD", false)), 400, "account_failed_validation")
			r := c.do(t, "GET", pathTransferStatus("DEMO", "OA-BAD"), tok, nil)
			if want(t, "E10 with last_error", r, 200, ""); r.Body["last_error"] == nil {
				t.Errorf("no last_error: %s", r.Raw)
			}
		})

		t.Run("E11 E12 E13", func(t *testing.T) {
			t.Parallel()
			for _, which := range []string{"all", "pending", "imported"} {
				want(t, which, c.do(t, "GET", pathList(which, "DEMO", ""), tok, nil), 200, "")
				want(t, which+" paged", c.do(t, "GET", pathList(which, "DEMO", "limit=1&after=A"), tok, nil), 200, "")
				want(t, which+" bad limit", c.do(t, "GET", pathList(which, "DEMO", "limit=0"), tok, nil), 400, "invalid")
				want(t, which+" unknown supplier", c.do(t, "GET", pathList(which, "NOPE", ""), tok, nil), 404, "import_supplier_not_found")
				want(t, which+" without a token", c.do(t, "GET", pathList(which, "DEMO", ""), "", nil), 401, "not_authenticated")
			}
		})

		t.Run("reconciliation", func(t *testing.T) {
			t.Parallel()
			path := "/v1/data-import/reconciliation/DEMO/"
			want(t, "summaries", c.do(t, "GET", path, tok, nil), 200, "")
			want(t, "summaries after", c.do(t, "GET", path+"?after=A", tok, nil), 200, "")
			want(t, "unknown supplier", c.do(t, "GET", "/v1/data-import/reconciliation/NOPE/", tok, nil), 404, "import_supplier_not_found")
			want(t, "without a token", c.do(t, "GET", path, "", nil), 401, "not_authenticated")
		})

		t.Run("E6 E7 E8", func(t *testing.T) {
			t.Parallel()
			notes := map[string]any{"import_supplier": "DEMO", "external_account_number": "PI-1", "notes": []any{
				map[string]any{"body": "Moved from the old platform.", "created_at": "2024-05-01T10:00:00Z", "is_pinned": true, "unpin_at": "2030-01-01T00:00:00Z"}}}
			want(t, "E6", c.do(t, "POST", pathNotes, tok, notes), 201, "")
			want(t, "E6 again", c.do(t, "POST", pathNotes, tok, notes), 201, "")
			want(t, "E6 invalid", c.do(t, "POST", pathNotes, tok, map[string]any{"import_supplier": "DEMO", "external_account_number": "PI-1", "notes": []any{}, "x": 1}), 400, "")
			want(t, "E6 unknown account", c.do(t, "POST", pathNotes, tok, map[string]any{"import_supplier": "DEMO", "external_account_number": "NOPE", "notes": []any{map[string]any{"body": "x"}}}), 404, "account_not_found")
			want(t, "E6 naming a missing document", c.do(t, "POST", pathNotes, tok, map[string]any{"import_supplier": "DEMO", "external_account_number": "PI-1",
				"notes": []any{map[string]any{"document_paths": []any{map[string]any{"document_path": "a.pdf"}}}}}), 400, "notes_failed_validation")
			ltok := limited.accessToken(t, limited.newKey(t, "oa-limited-notes"))
			want(t, "E6 with a document and no store", limited.do(t, "POST", pathNotes, ltok, map[string]any{"import_supplier": "DEMO", "external_account_number": "PI-NS",
				"notes": []any{map[string]any{"document_paths": []any{map[string]any{"document_path": "a.pdf"}}}}}), 500, "document_store_not_configured")

			st := fmt.Sprintf(`{"import_supplier": "DEMO", "external_account_number": "PI-1", "statements": [{"statement_id": "S1", "number": "0001",
				"bill_period_from_date": %q, "bill_period_to_date": %q, "issued_date": %q, "gross_amount": 12340}]}`, day(-59), day(-30), day(-29))
			want(t, "E8", c.do(t, "POST", pathStatements, tok, st), 201, "")
			want(t, "E8 with only the required fields", c.do(t, "POST", pathStatements, tok, fmt.Sprintf(`{"import_supplier": "DEMO", "external_account_number": "PI-1",
				"statements": [{"statement_id": "S0", "bill_period_from_date": %q, "bill_period_to_date": %q}]}`, day(-90), day(-59))), 201, "")
			want(t, "E8 again", c.do(t, "POST", pathStatements, tok, st), 400, "")
			want(t, "E8 not JSON", c.do(t, "POST", pathStatements, tok, `{"statements": [`), 400, "parse_error")
			want(t, "E8 unknown account", c.do(t, "POST", pathStatements, tok, `{"import_supplier": "DEMO", "external_account_number": "NOPE", "statements": []}`), 404, "account_not_found")

			tx := func(id, date, amount string) string {
				return fmt.Sprintf(`{"transaction_id": %q, "transaction_date": %q, "amount": %s, "type": "CHARGE", "reason": "IMPORTED_CHARGE"}`, id, date, amount)
			}
			body := fmt.Sprintf(`{"import_supplier": "DEMO", "external_account_number": "PI-1", "transactions": [%s, %s]}`, tx("T1", day(-10), "71"), tx("T2", day(-31), "0.10"))
			want(t, "E7 dry run", c.do(t, "POST", pathTransactions, tok, strings.Replace(body, `{`, `{"dry_run": true, `, 1)), 201, "")
			want(t, "E7 (one moved into the period)", c.do(t, "POST", pathTransactions, tok, body), 201, "")
			want(t, "E7 again", c.do(t, "POST", pathTransactions, tok, body), 201, "")
			early := fmt.Sprintf(`{"import_supplier": "DEMO", "external_account_number": "PI-1", "transactions": [%s]}`, tx("T3", day(-40), "1"))
			r := c.do(t, "POST", pathTransactions+"?force_add_to_current_statement=false&check_previously_added=true", tok, early)
			if want(t, "E7 before the period", r, 400, "transactions_failed_validation"); r.Body["transaction_data"] == nil {
				t.Errorf("no transaction_data: %s", r.Raw)
			}
			want(t, "E7 not JSON", c.do(t, "POST", pathTransactions, tok, `{`), 400, "")
			want(t, "E7 unknown account", c.do(t, "POST", pathTransactions, tok, `{"import_supplier": "DEMO", "external_account_number": "NOPE", "transactions": []}`), 404, "account_not_found")
		})

		t.Run("E9 E2", func(t *testing.T) {
			t.Parallel()
			e9 := func(ean, vendor, ref string) map[string]any {
				return map[string]any{"import_supplier": "DEMO", "external_account_number": ean, "vendor": vendor, "reference": ref, "type": "CARD"}
			}
			want(t, "E9", c.do(t, "POST", pathE9, tok, e9("PI-1", "OK", "CARD-1")), 201, "")
			want(t, "E9 again", c.do(t, "POST", pathE9, tok, e9("PI-1", "OK", "CARD-1")), 400, "payment_instruction_already_exists")
			want(t, "E9 unknown at the vendor", c.do(t, "POST", pathE9, tok, e9("PI-1", "OK", "NOPE-1")), 400, "payment_instruction_not_found_at_vendor")
			want(t, "E9 vendor down", c.do(t, "POST", pathE9, tok, e9("PI-1", "DOWN", "CARD-2")), 500, "payment_vendor_unavailable")
			want(t, "E9 invalid", c.do(t, "POST", pathE9, tok, e9("NOPE", "NOBODY", "CARD-3")), 400, "payment_instruction_failed_validation")

			e2 := func(ref string, accounts ...string) map[string]any {
				accs := []any{}
				for _, a := range accounts {
					accs = append(accs, map[string]any{"external_account_number": a})
				}
				return map[string]any{"import_supplier_code": "DEMO", "external_business_identifier": "BIZ-OA", "vendor": "OK",
					"reference": ref, "type": "CARD", "accounts": accs}
			}
			want(t, "E2", c.do(t, "POST", pathE2, tok, e2("CARD-5", "BA-1", "BA-2")), 201, "")
			want(t, "E2 again", c.do(t, "POST", pathE2, tok, e2("CARD-5", "BA-1")), 400, "payment_instruction_already_exists")
			want(t, "E2 account of no business", c.do(t, "POST", pathE2, tok, e2("CARD-6", "PI-1")), 400, "payment_instruction_failed_validation")
			want(t, "E2 without a token", c.do(t, "POST", pathE2, "", e2("CARD-7", "BA-1")), 401, "not_authenticated")
		})

		t.Run("E5 limit and wait", func(t *testing.T) {
			t.Parallel()
			ltok := limited.accessToken(t, limited.newKey(t, "oa-limited"))
			limited.stage(t, ltok, fixture(t, "OA-A"))
			limited.stage(t, ltok, fixture(t, "OA-B"))
			want(t, "E5 past its wait", limited.do(t, "POST", processPath, ltok, processBody("OA-A", false)), 500, "account_processing_in_progress")
			want(t, "E5 over the limit", limited.do(t, "POST", processPath, ltok, processBody("OA-B", false)), 429, "concurrency_limit_exceeded")
			want(t, "E10 in progress", limited.do(t, "GET", pathTransferStatus("DEMO", "OA-A"), ltok, nil), 200, "")
			want(t, "account detail, not yet created", limited.do(t, "GET", "/v1/data-import/account/DEMO/OA-A/", ltok, nil), 200, "")
		})

		t.Run("account detail", func(t *testing.T) {
			t.Parallel()
			want(t, "account detail", c.do(t, "GET", "/v1/data-import/account/DEMO/BA-2/", tok, nil), 200, "")
			want(t, "account detail of no account", c.do(t, "GET", "/v1/data-import/account/DEMO/NOPE/", tok, nil), 404, "import_process_does_not_exist")
			want(t, "account detail of no supplier", c.do(t, "GET", "/v1/data-import/account/NOPE/BA-2/", tok, nil), 404, "import_supplier_not_found")
			want(t, "account detail without a token", c.do(t, "GET", "/v1/data-import/account/DEMO/BA-2/", "", nil), 401, "not_authenticated")
		})

		t.Run("operations endpoints", func(t *testing.T) {
			t.Parallel()
			want(t, "healthz", c.do(t, "GET", "/healthz", "", nil), 200, "")
			want(t, "readyz", c.do(t, "GET", "/readyz", "", nil), 200, "")
			metrics := func(user, pass string) response {
				req, _ := http.NewRequest("GET", c.base+"/metrics", nil)
				if user != "" {
					req.SetBasicAuth(user, pass)
				}
				return c.doReq(t, req)
			}
			want(t, "metrics", metrics(pageUser, pagePass), 200, "")
			want(t, "metrics without the login", metrics("", ""), 401, "not_authenticated")
			r := c.do(t, "GET", api.SchemaPath, "", nil)
			if want(t, "schema", r, 200, ""); string(r.Raw) != string(api.OpenAPI) {
				t.Error("the served document is not api/openapi.yaml")
			}
			r = c.do(t, "GET", api.SchemaPath+"?format=json", "", nil)
			fromYAML, _ := yaml.YAMLToJSON(api.OpenAPI)
			var a, b any
			_ = json.Unmarshal(r.Raw, &a)
			_ = json.Unmarshal(fromYAML, &b)
			if want(t, "schema as JSON", r, 200, ""); fmt.Sprint(a) != fmt.Sprint(b) {
				t.Error("?format=json is not the same document")
			}
			want(t, "schema in another format", c.do(t, "GET", api.SchemaPath+"?format=xml", "", nil), 400, "invalid_choice")
		})

		t.Run("migration summary", func(t *testing.T) {
			t.Parallel()
			get := func(path, user, pass string) response {
				req, _ := http.NewRequest("GET", c.base+path, nil)
				if user != "" {
					req.SetBasicAuth(user, pass)
				}
				return c.doReq(t, req)
			}
			want(t, "summary", get("/migration/DEMO/summary.json", pageUser, pagePass), 200, "")
			want(t, "summary with a key", get("/migration/DEMO/summary.json", "lead", c.newKey(t, "oa-page", "DEMO")), 200, "")
			want(t, "summary filtered", get("/migration/DEMO/summary.json?code=invalid_postcode&attr=x", pageUser, pagePass), 200, "")
			want(t, "summary bad cursor", get("/migration/DEMO/summary.json?before=x", pageUser, pagePass), 400, "invalid")
			want(t, "summary without a login", get("/migration/DEMO/summary.json", "", ""), 401, "not_authenticated")
			want(t, "summary of no supplier", get("/migration/NOPE/summary.json", pageUser, pagePass), 404, "import_supplier_not_found")
		})

		t.Run("paths and methods without an operation", func(t *testing.T) {
			t.Parallel()
			r := c.service.do(t, "GET", "/v1/data-import/nope/", "", nil)
			want(t, "unknown path", r, 404, "not_found")
			c.checkError(t, r)
			r = c.service.do(t, "DELETE", "/v1/graphql/", "", nil)
			want(t, "wrong method", r, 400, "method_not_allowed")
			c.checkError(t, r)
		})
	})

	// Every operation of the document was exercised.
	for path, item := range loadOpenAPI(t).Paths.Map() {
		for method, op := range item.Operations() {
			seen := append(c.hit[op.OperationID], limited.hit[op.OperationID]...)
			if len(seen) == 0 {
				t.Errorf("%s %s (%s) was never exercised", method, path, op.OperationID)
			}
			slices.Sort(seen)
			t.Logf("%-32s %v", op.OperationID, slices.Compact(seen))
		}
	}
}

// recorder is a testing.TB that keeps the failures the checker reports.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// The checker itself: answers the document does not describe fail, so that
// the document cannot drift from the code unnoticed. No service is needed:
// the answers are made up.
func TestOpenAPI_CheckerRefusesUndescribedAnswers(t *testing.T) {
	t.Parallel()
	c := newChecked(t, &service{base: "http://127.0.0.1:1"})
	jsonCT := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	unauth := http.Header{"Content-Type": {"application/json; charset=utf-8"}, "Www-Authenticate": {`Token realm="api"`}}
	errBody := `{"detail": "d", "code": "c", "errors": []}`
	cases := []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		ok                 bool
	}{
		{"a described answer", "POST", "/v1/data-import/business/", 201, jsonCT, `{"service_business_id": 7, "external_business_identifier": "B"}`, true},
		{"a described 401", "GET", "/v1/data-import/whoami/", 401, unauth, errBody, true},
		{"an undocumented status", "GET", "/healthz", 418, jsonCT, errBody, false},
		{"a wrong type", "POST", "/v1/data-import/business/", 201, jsonCT, `{"service_business_id": "7", "external_business_identifier": "B"}`, false},
		{"an undocumented field", "POST", "/v1/data-import/business/", 201, jsonCT, `{"service_business_id": 7, "external_business_identifier": "B", "x": 1}`, false},
		{"a missing field", "POST", "/v1/data-import/account-import-process/process/", 201, jsonCT, `{}`, false},
		{"an error without errors[]", "GET", "/v1/data-import/whoami/", 401, unauth, `{"detail": "d", "code": "c"}`, false},
		{"another Content-Type", "GET", "/healthz", 200, http.Header{"Content-Type": {"text/plain"}}, `{"status": "ok"}`, false},
		{"a 401 without WWW-Authenticate", "GET", "/v1/data-import/whoami/", 401, jsonCT, errBody, false},
		{"a 429 without Retry-After", "POST", "/v1/data-import/account-import-process/process/", 429, jsonCT, errBody, false},
		{"a path the document does not have", "GET", "/v1/data-import/nope/", 200, jsonCT, `{}`, false},
		{"a method the document does not have", "DELETE", "/healthz", 200, jsonCT, `{"status": "ok"}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{TB: t}
			req, _ := http.NewRequest(tc.method, c.base+tc.path, nil)
			c.check(rec, req, response{Status: tc.status, Header: tc.header, Raw: []byte(tc.body)})
			if tc.ok && len(rec.errs) > 0 {
				t.Errorf("refused: %v", rec.errs)
			}
			if !tc.ok && len(rec.errs) == 0 {
				t.Error("accepted")
			}
		})
	}
}

// checkRequest refuses an accepted request body that the document does not
// allow, so that the request schemas cannot drift from what the service
// takes.
func TestOpenAPI_CheckerRefusesUndescribedRequests(t *testing.T) {
	t.Parallel()
	c := newChecked(t, &service{base: "http://127.0.0.1:1"})
	cases := []struct {
		name, path, body string
		ok               bool
	}{
		{"a described request", "/v1/data-import/account-import-process/process/",
			`{"external_account_number": "A-1", "import_supplier_code": "DEMO", "operations_team_name": "Ops"}`, true},
		{"an undocumented field", "/v1/data-import/account-import-process/process/",
			`{"external_account_number": "A-1", "import_supplier_code": "DEMO", "operations_team_name": "Ops", "priority": 1}`, false},
		{"a wrong type", "/v1/data-import/account-import-process/process/",
			`{"external_account_number": "A-1", "import_supplier_code": "DEMO", "operations_team_name": "Ops", "dry_run": "yes"}`, false},
		{"a missing field", "/v1/data-import/account-import-process/process/", `{"external_account_number": "A-1"}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{TB: t}
			c.checkRequest(rec, "POST", tc.path, tc.body)
			if tc.ok && len(rec.errs) > 0 {
				t.Errorf("refused: %v", rec.errs)
			}
			if !tc.ok && len(rec.errs) == 0 {
				t.Error("accepted")
			}
		})
	}
}

// The interactive API page and its assets are served without a token, each
// with its content type; the page loads the served document.
func TestDocs_PageServesSwaggerUI(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	for _, tc := range []struct {
		path, contentType, contains string
		status                      int
	}{
		{api.DocsPath, "text/html; charset=utf-8", `<div id="swagger-ui">`, 200},
		{api.DocsPath + "index.html", "text/html; charset=utf-8", `<div id="swagger-ui">`, 200},
		{api.DocsPath + "init.js", "text/javascript; charset=utf-8", `url: "../schema/?format=json"`, 200},
		{api.DocsPath + "swagger-ui-bundle.js", "text/javascript; charset=utf-8", "SwaggerUIBundle", 200},
		{api.DocsPath + "swagger-ui.css", "text/css; charset=utf-8", ".swagger-ui", 200},
		{api.DocsPath + "favicon-32x32.png", "image/png", "PNG", 200},
		{api.DocsPath + "nope.js", "application/json; charset=utf-8", `"code":"not_found"`, 404},
	} {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest("GET", s.base+tc.path, nil)
			res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			got := []any{res.StatusCode, res.Header.Get("Content-Type"), strings.Contains(string(body), tc.contains)}
			want := []any{tc.status, tc.contentType, true}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("GET %s (-want +got):\n%s", tc.path, d)
			}
		})
	}
	// init.js names the schema relative to the page: it resolves to the
	// served document.
	if r := s.do(t, "GET", path.Join(api.DocsPath, "../schema/")+"/?format=json", "", nil); r.Status != 200 || r.Body["openapi"] != "3.0.3" {
		t.Errorf("the page's document: %d %.200s", r.Status, r.Raw)
	}
}

// Every example in the document (on a schema, a property or an item, at
// any depth) is valid against the schema it sits on, and every request
// body has one, so that the interactive page's "Try it out" starts from a
// request the service accepts.
func TestOpenAPI_ExamplesMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	seen := map[*openapi3.Schema]bool{}
	var visit func(where string, s *openapi3.SchemaRef)
	visit = func(where string, s *openapi3.SchemaRef) {
		if s == nil || s.Value == nil || seen[s.Value] {
			return
		}
		v := s.Value
		seen[v] = true
		if v.Example != nil {
			if err := v.VisitJSON(v.Example, openapi3.MultiErrors()); err != nil {
				t.Errorf("%s: the example does not match its schema: %v", where, err)
			}
		}
		for name, p := range v.Properties {
			visit(where+"."+name, p)
		}
		visit(where+"[]", v.Items)
		if v.AdditionalProperties.Schema != nil {
			visit(where+"{}", v.AdditionalProperties.Schema)
		}
		for i, group := range [][]*openapi3.SchemaRef{v.AllOf, v.AnyOf, v.OneOf} {
			for j, sub := range group {
				visit(fmt.Sprintf("%s/%d.%d", where, i, j), sub)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(doc.Components.Schemas)) {
		visit(name, doc.Components.Schemas[name])
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			for ct, mt := range op.RequestBody.Value.Content {
				if mt.Schema == nil || mt.Schema.Value == nil {
					continue
				}
				if mt.Schema.Value.Example == nil && mt.Example == nil && len(mt.Examples) == 0 {
					t.Errorf("%s %s (%s): the request body has no example", method, path, ct)
				}
				visit(method+" "+path, mt.Schema)
			}
		}
	}
	// Responses: every content with a schema has an example (the schema's,
	// or the media type's), and inline schemas are walked like named ones.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Responses == nil {
				continue
			}
			for status, r := range op.Responses.Map() {
				if r == nil || r.Value == nil {
					continue
				}
				for ct, mt := range r.Value.Content {
					if mt.Schema == nil || mt.Schema.Value == nil {
						continue
					}
					where := fmt.Sprintf("%s %s %s (%s)", method, path, status, ct)
					if mt.Schema.Value.Example == nil && mt.Example == nil && len(mt.Examples) == 0 {
						t.Errorf("%s: the response has no example", where)
					}
					if mt.Example != nil {
						if err := mt.Schema.Value.VisitJSON(mt.Example, openapi3.MultiErrors()); err != nil {
							t.Errorf("%s: the example does not match its schema: %v", where, err)
						}
					}
					visit(where, mt.Schema)
				}
			}
		}
	}
}
