package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/metrics"
	pt "github.com/bulkimport/bulkimport/jobs/progress/progresstest"
)

// scrape is one answer of /metrics, parsed.
type scrape struct {
	raw      string
	families map[string]*dto.MetricFamily
}

// scrapeMetrics GETs url without a token and parses the text format.
func scrapeMetrics(t testing.TB, url string) scrape {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	r := doReq(t, req)
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s: %d %s %s", url, r.Status, r.Header.Get("Content-Type"), r.Raw)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(r.Raw))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, r.Raw)
	}
	return scrape{raw: string(r.Raw), families: fams}
}

// metric returns the series of family name whose labels include labels.
func (s scrape) metric(name string, labels map[string]string) (*dto.Metric, bool) {
	f := s.families[name]
	if f == nil {
		return nil, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

// value is a counter's or gauge's value, or -1 when the series is absent.
func (s scrape) value(name string, labels map[string]string) float64 {
	m, ok := s.metric(name, labels)
	switch {
	case !ok:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return -1
}

// histogramCount is a histogram's sample count, or -1 when it is absent.
func (s scrape) histogramCount(name string, labels map[string]string) int {
	m, ok := s.metric(name, labels)
	if !ok || m.Histogram == nil || len(m.Histogram.GetBucket()) == 0 {
		return -1
	}
	return int(m.Histogram.GetSampleCount())
}

func TestMetrics_SeriesAfterRealRequests(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))

	if r := s.do(t, "GET", "/v1/data-import/whoami/", "", nil); r.Status != 401 {
		t.Fatalf("whoami without a token: %d", r.Status)
	}
	if r := s.do(t, "POST", stagePath, tok, fixture(t, "ACC-METRICS")); r.Status != 201 {
		t.Fatalf("E4: %d %s", r.Status, r.Raw)
	}
	if r := s.do(t, "POST", processPath, tok, processBody("ACC-METRICS", false)); r.Status != 201 {
		t.Fatalf("E5: %d %s", r.Status, r.Raw)
	}
	bad := fixture(t, "ACC-BAD-PHONE")
	bad["customers"].([]any)[0].(map[string]any)["landline"] = "12"
	if r := s.do(t, "POST", "/v1/data-import/validate-account/", tok, bad); r.Status != 400 ||
		!strings.Contains(string(r.Raw), `"code":"invalid_phone_number"`) {
		t.Fatalf("E3 with a bad landline: %d %s", r.Status, r.Raw)
	}
	if r := s.do(t, "GET", "/v1/data-import/account-transfer-status/DEMO/ACC-METRICS/", tok, nil); r.Status != 200 {
		t.Fatalf("E10: %d %s", r.Status, r.Raw)
	}
	if r := s.do(t, "GET", "/no/such/path/ACC-METRICS", "", nil); r.Status != 404 {
		t.Fatalf("unknown path: %d", r.Status)
	}

	// The worker counts its task just after it announces the outcome that
	// E5 answers from, so the job series may lag the 201 by a moment.
	var m scrape
	deadline := time.Now().Add(30 * time.Second)
	for {
		m = scrapeMetrics(t, s.base+"/metrics")
		if m.value("importd_jobs_total", map[string]string{"type": "account:process", "outcome": "success"}) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	requests := []struct {
		method, route, status string
	}{
		{"GET", "/v1/data-import/whoami/", "401"},
		{"POST", stagePath, "201"},
		{"POST", processPath, "201"},
		{"POST", "/v1/data-import/validate-account/", "400"},
		{"GET", "/v1/data-import/account-transfer-status/:supplier/:ean/", "200"},
		{"GET", "unmatched", "404"},
	}
	for _, rq := range requests {
		labels := map[string]string{"method": rq.method, "route": rq.route, "status": rq.status}
		if got := m.value("importd_http_requests_total", labels); got != 1 {
			t.Errorf("importd_http_requests_total%v = %v, want 1", labels, got)
		}
	}
	if got := m.histogramCount("importd_http_request_duration_seconds", map[string]string{"method": "POST", "route": processPath}); got != 1 {
		t.Errorf("E5 latency histogram count %d, want 1", got)
	}
	jobLabels := map[string]string{"type": "account:process", "outcome": "success"}
	if got := m.value("importd_jobs_total", jobLabels); got != 1 {
		t.Errorf("importd_jobs_total%v = %v, want 1", jobLabels, got)
	}
	if got := m.histogramCount("importd_job_duration_seconds", jobLabels); got != 1 {
		t.Errorf("job duration histogram count %d, want 1", got)
	}
	if got := m.value("importd_accounts_created_total", nil); got != 1 {
		t.Errorf("importd_accounts_created_total = %v, want 1", got)
	}
	if got := m.value("importd_validation_errors_total", map[string]string{"code": "invalid_phone_number"}); got != 1 {
		t.Errorf("importd_validation_errors_total{code=invalid_phone_number} = %v, want 1", got)
	}
	for _, q := range []string{"accounts", "vendors", "emails"} {
		for _, state := range []string{"pending", "active", "scheduled", "retry", "archived"} {
			if got := m.value("importd_queue_tasks", map[string]string{"queue": q, "state": state}); got != 0 {
				t.Errorf("importd_queue_tasks{queue=%s,state=%s} = %v, want 0", q, state, got)
			}
		}
	}
	// Routes are patterns: no account number reaches a label.
	if strings.Contains(m.raw, "ACC-METRICS") {
		t.Error("an account number appears in /metrics")
	}
}

// With METRICS_ADDR, /metrics is served there and only there; the worker
// serves it on HTTP_ADDR otherwise.
func TestMetrics_Addresses(t *testing.T) {
	t.Parallel()
	t.Run("METRICS_ADDR serves it apart", func(t *testing.T) {
		t.Parallel()
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		s := startService(t, "api", map[string]string{"METRICS_ADDR": addr})
		if r := s.do(t, "GET", "/metrics", "", nil); r.Status != 404 || r.Body["code"] != "not_found" {
			t.Errorf("/metrics on HTTP_ADDR: %d %s, want the section 7 404", r.Status, r.Raw)
		}
		m := scrapeMetrics(t, "http://"+addr+"/metrics")
		if got := m.value("importd_http_requests_total", map[string]string{"method": "GET", "route": "unmatched", "status": "404"}); got != 1 {
			t.Errorf("the 404 on HTTP_ADDR counted %v times, want 1", got)
		}
		if got := m.value("importd_queue_tasks", map[string]string{"queue": "accounts", "state": "pending"}); got != 0 {
			t.Errorf("queue size on METRICS_ADDR: %v", got)
		}
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/data-import/whoami/", nil)
		if r := doReq(t, req); r.Status != 404 {
			t.Errorf("METRICS_ADDR serves more than /metrics: %d", r.Status)
		}
	})
	t.Run("METRICS_PROFILES serves the runtime profiles there alone", func(t *testing.T) {
		t.Parallel()
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		s := startService(t, "serve", map[string]string{"METRICS_ADDR": addr, "METRICS_PROFILES": "true"})
		req, _ := http.NewRequest("GET", "http://"+addr+"/debug/pprof/heap?debug=1", nil)
		if r := doReq(t, req); r.Status != 200 || !strings.Contains(string(r.Raw), "heap profile") {
			t.Errorf("heap profile on METRICS_ADDR: %d %.200s", r.Status, r.Raw)
		}
		if r := s.do(t, "GET", "/debug/pprof/heap", "", nil); r.Status != 404 {
			t.Errorf("/debug/pprof/ on HTTP_ADDR: %d, want 404", r.Status)
		}
	})
	t.Run("without METRICS_PROFILES there are no profiles", func(t *testing.T) {
		t.Parallel()
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		startService(t, "api", map[string]string{"METRICS_ADDR": addr})
		req, _ := http.NewRequest("GET", "http://"+addr+"/debug/pprof/heap?debug=1", nil)
		if r := doReq(t, req); r.Status != 404 {
			t.Errorf("heap profile without METRICS_PROFILES: %d", r.Status)
		}
	})
	t.Run("the worker serves it on HTTP_ADDR", func(t *testing.T) {
		t.Parallel()
		s := startService(t, "worker", nil)
		m := scrapeMetrics(t, s.base+"/metrics")
		if got := m.value("importd_queue_tasks", map[string]string{"queue": "emails", "state": "retry"}); got != 0 {
			t.Errorf("queue size from the worker: %v", got)
		}
		if _, ok := m.families["importd_accounts_created_total"]; !ok {
			t.Error("the worker does not expose importd_accounts_created_total")
		}
		if r := s.do(t, "GET", "/healthz", "", nil); r.Status != 200 {
			t.Errorf("worker /healthz: %d", r.Status)
		}
	})
}

// /metrics on HTTP_ADDR, the port clients reach, answered anyone, also
// under `make run`, which sets MONITORING_USER. With MONITORING_USER set it
// now asks for that login (wrong ones count as failed attempts); on
// METRICS_ADDR, a port of its own, it asks for none.
func TestMetrics_OnTheAPIPortNeedTheMonitoringLogin(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", map[string]string{"MONITORING_USER": "ops", "MONITORING_PASSWORD": testPassword})
	get := func(user, pass string) response {
		req, _ := http.NewRequest("GET", s.base+"/metrics", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		return doReq(t, req)
	}
	for _, tc := range []struct {
		name, user, pass string
		status           int
		code             string
	}{
		{"no login", "", "", 401, "not_authenticated"},
		{"wrong login", "ops", "guess", 401, "authentication_failed"},
		{"the login", "ops", testPassword, 200, ""},
	} {
		r := get(tc.user, tc.pass)
		code, _ := r.Body["code"].(string)
		if r.Status != tc.status || code != tc.code {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.Status, code, tc.status, tc.code)
		}
		if tc.status == 401 && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("%s: no basic-auth challenge", tc.name)
		}
	}
	if r := get("ops", testPassword); !strings.Contains(string(r.Raw), "importd_http_requests_total") {
		t.Errorf("the series are missing: %.200s", r.Raw)
	}
}

// A fresh process, API or worker, serves every labelled series whose label
// values it knows at 0 before its first event: takeovers and task runs of
// each task type, and creation transactions of each outcome. Without them
// rate() and increase() are empty and the dashboard's panels say "No
// data" until the first takeover.
func TestMetrics_KnownSeriesStartAtZero(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"api", "worker"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := startService(t, mode, nil)
			m := scrapeMetrics(t, s.base+"/metrics")
			for _, typ := range jobs.TaskTypes {
				if got := m.value("importd_takeovers_total", map[string]string{"type": typ}); got != 0 {
					t.Errorf("importd_takeovers_total{type=%q} = %v, want 0 (-1: absent)", typ, got)
				}
				for _, outcome := range []string{metrics.JobSuccess, metrics.JobFailure, metrics.JobSkipped, metrics.JobHandedBack} {
					labels := map[string]string{"type": typ, "outcome": outcome}
					if got := m.value("importd_jobs_total", labels); got != 0 {
						t.Errorf("importd_jobs_total%v = %v, want 0 (-1: absent)", labels, got)
					}
					if got := m.histogramCount("importd_job_duration_seconds", labels); got != 0 {
						t.Errorf("importd_job_duration_seconds%v count = %v, want 0 (-1: absent)", labels, got)
					}
				}
			}
			for _, outcome := range []string{metrics.TxCommitted, metrics.TxSplit, metrics.TxRolledBack} {
				if got := m.histogramCount("importd_account_transaction_accounts", map[string]string{"outcome": outcome}); got != 0 {
					t.Errorf("importd_account_transaction_accounts{outcome=%q} count = %v, want 0 (-1: absent)", outcome, got)
				}
			}
		})
	}
}

// importd_supplier_accounts counts the accounts refused at staging beside
// the import processes, as the page does: refused for the accounts' own
// refusals, refused_not_ongoing for those refused while the supplier was
// not Ongoing.
func TestMetrics_SupplierAccountsCountTheRefusals(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	pt.Seed(t, s.db)
	pt.SeedRefusals(t, s.db)
	m := scrapeMetrics(t, s.base+"/metrics")
	got := map[string]float64{}
	for _, state := range []string{"staged", "in_progress", "completed", "failed", "refused", "refused_not_ongoing"} {
		got[state] = m.value("importd_supplier_accounts", map[string]string{"supplier": pt.Supplier, "state": state})
	}
	want := map[string]float64{"staged": 3, "in_progress": 2, "completed": 4, "failed": 5, "refused": 1, "refused_not_ongoing": 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("importd_supplier_accounts of %s (-want +got):\n%s", pt.Supplier, diff)
	}
}
