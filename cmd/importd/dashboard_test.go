package main

import (
	"net/http"
	"strings"
	"testing"
)

// `importd dashboard` serves the dashboard and its probes, and answers
// every error with the section 7 body, like the API.
func TestDashboardMode_ServesDashboardAndProbesWithSection7Errors(t *testing.T) {
	t.Parallel()
	s := startService(t, "dashboard", map[string]string{"MONITORING_USER": "ops", "MONITORING_PASSWORD": testPassword})
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := s.do(t, "GET", path, "", nil); r.Status != 200 {
			t.Errorf("GET %s: %d %s", path, r.Status, r.Raw)
		}
	}
	req, _ := http.NewRequest("GET", s.base+"/monitoring/api/queues", nil)
	r := doReq(t, req)
	if r.Status != 401 || r.Body["code"] != "not_authenticated" || r.Body["errors"] == nil ||
		!strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Basic ") {
		t.Errorf("dashboard without credentials: %d %s (WWW-Authenticate %q)", r.Status, r.Raw, r.Header.Get("WWW-Authenticate"))
	}
	req.SetBasicAuth("ops", testPassword)
	if r := doReq(t, req); r.Status != 200 {
		t.Errorf("dashboard queue API: %d %s", r.Status, r.Raw)
	}
	if r := s.do(t, "GET", "/no-such-path", "", nil); r.Status != 404 || r.Body["code"] != "not_found" || r.Body["errors"] == nil {
		t.Errorf("unknown path: %d %s", r.Status, r.Raw)
	}
}
