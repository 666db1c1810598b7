package main

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/auth"
	pt "github.com/bulkimport/bulkimport/jobs/progress/progresstest"
	"github.com/bulkimport/bulkimport/jobs/status"
)

const (
	pageUser = "ops"
	pagePass = testPassword
)

// startPage starts the API with the migration page on and the cohort of
// progresstest seeded.
func startPage(t *testing.T) *service {
	t.Helper()
	s := startService(t, "api", map[string]string{"MONITORING_USER": pageUser, "MONITORING_PASSWORD": pagePass})
	pt.Seed(t, s.db)
	return s
}

// basicGet sends GET path with basic auth (none when user and pass are empty).
func (s *service) basicGet(t *testing.T, path, user, pass string) response {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+path, nil)
	if user != "" || pass != "" {
		req.SetBasicAuth(user, pass)
	}
	return doReq(t, req)
}

func TestMigrationPage_NeedsTheMonitoringLoginOrAnAPIKey(t *testing.T) {
	t.Parallel()
	// The 20 refused logins below all count against 127.0.0.1, wrong
	// MONITORING_USER logins included; the default limit (20) would then
	// refuse the operator's right login with 429.
	s := startService(t, "api", map[string]string{"MONITORING_USER": pageUser, "MONITORING_PASSWORD": pagePass, "AUTH_FAILURE_LIMIT": "100"})
	pt.Seed(t, s.db)
	revoked := s.newKey(t, "page-revoked")
	if err := auth.RevokeKey(context.Background(), s.db, "page-revoked"); err != nil {
		t.Fatal(err)
	}
	paths := []string{"/migration/", "/migration/ACME/", "/migration/ACME/summary.json", "/migration/static/page.js", "/migration/NOPE/"}
	cases := []struct {
		name, user, pass, code string
	}{
		{"no credentials", "", "", "not_authenticated"},
		{"wrong password", pageUser, "nope", "authentication_failed"},
		{"wrong user", "someone", pagePass, "authentication_failed"},
		{"unknown API key", "x", "bik_0123456789abcdefghijklmnop", "authentication_failed"},
		{"revoked API key", "x", revoked, "authentication_failed"},
	}
	for _, tc := range cases {
		for _, path := range paths {
			r := s.basicGet(t, path, tc.user, tc.pass)
			if r.Status != 401 || r.Body["code"] != tc.code || r.Body["errors"] == nil ||
				!strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("%s: GET %s: %d %s (WWW-Authenticate %q), want 401 %s with a Basic challenge",
					tc.name, path, r.Status, r.Raw, r.Header.Get("WWW-Authenticate"), tc.code)
			}
		}
	}
	for _, path := range paths[:4] {
		if r := s.basicGet(t, path, pageUser, pagePass); r.Status != 200 {
			t.Errorf("operator: GET %s: %d %.300s", path, r.Status, r.Raw)
		}
	}
}

func TestMigrationPage_IsOffWithoutMonitoringUser(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	if r := s.basicGet(t, "/migration/", pageUser, pagePass); r.Status != 404 || r.Body["code"] != "not_found" {
		t.Errorf("GET /migration/ without MONITORING_USER: %d %s, want 404 not_found", r.Status, r.Raw)
	}
}

// summary is the part of summary.json the tests compare.
type summary struct {
	Supplier struct {
		Code   string           `json:"code"`
		Status string           `json:"status"`
		Counts map[string]int64 `json:"counts"`
	} `json:"supplier"`
	TopErrors []struct {
		Code     string `json:"code"`
		Attr     string `json:"attr"`
		Accounts int64  `json:"accounts"`
	} `json:"top_errors"`
	Failed struct {
		Accounts []struct {
			ExternalAccountNumber string `json:"external_account_number"`
			Code                  string `json:"code"`
		} `json:"accounts"`
	} `json:"failed"`
	Queue *struct {
		Name      string `json:"name"`
		Available bool   `json:"available"`
	} `json:"queue"`
}

func decodeSummary(t *testing.T, r response) summary {
	t.Helper()
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("summary.json: %d %s %.300s", r.Status, r.Header.Get("Content-Type"), r.Raw)
	}
	var s summary
	if err := json.Unmarshal(r.Raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMigrationPage_SummaryOfTheSeededCohort(t *testing.T) {
	t.Parallel()
	s := startPage(t)
	got := decodeSummary(t, s.basicGet(t, "/migration/ACME/summary.json", pageUser, pagePass))
	want := map[string]int64{"staged": 3, "in_progress": 2, "completed": 4, "failed": 5, "total": 14, "refused": 0, "refused_not_ongoing": 0, "skip_marks": 2}
	if diff := cmp.Diff(want, got.Supplier.Counts); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if got.Supplier.Status != "Ongoing" || len(got.TopErrors) != 4 || got.TopErrors[0].Code != pt.CodePhone || got.TopErrors[0].Accounts != 3 {
		t.Errorf("supplier %+v, top errors %+v", got.Supplier, got.TopErrors)
	}
	if got.Queue == nil || got.Queue.Name != "accounts" || !got.Queue.Available {
		t.Errorf("operator's queue: %+v", got.Queue)
	}
	filtered := decodeSummary(t, s.basicGet(t, "/migration/ACME/summary.json?code="+pt.CodePostcode, pageUser, pagePass))
	if len(filtered.Failed.Accounts) != 1 || filtered.Failed.Accounts[0].ExternalAccountNumber != "ACME-F1" {
		t.Errorf("filtered by %s: %+v", pt.CodePostcode, filtered.Failed.Accounts)
	}

	html := s.basicGet(t, "/migration/ACME/", pageUser, pagePass)
	for _, want := range []string{`data-count="failed">5<`, `data-count="skip_marks">2<`, "ACME-F5", pt.AttrPhone,
		`href="/monitoring/queues/accounts"`, `?code=invalid_phone_number&amp;attr=customers.0.mobile#failed`} {
		if !strings.Contains(string(html.Raw), want) {
			t.Errorf("supplier page lacks %q", want)
		}
	}
	if csp := html.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	index := s.basicGet(t, "/migration/", pageUser, pagePass)
	for _, want := range []string{`href="/migration/ACME/"`, `href="/migration/OTHER/"`, "Paused"} {
		if !strings.Contains(string(index.Raw), want) {
			t.Errorf("index lacks %q", want)
		}
	}
	if r := s.basicGet(t, "/migration/ACME/summary.json?before=yesterday", pageUser, pagePass); r.Status != 400 || r.Body["code"] != "invalid" ||
		!strings.Contains(string(r.Raw), `"attr":"before"`) {
		t.Errorf("bad cursor: %d %s, want 400 invalid at before", r.Status, r.Raw)
	}
	if r := s.basicGet(t, "/migration/NOPE/summary.json", pageUser, pagePass); r.Status != 404 || r.Body["code"] != "import_supplier_not_found" {
		t.Errorf("unknown supplier: %d %s", r.Status, r.Raw)
	}
	if r := s.basicGet(t, "/migration/ACME", pageUser, pagePass); r.Status != 301 && r.Status != 200 {
		t.Errorf("without the slash: %d", r.Status)
	}
}

// A key limited to some suppliers, sent as the basic-auth password, sees
// those suppliers only: another supplier is not found, appears in no list,
// and the shared queue is not shown.
func TestMigrationPage_KeyScopedElsewhereNeverSeesTheSupplier(t *testing.T) {
	t.Parallel()
	s := startPage(t)
	otherKey := s.newKey(t, "page-other", pt.Other)
	for _, path := range []string{"/migration/ACME/", "/migration/ACME/summary.json", "/migration/ACME/summary.json?code=" + pt.CodePhone} {
		r := s.basicGet(t, path, "lead", otherKey)
		if r.Status != 404 || r.Body["code"] != "import_supplier_not_found" {
			t.Errorf("GET %s with OTHER's key: %d %.300s, want 404 import_supplier_not_found", path, r.Status, r.Raw)
		}
		if strings.Contains(string(r.Raw), "ACME-") {
			t.Errorf("GET %s with OTHER's key shows ACME's accounts: %s", path, r.Raw)
		}
	}
	index := s.basicGet(t, "/migration/", "lead", otherKey)
	if index.Status != 200 || strings.Contains(string(index.Raw), "ACME") || !strings.Contains(string(index.Raw), "/migration/OTHER/") {
		t.Errorf("index with OTHER's key: %d %s", index.Status, index.Raw)
	}
	got := decodeSummary(t, s.basicGet(t, "/migration/OTHER/summary.json", "lead", otherKey))
	if got.Queue != nil || got.Supplier.Counts["total"] != 2 {
		t.Errorf("OTHER with its key: queue %+v, counts %v", got.Queue, got.Supplier.Counts)
	}
	page := s.basicGet(t, "/migration/OTHER/", "lead", otherKey)
	if strings.Contains(string(page.Raw), "/monitoring/") {
		t.Errorf("a supplier's key is linked into Asynqmon")
	}

	acmeKey := s.newKey(t, "page-acme", pt.Supplier)
	for _, path := range []string{"/migration/ACME/", "/migration/ACME/summary.json", "/migration/", "/migration/ACME/summary.json?code=" + pt.CodeOther} {
		r := s.basicGet(t, path, "lead", acmeKey)
		if r.Status != 200 || strings.Contains(string(r.Raw), "OTHER") || strings.Contains(string(r.Raw), pt.CodeOther+`"`) && !strings.Contains(path, pt.CodeOther) {
			t.Errorf("GET %s with ACME's key: %d, shows OTHER's data: %.500s", path, r.Status, r.Raw)
		}
	}
	if r := s.basicGet(t, "/migration/OTHER/summary.json", "lead", acmeKey); r.Status != 404 {
		t.Errorf("OTHER with ACME's key: %d", r.Status)
	}
}

// The migration page had no cap per key: 785 requests a second of one key,
// each of which also compacted the counters, slowed another supplier's E10
// from 1.5 to 41 ms. Each viewer (an API key, or the MONITORING_USER login)
// now has MIGRATION_PAGE_PER_MINUTE requests a minute, counted in Redis,
// then 429 too_many_requests with Retry-After; other viewers are not
// slowed. (With 5 a minute the count refills one request every 12 s, far
// longer than the test's requests take.)
func TestMigrationPage_RequestsPerViewerAreCapped(t *testing.T) {
	t.Parallel()
	const perMinute = 5
	s := startService(t, "api", map[string]string{"MONITORING_USER": pageUser, "MONITORING_PASSWORD": pagePass,
		"MIGRATION_PAGE_PER_MINUTE": strconv.Itoa(perMinute)})
	if _, err := admin.CreateSupplier(context.Background(), s.db, admin.Supplier{Code: "DEMO", Status: status.Ongoing}); err != nil {
		t.Fatal(err)
	}
	busy, calm := s.newKey(t, "busy", "DEMO"), s.newKey(t, "calm", "DEMO")
	get := func(user, pass string) response {
		req, _ := http.NewRequest("GET", s.base+"/migration/DEMO/summary.json", nil)
		req.SetBasicAuth(user, pass)
		return doReq(t, req)
	}
	var got []int
	var last response
	for range perMinute + 3 {
		last = get("lead", busy)
		got = append(got, last.Status)
	}
	want := []int{200, 200, 200, 200, 200, 429, 429, 429}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("one key's requests (-want +got):\n%s", d)
	}
	if code, _ := last.Body["code"].(string); code != "too_many_requests" || last.Header.Get("Retry-After") == "" {
		t.Errorf("429 %s with Retry-After %q", last.Raw, last.Header.Get("Retry-After"))
	}
	for name, login := range map[string][2]string{"another key": {"lead", calm}, "the operator": {pageUser, pagePass}} {
		if r := get(login[0], login[1]); r.Status != 200 {
			t.Errorf("%s: %d %.200s", name, r.Status, r.Raw)
		}
	}
}

// refusalSummary is the part of summary.json about refused accounts.
type refusalSummary struct {
	Supplier struct {
		Counts map[string]int64 `json:"counts"`
	} `json:"supplier"`
	TopErrors []struct {
		Code     string `json:"code"`
		Attr     string `json:"attr"`
		Accounts int64  `json:"accounts"`
	} `json:"top_errors"`
	Failed struct {
		Accounts []struct {
			ExternalAccountNumber string `json:"external_account_number"`
			Step                  string `json:"step"`
			Code                  string `json:"code"`
			Attr                  string `json:"attr"`
			TaskID                string `json:"task_id"`
		} `json:"accounts"`
	} `json:"failed"`
}

// Accounts refused at E3 and E4, through the API: the page and
// summary.json count each once (its latest refusal, with its step), list
// it among the failed accounts and the top errors, show another supplier's
// refusals only on that supplier's page, and forget it once it stages.
func TestMigrationPage_AccountsRefusedAtStagingShowUntilTheyStage(t *testing.T) {
	t.Parallel()
	e := &importsEnv{s: startService(t, "api", map[string]string{"MONITORING_USER": pageUser, "MONITORING_PASSWORD": pagePass})}
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

	withPhone := func(supplier, ean, phone string) map[string]any {
		m := fixture(t, ean)
		m["import_supplier"] = supplier
		m["customers"].([]any)[0].(map[string]any)["mobile"] = phone
		return m
	}
	post := func(path, tok string, body any, want int) {
		t.Helper()
		if r := e.s.do(t, "POST", path, tok, body); r.Status != want {
			t.Fatalf("POST %s: %d %.300s, want %d", path, r.Status, r.Raw, want)
		}
	}
	summaryOf := func(supplier string) refusalSummary {
		t.Helper()
		r := e.s.basicGet(t, "/migration/"+supplier+"/summary.json", pageUser, pagePass)
		var s refusalSummary
		if r.Status != 200 || json.Unmarshal(r.Raw, &s) != nil {
			t.Fatalf("summary.json of %s: %d %.300s", supplier, r.Status, r.Raw)
		}
		return s
	}
	type row struct{ EAN, Step, Code, Attr, TaskID string }
	check := func(when, supplier string, refused int64, rows []row) {
		t.Helper()
		s := summaryOf(supplier)
		if s.Supplier.Counts["refused"] != refused || s.Supplier.Counts["total"] != 0 {
			t.Errorf("%s: %s counts %v, want refused %d beside a total of 0", when, supplier, s.Supplier.Counts, refused)
		}
		var got []row
		for _, a := range s.Failed.Accounts {
			got = append(got, row{a.ExternalAccountNumber, a.Step, a.Code, a.Attr, a.TaskID})
		}
		if diff := cmp.Diff(rows, got); diff != "" {
			t.Errorf("%s: %s's failed accounts (-want +got):\n%s", when, supplier, diff)
		}
		var top []row
		for _, e := range s.TopErrors {
			top = append(top, row{Code: e.Code, Attr: e.Attr, EAN: strconv.FormatInt(e.Accounts, 10)})
		}
		var wantTop []row
		for _, r := range rows {
			wantTop = append(wantTop, row{Code: r.Code, Attr: r.Attr, EAN: "1"})
		}
		if diff := cmp.Diff(wantTop, top); diff != "" {
			t.Errorf("%s: %s's top errors (-want +got):\n%s", when, supplier, diff)
		}
	}

	post(pathValidateAccount, e.tok, withPhone("DEMO", "R-1", "12"), 400)
	check("refused at E3", "DEMO", 1, []row{{"R-1", "validate", "invalid_phone_number", "customers.0.mobile", ""}})

	badPostcode := fixture(t, "R-1")
	badPostcode["supply_addresses"].([]any)[0].(map[string]any)["supply_postcode"] = "NOT A POSTCODE"
	post(pathStageAccount, e.tok, badPostcode, 400)
	latest := []row{{"R-1", "stage", "invalid_postcode", "supply_addresses.0.supply_postcode", ""}}
	check("refused again at E4", "DEMO", 1, latest)

	// Neither a body without an account number, nor a key limited to
	// OTHER naming DEMO, nor OTHER's own refusal shows on DEMO's page.
	post(pathStageAccount, e.tok, `{"import_supplier": "DEMO", "external_account_number": `, 400)
	post(pathStageAccount, e.otherTok, withPhone("DEMO", "R-2", "12"), 400)
	post(pathStageAccount, e.otherTok, withPhone("OTHER", "R-3", "12"), 400)
	check("others refused", "DEMO", 1, latest)
	check("others refused", "OTHER", 1, []row{{"R-3", "stage", "invalid_phone_number", "customers.0.mobile", ""}})

	html := e.s.basicGet(t, "/migration/DEMO/", pageUser, pagePass)
	for _, want := range []string{`data-count="refused">1<`, `<td>R-1</td><td>stage</td><td>invalid_postcode</td>`, "Refused at staging"} {
		if !strings.Contains(string(html.Raw), want) {
			t.Errorf("supplier page lacks %q", want)
		}
	}
	index := e.s.basicGet(t, "/migration/", pageUser, pagePass)
	if !strings.Contains(string(index.Raw), "Refused at staging") {
		t.Errorf("index lacks the refused column")
	}

	post(pathStageAccount, e.tok, fixture(t, "R-1"), 201)
	s := summaryOf("DEMO")
	if s.Supplier.Counts["refused"] != 0 || s.Supplier.Counts["staged"] != 1 || len(s.Failed.Accounts) != 0 || len(s.TopErrors) != 0 {
		t.Errorf("after staging R-1: counts %v, failed %+v, top errors %+v; want it staged and nothing refused",
			s.Supplier.Counts, s.Failed.Accounts, s.TopErrors)
	}
}

// The top errors' links and the next page's link carried the code and attr
// escaped twice (url.QueryEscape, then html/template's own escaping of a
// URL attribute): an attr with '<' came out as %253C, and following the
// link filtered by the escaped text, which matches nothing. Each link now
// decodes back to the attr exactly once, and following it finds the
// account.
func TestMigrationPage_LinksCarryTheAttrEscapedOnce(t *testing.T) {
	t.Parallel()
	e := &importsEnv{s: startService(t, "api", map[string]string{"MONITORING_USER": pageUser, "MONITORING_PASSWORD": pagePass})}
	for product, tariffs := range fixtureTariffCodes {
		if _, err := admin.CreateProduct(context.Background(), e.s.db, product, tariffs); err != nil {
			t.Fatal(err)
		}
	}
	e.addSupplier(t, "DEMO", status.Ongoing)
	tok := e.s.accessToken(t, e.s.newKey(t, "links"))
	// An unknown field is refused at its own name: an attr made of what
	// a URL escapes, and of an escape itself, which a second decoding
	// would turn into '/'.
	const attr = `a<b&c=d#e f+g%2Fh"é`
	body := fixture(t, "L-1")
	body[attr] = 1
	if r := e.s.do(t, "POST", pathValidateAccount, tok, body); r.Status != 400 {
		t.Fatalf("E3 with the unknown field: %d %.300s", r.Status, r.Raw)
	}

	link := regexp.MustCompile(`<a (?:id="[^"]*" )?href="([^"]*)"[^>]*>([^<]*)</a>`)
	// linkQuery is the query of the page's link whose text is text, as a
	// browser reads it: the attribute's HTML unescaped, then the URL
	// parsed once.
	linkQuery := func(page []byte, text string) url.Values {
		t.Helper()
		for _, m := range link.FindAllStringSubmatch(string(page), -1) {
			if m[2] != text {
				continue
			}
			u, err := url.Parse(html.UnescapeString(m[1]))
			if err != nil {
				t.Fatalf("link %q: %v", m[1], err)
			}
			return u.Query()
		}
		t.Fatalf("no link %q in the page", text)
		return nil
	}
	top := e.s.basicGet(t, "/migration/DEMO/", pageUser, pagePass)
	q := linkQuery(top.Raw, "unknown_field")
	if diff := cmp.Diff(map[string]string{"code": "unknown_field", "attr": attr}, map[string]string{"code": q.Get("code"), "attr": q.Get("attr")}); diff != "" {
		t.Errorf("top error's link, decoded once (-want +got):\n%s", diff)
	}
	filtered := decodeSummary(t, e.s.basicGet(t, "/migration/DEMO/summary.json?"+q.Encode(), pageUser, pagePass))
	if len(filtered.Failed.Accounts) != 1 || filtered.Failed.Accounts[0].ExternalAccountNumber != "L-1" {
		t.Errorf("following the top error's link: %+v, want L-1", filtered.Failed.Accounts)
	}

	page := e.s.basicGet(t, "/migration/DEMO/?"+q.Encode(), pageUser, pagePass)
	next := linkQuery(page.Raw, "Next page")
	if diff := cmp.Diff(map[string]string{"code": "unknown_field", "attr": attr}, map[string]string{"code": next.Get("code"), "attr": next.Get("attr")}); diff != "" {
		t.Errorf("next page's link, decoded once (-want +got):\n%s", diff)
	}
}

// The commands docs/monitoring.md gives for fetching the page and
// summary.json from a script (its ```sh fetch-summary block) work against a
// running importd: with the MONITORING_USER login and with an API key as
// the password, the password never on a command line.
func TestMonitoringDoc_FetchSummaryCommandsWork(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	raw, err := os.ReadFile("../../docs/monitoring.md")
	if err != nil {
		t.Fatal(err)
	}
	const open = "```sh fetch-summary\n"
	_, block, ok := strings.Cut(string(raw), open)
	block, _, closed := strings.Cut(block, "\n```")
	if !ok || !closed {
		t.Fatalf("docs/monitoring.md has no closed %q block", strings.TrimSpace(open))
	}
	s := startPage(t)
	pt.SeedRefusals(t, s.db)
	dir := t.TempDir()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "IMPORTD_URL="+s.base, "SUPPLIER="+pt.Supplier,
		"MONITORING_USER="+pageUser, "MONITORING_PASSWORD="+pagePass, "IMPORTD_API_KEY="+s.newKey(t, "script", pt.Supplier))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the fetch-summary block: %v\n%s", err, stderr.String())
	}
	want := `{"staged":3,"in_progress":2,"completed":4,"failed":5,"total":14,"refused":1,"refused_not_ongoing":1,"skip_marks":2}` + "\n1\n"
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("the block's output (-want +got):\n%s", diff)
	}
	page, err := os.ReadFile(filepath.Join(dir, "page.html"))
	if err != nil || !strings.Contains(string(page), `data-count="refused"`) {
		t.Errorf("page.html (%v): %.300s", err, page)
	}
}
