package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/slots"
)

// fixture is the realistic example account (supplier DEMO, 2 customers, 2
// supply addresses, electricity meters with registers).
func fixture(t testing.TB, ean string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../../jobs/account/testdata/account.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if ean != "" {
		m["external_account_number"] = ean
	}
	return m
}

// fixtureDocument is the document that the fixture's second note names.
const fixtureDocument = "letters/A-00012345/welcome-2019.pdf"

// seedDemo creates what the fixture refers to: supplier DEMO, a team, the
// tariffs, the business contract and, when the service has a document
// store, the document of the fixture's note.
func seedDemo(t testing.TB, s *service, supplier admin.Supplier) {
	t.Helper()
	ctx := context.Background()
	if supplier.Code == "" {
		supplier.Code = "DEMO"
	}
	sup, err := admin.CreateSupplier(ctx, s.db, supplier)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTeam(ctx, s.db, "Ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateProduct(ctx, s.db, "DEMO-PRODUCTS", []string{"E-1R-FIX-24M-C", "E-1R-VAR-C", "HP-STD", "WH-RENT-STD"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`WITH b AS (INSERT INTO businesses (supplier_id, external_business_identifier, business_type, company_number, company_name)
		VALUES ($1, 'BIZ-1', 'LTD', '01234567', 'Hughes Ltd') RETURNING id)
		INSERT INTO business_contracts (business_id, supplier_id, identifier) SELECT id, $1, 'BC-2024-0042' FROM b`, sup.ID); err != nil {
		t.Fatal(err)
	}
	if s.env["DOCUMENTS_URL"] != "" {
		s.putDocument(t, sup.DocumentRoot, fixtureDocument)
	}
}

// putDocument places a small PDF at path under root in the service's
// document store.
func (s *service) putDocument(t testing.TB, root, path string) {
	t.Helper()
	store, err := documents.Open(context.Background(), s.env["DOCUMENTS_URL"], slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Put(context.Background(), root, path, strings.NewReader("%PDF-1.4 welcome letter")); err != nil {
		t.Fatal(err)
	}
}

func processBody(ean string, dryRun bool) map[string]any {
	b := map[string]any{"external_account_number": ean, "import_supplier_code": "DEMO", "operations_team_name": "Ops"}
	if dryRun {
		b["dry_run"] = true
	}
	return b
}

const (
	stagePath   = "/v1/data-import/account-import-process/create-or-update/"
	processPath = "/v1/data-import/account-import-process/process/"
)

var serviceNumberRE = regexp.MustCompile(`^A-[0-9A-F]{8}$`)

func (s *service) stage(t testing.TB, tok string, body map[string]any) {
	t.Helper()
	if r := s.do(t, "POST", stagePath, tok, body); r.Status != 201 && r.Status != 200 {
		t.Fatalf("staging: %d %s", r.Status, r.Raw)
	}
}

func (s *service) status(t testing.TB, tok, ean string) map[string]any {
	t.Helper()
	r := s.do(t, "GET", "/v1/data-import/account-transfer-status/DEMO/"+ean+"/", tok, nil)
	if r.Status != 200 {
		t.Fatalf("E10: %d %s", r.Status, r.Raw)
	}
	return r.Body
}

func (s *service) count(t testing.TB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := s.db.Get(&n, q, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestProcess_CreatesTheWholeAccount(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-1"))

	r := s.do(t, "POST", processPath, tok, processBody("ACC-1", false))
	if r.Status != 201 {
		t.Fatalf("E5: %d %s", r.Status, r.Raw)
	}
	number, _ := r.Body["service_account_number"].(string)
	if !serviceNumberRE.MatchString(number) {
		t.Fatalf("service_account_number %q", number)
	}
	st := s.status(t, tok, "ACC-1")
	if st["status"] != "COMPLETED" || st["service_account_number"] != number {
		t.Errorf("E10 after creation: %v", st)
	}
	checks := []struct {
		what string
		q    string
		want int
	}{
		{"accounts", `SELECT count(*) FROM accounts WHERE service_account_number = $1`, 1},
		{"customers", `SELECT count(*) FROM customers c JOIN accounts a ON a.id = c.account_id WHERE a.service_account_number = $1`, 2},
		{"supply addresses", `SELECT count(*) FROM supply_addresses x JOIN accounts a ON a.id = x.account_id WHERE a.service_account_number = $1`, 2},
		{"a zero ledger", `SELECT count(*) FROM ledgers l JOIN accounts a ON a.id = l.account_id WHERE a.service_account_number = $1 AND l.balance = 0`, 1},
		{"a team and a contract", `SELECT count(*) FROM accounts a JOIN operations_teams t ON t.id = a.operations_team_id JOIN business_contracts c ON c.id = a.business_contract_id WHERE a.service_account_number = $1 AND t.name = 'Ops'`, 1},
	}
	for _, c := range checks {
		if got := s.count(t, c.q, number); got != c.want {
			t.Errorf("%s: %d rows, want %d", c.what, got, c.want)
		}
	}
	for _, table := range []string{"supply_points", "meters", "agreements"} {
		if s.count(t, `SELECT count(*) FROM `+table) == 0 {
			t.Errorf("no rows in %s", table)
		}
	}
	if s.count(t, `SELECT count(*) FROM registers`) == 0 {
		t.Error("no registers")
	}

	// Processing again: 400 with both numbers, so a client that lost the 201 recovers it.
	r = s.do(t, "POST", processPath, tok, processBody("ACC-1", false))
	if r.Status != 400 || r.Body["code"] != "account_import_process_already_imported" ||
		r.Body["external_account_number"] != "ACC-1" || r.Body["service_account_number"] != number {
		t.Errorf("second E5: %d %s", r.Status, r.Raw)
	}
	// Staging an imported account is refused too.
	if r := s.do(t, "POST", stagePath, tok, fixture(t, "ACC-1")); r.Status != 400 || r.Body["service_account_number"] != number {
		t.Errorf("staging an imported account: %d %s", r.Status, r.Raw)
	}
}

func TestProcess_DryRunPersistsNothing(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-DRY"))
	r := s.do(t, "POST", processPath, tok, processBody("ACC-DRY", true))
	if r.Status != 400 || r.Body["code"] != "dry_run_rolled_back" || r.Body["detail"] != "Account would successfully import. Rolled back due to dry run." {
		t.Fatalf("dry run: %d %s", r.Status, r.Raw)
	}
	if n := s.count(t, `SELECT count(*) FROM accounts`); n != 0 {
		t.Errorf("dry run left %d accounts", n)
	}
	if n := s.count(t, `SELECT count(*) FROM customers`); n != 0 {
		t.Errorf("dry run left %d customers", n)
	}
	if st := s.status(t, tok, "ACC-DRY"); st["status"] != "UNKNOWN" || st["service_account_number"] != "" {
		t.Errorf("E10 after a dry run: %v", st)
	}
	// A dry run of invalid data reports the problems instead.
	if _, err := s.db.Exec(`DELETE FROM tariffs WHERE code = 'HP-STD'`); err != nil {
		t.Fatal(err)
	}
	r = s.do(t, "POST", processPath, tok, processBody("ACC-DRY", true))
	if r.Status != 400 || r.Body["code"] != "account_failed_validation" || !strings.Contains(string(r.Raw), "tariff_code_not_found") {
		t.Errorf("dry run of invalid data: %d %s", r.Status, r.Raw)
	}
}

func TestProcess_CheapChecksAnswerAtOnce(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{})
	ctx := context.Background()
	if _, err := admin.CreateSupplier(ctx, s.db, admin.Supplier{Code: "PAUSED"}); err != nil {
		t.Fatal(err)
	}
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-OK"))
	if _, err := s.db.Exec(`INSERT INTO import_processes (supplier_id, external_account_number, payload)
		SELECT id, 'ACC-P', '{}' FROM import_suppliers WHERE code = 'PAUSED'`); err != nil {
		t.Fatal(err)
	}
	if err := admin.SetSupplierStatus(ctx, s.db, "PAUSED", "Paused"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		body       map[string]any
		code, attr string
	}{
		{"nothing staged", processBody("NOPE", false), "import_process_does_not_exist", "external_account_number"},
		{"unknown team", map[string]any{"external_account_number": "ACC-OK", "import_supplier_code": "DEMO", "operations_team_name": "Nobody"}, "operations_team_name_does_not_exist", "operations_team_name"},
		{"unknown supplier", map[string]any{"external_account_number": "ACC-OK", "import_supplier_code": "NOPE", "operations_team_name": "Ops"}, "import_supplier_not_found", "import_supplier_code"},
		{"supplier paused", map[string]any{"external_account_number": "ACC-P", "import_supplier_code": "PAUSED", "operations_team_name": "Ops"}, "import_supplier_migration_not_ongoing", "import_supplier_code"},
		{"missing field", map[string]any{"external_account_number": "ACC-OK", "import_supplier_code": "DEMO"}, "invalid_request", "operations_team_name"},
		{"unknown field", map[string]any{"external_account_number": "ACC-OK", "import_supplier_code": "DEMO", "operations_team_name": "Ops", "extra": 1}, "invalid_request", "extra"},
		{"wrong type", map[string]any{"external_account_number": "ACC-OK", "import_supplier_code": "DEMO", "operations_team_name": "Ops", "dry_run": "yes"}, "invalid_request", "dry_run"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.do(t, "POST", processPath, tok, tc.body)
			if r.Status != 400 || r.Body["code"] != tc.code || !strings.Contains(string(r.Raw), `"attr":"`+tc.attr+`"`) {
				t.Fatalf("got %d %s, want 400 %s at %s", r.Status, r.Raw, tc.code, tc.attr)
			}
		})
	}
	if st := s.status(t, tok, "ACC-OK"); st["status"] != "UNKNOWN" {
		t.Errorf("a refused E5 changed the status: %v", st)
	}
}

// E5's body goes through the parse path and string checks of every other
// body: a value E4 refuses in external_account_number is refused by E5 with
// the same status, code and attr, before any lookup.
func TestProcess_BadStringsAnswerAsStaging(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	cases := []struct {
		name string
		ean  string
		want []fieldProblem
	}{
		{"NUL character", "A\x00", []fieldProblem{{"external_account_number", "null_characters_not_allowed"}}},
		{"spaces only", "   ", []fieldProblem{{"external_account_number", "blank"}}},
		{"empty", "", []fieldProblem{{"external_account_number", "blank"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			account := fixture(t, "")
			account["external_account_number"] = tc.ean
			staged := s.do(t, "POST", stagePath, tok, account)
			processed := s.do(t, "POST", processPath, tok, processBody(tc.ean, false))
			for _, r := range []struct {
				endpoint string
				r        response
				code     string
			}{{"E4", staged, "account_failed_validation"}, {"E5", processed, "invalid_request"}} {
				if r.r.Status != 400 || r.r.Body["code"] != r.code {
					t.Errorf("%s: %d %s, want 400 %s", r.endpoint, r.r.Status, r.r.Raw, r.code)
					continue
				}
				if diff := cmp.Diff(tc.want, problemsOf(t, r.r.Body)); diff != "" {
					t.Errorf("%s problems (-want +got):\n%s", r.endpoint, diff)
				}
			}
		})
	}
	if n := s.count(t, `SELECT count(*) FROM import_processes`); n != 0 {
		t.Errorf("%d import processes after refused requests", n)
	}
}

func TestProcess_ConcurrentCallsCreateOneAccount(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-RACE"))
	const n = 20
	results := make([]response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = s.do(t, "POST", processPath, tok, processBody("ACC-RACE", false))
		}()
	}
	close(start)
	wg.Wait()
	if got := s.count(t, `SELECT count(*) FROM accounts WHERE external_account_number = 'ACC-RACE'`); got != 1 {
		t.Fatalf("%d accounts created, want 1", got)
	}
	var number string
	_ = s.db.Get(&number, `SELECT service_account_number FROM accounts`)
	for i, r := range results {
		switch {
		case r.Status == 201 && r.Body["service_account_number"] == number:
		case r.Status == 400 && r.Body["code"] == "account_import_process_already_imported" && r.Body["service_account_number"] == number:
		default:
			t.Errorf("call %d: %d %s", i, r.Status, r.Raw)
		}
	}
}

func TestProcess_InvalidStagedDataIsNotRetriedAndE10SaysWhy(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-BAD"))
	// The catalogue changes after staging: the worker's re-validation fails.
	if _, err := s.db.Exec(`DELETE FROM tariffs WHERE code = 'HP-STD'`); err != nil {
		t.Fatal(err)
	}
	r := s.do(t, "POST", processPath, tok, processBody("ACC-BAD", false))
	if r.Status != 400 || r.Body["code"] != "account_failed_validation" || !strings.Contains(string(r.Raw), "tariff_code_not_found") {
		t.Fatalf("E5 of data that no longer validates: %d %s", r.Status, r.Raw)
	}
	st := s.status(t, tok, "ACC-BAD")
	last, _ := st["last_error"].(map[string]any)
	if st["status"] != "UNKNOWN" || last["code"] != "account_failed_validation" || !strings.Contains(fmt.Sprint(last["errors"]), "tariff_code_not_found") {
		t.Errorf("E10 after a failed attempt: %v", st)
	}
	// Archived at once, never retried.
	insp := asynq.NewInspector(mustRedisOpt(t, s.env["REDIS_URL"]))
	defer insp.Close()
	info, err := insp.GetTaskInfo(jobs.QueueAccounts, jobs.AccountTaskID("DEMO", "ACC-BAD", false))
	if err != nil {
		t.Fatal(err)
	}
	if info.State != asynq.TaskStateArchived || info.Retried != 0 {
		t.Errorf("task state %v after %d retries, want archived after 0", info.State, info.Retried)
	}
	// Once the data is fixed, E5 can run again for the same account.
	if _, err := s.db.Exec(`INSERT INTO tariffs (product_id, code) SELECT id, 'HP-STD' FROM products LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	if r := s.do(t, "POST", processPath, tok, processBody("ACC-BAD", false)); r.Status != 201 {
		t.Errorf("E5 after fixing the data: %d %s", r.Status, r.Raw)
	}
	if st := s.status(t, tok, "ACC-BAD"); st["last_error"] != nil {
		t.Errorf("last_error kept after success: %v", st["last_error"])
	}
}

// For a supplier that requires documents, a note in the payload may name a
// document only if the store holds it under the supplier's document root,
// as for E6. E3 and E4 do not look; E5 does, before it creates anything.
func TestProcess_NoteDocumentsMustExistUnderTheSuppliersRoot(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{DocumentRoot: "demo/docs", RequireDocuments: true}) // places the fixture's document under the root
	tok := s.accessToken(t, s.newKey(t, "k"))

	s.stage(t, tok, fixture(t, "ACC-DOC"))
	if r := s.do(t, "POST", processPath, tok, processBody("ACC-DOC", false)); r.Status != 201 {
		t.Fatalf("E5 with the document in the store: %d %s", r.Status, r.Raw)
	}
	if n := s.count(t, `SELECT count(*) FROM accounts WHERE external_account_number = 'ACC-DOC'`); n != 1 {
		t.Fatalf("%d accounts, want 1", n)
	}

	// The same path outside the root, and a path that names nothing.
	s.putDocument(t, "", "letters/outside-root.pdf")
	for _, path := range []string{"letters/outside-root.pdf", "letters/never-uploaded.pdf"} {
		ean := "ACC-NODOC-" + strings.TrimSuffix(strings.TrimPrefix(path, "letters/"), ".pdf")
		acc := fixture(t, ean)
		acc["notes"].([]any)[1].(map[string]any)["document_paths"] = []any{map[string]any{"document_path": path}}
		s.stage(t, tok, acc) // staging does not look in the store
		r := s.do(t, "POST", processPath, tok, processBody(ean, false))
		errs, _ := r.Body["errors"].([]any)
		want := map[string]any{"attr": "notes.1.document_paths.0.document_path", "code": "path_does_not_exist_in_file_store"}
		if r.Status != 400 || r.Body["code"] != "account_failed_validation" || len(errs) != 1 ||
			errs[0].(map[string]any)["attr"] != want["attr"] || errs[0].(map[string]any)["code"] != want["code"] {
			t.Errorf("E5 naming %s: %d %s, want 400 with one %v", path, r.Status, r.Raw, want)
		}
		if n := s.count(t, `SELECT count(*) FROM accounts WHERE external_account_number = $1`, ean); n != 0 {
			t.Errorf("%s: %d accounts created", path, n)
		}
		st := s.status(t, tok, ean)
		if last, _ := st["last_error"].(map[string]any); !strings.Contains(fmt.Sprint(last["errors"]), "path_does_not_exist_in_file_store") {
			t.Errorf("%s: E10 = %v, want last_error naming path_does_not_exist_in_file_store", path, st)
		}
	}
}

// A worker without a document store cannot check the documents a note
// names for a supplier that requires documents. Its configuration will not
// change between retries, so the account fails at once, saying why; an
// account whose notes name no document is created as usual.
func TestProcess_WorkerWithoutDocumentStoreRefusesNotesWithDocuments(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", map[string]string{"DOCUMENTS_URL": ""})
	seedDemo(t, s, admin.Supplier{RequireDocuments: true})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-NOSTORE"))
	r := s.do(t, "POST", processPath, tok, processBody("ACC-NOSTORE", false))
	if r.Status != 500 || r.Body["code"] != "document_store_not_configured" {
		t.Fatalf("E5 with a note naming a document and no store: %d %s, want 500 as from E6", r.Status, r.Raw)
	}
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("E5 with no document store: no Retry-After")
	}
	// Not retried: archived at once. (A retried task would still be
	// pending, and E5 would have answered account_processing_in_progress.)
	insp := asynq.NewInspector(mustRedisOpt(t, s.env["REDIS_URL"]))
	defer insp.Close()
	if info, err := insp.GetTaskInfo(jobs.QueueAccounts, jobs.AccountTaskID("DEMO", "ACC-NOSTORE", false)); err != nil {
		t.Fatal(err)
	} else if info.State != asynq.TaskStateArchived || info.Retried != 0 {
		t.Errorf("task state %v after %d retries, want archived after 0", info.State, info.Retried)
	}
	// Asking again fails the same way, with the same status.
	if r := s.do(t, "POST", processPath, tok, processBody("ACC-NOSTORE", false)); r.Status != 500 || r.Body["code"] != "document_store_not_configured" {
		t.Errorf("E5 again: %d %s", r.Status, r.Raw)
	}
	if last, _ := s.status(t, tok, "ACC-NOSTORE")["last_error"].(map[string]any); last["code"] != "document_store_not_configured" {
		t.Errorf("E10 last_error = %v", last)
	}

	acc := fixture(t, "ACC-NODOCS")
	acc["notes"] = acc["notes"].([]any)[:1] // the note with a body only
	s.stage(t, tok, acc)
	if r := s.do(t, "POST", processPath, tok, processBody("ACC-NODOCS", false)); r.Status != 201 {
		t.Errorf("E5 of an account whose notes name no document: %d %s", r.Status, r.Raw)
	}
}

func mustRedisOpt(t testing.TB, url string) asynq.RedisConnOpt {
	t.Helper()
	opt, err := asynq.ParseRedisURI(url)
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

// Without a worker ("api" mode), tasks stay queued: the wait times out, E10
// shows IN_PROGRESS, and a worker started later finishes the job.
func TestProcess_WaitTimeoutAnswersPollE10AndTheJobGoesOn(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", map[string]string{"PROCESS_WAIT_TIMEOUT": "300ms"})
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-SLOW"))
	r := s.do(t, "POST", processPath, tok, processBody("ACC-SLOW", false))
	if r.Status != 500 || r.Body["code"] != "account_processing_in_progress" || !strings.Contains(r.Body["detail"].(string), "account-transfer-status") {
		t.Fatalf("E5 past its wait: %d %s", r.Status, r.Raw)
	}
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("E5 past its wait without Retry-After")
	}
	if st := s.status(t, tok, "ACC-SLOW"); st["status"] != "IN_PROGRESS" {
		t.Fatalf("E10 while queued: %v", st)
	}
	if r := s.do(t, "POST", stagePath, tok, fixture(t, "ACC-SLOW")); r.Status != 400 || r.Body["code"] != "account_import_in_progress" {
		t.Errorf("staging while in progress: %d %s", r.Status, r.Raw)
	}
	startWorker(t, s.env)
	deadline := time.Now().Add(liveness)
	for {
		st := s.status(t, tok, "ACC-SLOW")
		if st["status"] == "COMPLETED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("E10 never showed COMPLETED: %v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startWorker runs `importd worker` with env until the test ends.
func startWorker(t testing.TB, env map[string]string) {
	t.Helper()
	wenv := map[string]string{}
	for k, v := range env {
		wenv[k] = v
	}
	wenv["HTTP_ADDR"] = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"worker"}, func(k string) string { return wenv[k] }, io.Discard, io.Discard, nil)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
}

func TestProcess_ConcurrencyLimit(t *testing.T) {
	t.Parallel()
	t.Run("a limit of 1 refuses a second account while one is queued", func(t *testing.T) {
		t.Parallel()
		// No worker: the first account stays queued and holds the slot.
		s := startService(t, "api", map[string]string{"PROCESS_CONCURRENCY_LIMIT": "1", "PROCESS_WAIT_TIMEOUT": "200ms"})
		seedDemo(t, s, admin.Supplier{})
		tok := s.accessToken(t, s.newKey(t, "k"))
		s.stage(t, tok, fixture(t, "ACC-A"))
		s.stage(t, tok, fixture(t, "ACC-B"))
		if r := s.do(t, "POST", processPath, tok, processBody("ACC-A", false)); r.Status != 500 || r.Body["code"] != "account_processing_in_progress" {
			t.Fatalf("first account: %d %s", r.Status, r.Raw)
		}
		r := s.do(t, "POST", processPath, tok, processBody("ACC-B", false))
		if r.Status != 429 || r.Body["code"] != "concurrency_limit_exceeded" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("second account over the limit: %d %s (Retry-After %q)", r.Status, r.Raw, r.Header.Get("Retry-After"))
		}
		if st := s.status(t, tok, "ACC-B"); st["status"] != "UNKNOWN" {
			t.Errorf("a refused account changed status: %v", st)
		}
		// The same account again shares its slot instead of being refused.
		if r := s.do(t, "POST", processPath, tok, processBody("ACC-A", false)); r.Status != 500 || r.Body["code"] != "account_processing_in_progress" {
			t.Errorf("the queued account again: %d %s", r.Status, r.Raw)
		}
		// When the worker finishes the first, the slot frees and the second goes through.
		startWorker(t, s.env)
		deadline := time.Now().Add(liveness)
		for {
			r := s.do(t, "POST", processPath, tok, processBody("ACC-B", false))
			// 201, or "already imported" when an earlier call of this loop
			// queued it (500 after its wait) and it finished before this one.
			if r.Status == 201 || r.Status == 400 && r.Body["code"] == "account_import_process_already_imported" {
				break
			}
			waiting := r.Status == 429 || r.Status == 500 && r.Body["code"] == "account_processing_in_progress"
			if !waiting || time.Now().After(deadline) {
				t.Fatalf("second account after the first finished: %d %s", r.Status, r.Raw)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Run("a limit of 0 lets requests queue up", func(t *testing.T) {
		t.Parallel()
		s := startService(t, "api", map[string]string{"PROCESS_CONCURRENCY_LIMIT": "0", "PROCESS_WAIT_TIMEOUT": "200ms"})
		seedDemo(t, s, admin.Supplier{})
		tok := s.accessToken(t, s.newKey(t, "k"))
		for i := range 5 {
			ean := fmt.Sprintf("ACC-%d", i)
			s.stage(t, tok, fixture(t, ean))
			if r := s.do(t, "POST", processPath, tok, processBody(ean, false)); r.Status != 500 || r.Body["code"] != "account_processing_in_progress" {
				t.Fatalf("%s with the limit disabled: %d %s", ean, r.Status, r.Raw)
			}
		}
	})
}

func TestProcess_RedisDownAnswers500AndKeepsStagedData(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	cmd := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitTCP(t, fmt.Sprintf("127.0.0.1:%d", port))
	// Checked against the OpenAPI document: the answers of a service whose
	// Redis is down are documented too.
	c := newChecked(t, startService(t, "api", map[string]string{"REDIS_URL": fmt.Sprintf("redis://127.0.0.1:%d/0", port)}))
	s := c.service
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-R"))
	var before string
	_ = s.db.Get(&before, `SELECT payload::text FROM import_processes`)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	r := c.do(t, "POST", processPath, tok, processBody("ACC-R", false))
	if r.Status != 500 || r.Body["code"] != "queue_unavailable" {
		t.Fatalf("E5 with Redis down: %d %s", r.Status, r.Raw)
	}
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("E5 with Redis down: no Retry-After")
	}
	if r := c.do(t, "GET", "/readyz", "", nil); r.Status != 503 {
		t.Errorf("/readyz with Redis down: %d %s", r.Status, r.Raw)
	}
	var after, status string
	_ = s.db.Get(&after, `SELECT payload::text FROM import_processes`)
	_ = s.db.Get(&status, `SELECT status FROM import_processes`)
	if after != before || status != "UNKNOWN" {
		t.Errorf("staged data or status changed: status %s, payload same: %v", status, after == before)
	}
}

// A worker stopped in the middle of a creation: its transaction rolls back,
// the task returns to the queue, a later worker runs it, and exactly one
// account exists.
func TestProcess_WorkerKilledMidCreationRetriesToExactlyOneAccount(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", map[string]string{"PROCESS_WAIT_TIMEOUT": "200ms", "SHUTDOWN_TIMEOUT": "300ms"})
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-KILL"))

	// Hold a lock the creation statement needs, so that the worker is stuck
	// mid-transaction, after it has locked the process row.
	lockTx, err := s.db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer lockTx.Rollback()
	if _, err := lockTx.Exec(`LOCK TABLE ledgers IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if r := s.do(t, "POST", processPath, tok, processBody("ACC-KILL", false)); r.Status != 500 || r.Body["code"] != "account_processing_in_progress" {
		t.Fatalf("E5: %d %s", r.Status, r.Raw)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wenv := map[string]string{}
	for k, v := range s.env {
		wenv[k] = v
	}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"worker"}, func(k string) string { return wenv[k] }, io.Discard, io.Discard, nil)
	}()
	// Wait until the worker is blocked on the lock inside its transaction.
	deadline := time.Now().Add(15 * time.Second)
	// pg_locks rather than the query's text, which pg_stat_activity cuts at
	// track_activity_query_size, before the creation statement's ledger insert.
	for s.count(t, `SELECT count(*) FROM pg_locks WHERE relation = 'ledgers'::regclass AND NOT granted`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the worker never reached the ledger insert")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel() // the worker stops; its in-flight task is abandoned after SHUTDOWN_TIMEOUT
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = lockTx.Rollback()
	if n := s.count(t, `SELECT count(*) FROM accounts`); n != 0 {
		t.Fatalf("%d accounts after the worker died mid-creation; the transaction must roll back", n)
	}
	startWorker(t, s.env)
	deadline = time.Now().Add(30 * time.Second)
	for s.status(t, tok, "ACC-KILL")["status"] != "COMPLETED" {
		if time.Now().After(deadline) {
			t.Fatalf("the task never ran again: %v", s.status(t, tok, "ACC-KILL"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := s.count(t, `SELECT count(*) FROM accounts`); n != 1 {
		t.Fatalf("%d accounts, want exactly 1", n)
	}
}

func TestProcess_MigrationEmailsGoToTheOutbox(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{MigrationEmails: true})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-MAIL"))
	if r := s.do(t, "POST", processPath, tok, processBody("ACC-MAIL", false)); r.Status != 201 {
		t.Fatalf("E5: %d %s", r.Status, r.Raw)
	}
	if n := s.count(t, `SELECT count(*) FROM email_outbox WHERE to_address LIKE '%brightmail.co.uk'`); n != 2 {
		t.Errorf("%d outbox rows, want one per customer with an address (2)", n)
	}
	// Without SMTP_URL nothing is sent, but the e-mail jobs run and leave the rows unsent.
	insp := asynq.NewInspector(mustRedisOpt(t, s.env["REDIS_URL"]))
	defer insp.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		q, err := insp.GetQueueInfo(jobs.QueueEmails)
		if err == nil && q.Size == 0 && q.Processed >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("e-mail jobs did not run: %+v %v", q, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestDashboard_ShowsTheAccountsQueueBehindBasicAuth(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", map[string]string{"MONITORING_USER": "ops", "MONITORING_PASSWORD": testPassword})
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-DASH"))
	if r := s.do(t, "POST", processPath, tok, processBody("ACC-DASH", false)); r.Status != 201 {
		t.Fatalf("E5: %d %s", r.Status, r.Raw)
	}
	req, _ := http.NewRequest("GET", s.base+"/monitoring/api/queues", nil)
	if r := doReq(t, req); r.Status != 401 {
		t.Errorf("dashboard without credentials: %d", r.Status)
	}
	req.SetBasicAuth("ops", "wrong")
	if r := doReq(t, req); r.Status != 401 {
		t.Errorf("dashboard with a wrong password: %d", r.Status)
	}
	req.SetBasicAuth("ops", testPassword)
	r := doReq(t, req)
	if r.Status != 200 || !strings.Contains(string(r.Raw), `"queue":"accounts"`) {
		t.Fatalf("dashboard queue API: %d %s", r.Status, r.Raw)
	}
}

// A request that joins a task which has just recorded its outcome, before
// Asynq marks it finished, must answer that outcome at once: not mark the
// account IN_PROGRESS again (nothing would ever correct it) and wait for an
// announcement that was made before it listened.
func TestProcess_JoiningATaskThatHasJustEndedAnswersItsOutcome(t *testing.T) {
	t.Parallel()
	// A long wait, so that the bound below is generous for a loaded machine
	// and still tells a prompt answer from a wait that ran out.
	const wait = time.Minute
	s := startService(t, "api", map[string]string{"PROCESS_WAIT_TIMEOUT": wait.String(), "PROCESS_CONCURRENCY_LIMIT": "2"})
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-ENDED"))
	var processID, supplierID, teamID int64
	_ = s.db.Get(&processID, `SELECT id FROM import_processes WHERE external_account_number = 'ACC-ENDED'`)
	_ = s.db.Get(&supplierID, `SELECT id FROM import_suppliers WHERE code = 'DEMO'`)
	_ = s.db.Get(&teamID, `SELECT id FROM operations_teams WHERE name = 'Ops'`)
	// The task is still listed (no worker runs in "api" mode), while its
	// outcome is in PostgreSQL already, as after a worker's finish.
	task, err := jobs.NewAccountProcessTask(jobs.AccountProcessPayload{ProcessID: processID, SupplierID: supplierID,
		SupplierCode: "DEMO", ExternalAccountNumber: "ACC-ENDED", OperationsTeamID: teamID})
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(mustRedisOpt(t, s.env["REDIS_URL"]))
	defer client.Close()
	if _, err := client.Enqueue(task); err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(problem.Record{Detail: "Could not validate account data.", Code: "account_failed_validation",
		Errors: []problem.FieldError{{Attr: "agreements.0.tariff_code", Code: "tariff_code_not_found", Detail: "No such tariff."}}})
	if _, err := s.db.Exec(`UPDATE import_processes SET status = 'UNKNOWN', last_error = $2 WHERE id = $1`, processID, rec); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := s.do(t, "POST", processPath, tok, processBody("ACC-ENDED", false))
	if r.Status != 400 || r.Body["code"] != "account_failed_validation" || !strings.Contains(string(r.Raw), "tariff_code_not_found") {
		t.Fatalf("E5 joining an ended task: %d %s", r.Status, r.Raw)
	}
	if d := time.Since(start); d > wait/2 {
		t.Errorf("E5 took %v: it waited for an announcement already made", d)
	}
	if st := s.status(t, tok, "ACC-ENDED"); st["status"] != "UNKNOWN" {
		t.Errorf("E10 after joining an ended task: %v", st)
	}
	rdb := redis.NewClient(mustRedisOptions(t, s.env["REDIS_URL"]))
	defer rdb.Close()
	if n, err := rdb.ZCard(context.Background(), slots.Key).Result(); err != nil || n != 0 {
		t.Errorf("concurrency slots held after the answer: %d (%v), want 0", n, err)
	}
}

func mustRedisOptions(t testing.TB, url string) *redis.Options {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

// The worker creates the accounts of E5 calls that run at once in shared
// transactions of at most ACCOUNT_BATCH accounts, and every call still gets
// its own account.
func TestE5_AccountsProcessedAtOnceShareTransactionsOfAtMostTheBatchSize(t *testing.T) {
	t.Parallel()
	const n, batch = 40, 8
	s := startService(t, "serve", map[string]string{"WORKER_CONCURRENCY": fmt.Sprint(n),
		"ACCOUNT_WRITERS": "1", "ACCOUNT_BATCH": fmt.Sprint(batch)})
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "batch"))
	eans := stageForBench(t, s, "BATCH", n)
	var wg sync.WaitGroup
	for _, ean := range eans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := s.do(t, "POST", processPath, tok, processBody(ean, false)); r.Status != 201 {
				t.Errorf("E5 %s: %d %s", ean, r.Status, r.Raw)
			}
		}()
	}
	wg.Wait()
	if got := s.count(t, `SELECT count(*) FROM accounts a JOIN import_processes p ON p.id = a.import_process_id
		WHERE p.status = 'COMPLETED' AND p.service_account_number = a.service_account_number`); got != n {
		t.Fatalf("%d accounts created and recorded, want %d", got, n)
	}
	var sizes []int
	if err := s.db.Select(&sizes, `SELECT count(*) FROM accounts GROUP BY xmin::text ORDER BY 1 DESC`); err != nil {
		t.Fatal(err)
	}
	if sizes[0] > batch {
		t.Errorf("a transaction created %d accounts, more than ACCOUNT_BATCH=%d", sizes[0], batch)
	}
	// 40 calls at once against one writer: while it commits, the others
	// queue behind it.
	if len(sizes) == n {
		t.Errorf("each of %d accounts had a transaction of its own; want shared ones", n)
	}
	t.Logf("accounts per transaction: %v", sizes)
}
