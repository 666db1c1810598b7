package main

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Wrong API keys sent to the token endpoint are answered with status 200,
// as GraphQL answers every refusal, so a guesser there was invisible to
// monitoring: ImportdFailedAuthSpike counted 401 answers only, and the
// migration page's wrong logins were 401s of its own routes. Every failed
// authentication is now counted in importd_auth_failures_total by channel,
// each channel from zero, and the alert reads that.
func TestMetrics_FailedAuthenticationsAreCountedByChannel(t *testing.T) {
	t.Parallel()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// A limit above the attempts below, so that every one is checked.
	s := startService(t, "api", map[string]string{"METRICS_ADDR": addr, "AUTH_FAILURE_LIMIT": "100",
		"MONITORING_USER": pageUser, "MONITORING_PASSWORD": pagePass})
	key := s.newKey(t, "auth-metrics")
	read := func() map[string]float64 {
		m := scrapeMetrics(t, "http://"+addr+"/metrics")
		out := map[string]float64{}
		for _, ch := range []string{"api", "token", "migration_page", "monitoring"} {
			for _, reason := range []string{"wrong", "throttled"} {
				out[ch+"/"+reason] = m.value("importd_auth_failures_total", map[string]string{"channel": ch, "reason": reason})
			}
		}
		return out
	}
	zero := map[string]float64{"api/wrong": 0, "api/throttled": 0, "token/wrong": 0, "token/throttled": 0,
		"migration_page/wrong": 0, "migration_page/throttled": 0, "monitoring/wrong": 0, "monitoring/throttled": 0}
	if diff := cmp.Diff(zero, read()); diff != "" {
		t.Errorf("at start (-want +got):\n%s", diff)
	}

	tok := s.accessToken(t, key)
	for range 3 {
		if _, errs := s.token(t, `{"APIKey": "bik_0123456789abcdefghijklmnopqrstuvwxyzABCDEF"}`); errorCode(t, errs) != "invalid_api_key" {
			t.Fatalf("wrong key at the token endpoint: %v", errs)
		}
	}
	if _, errs := s.token(t, `{"refreshToken": "abc.def.ghi"}`); errorCode(t, errs) != "invalid_refresh_token" {
		t.Fatalf("wrong refresh token: %v", errs)
	}
	basic := func(path, user, pass string) int {
		req, _ := http.NewRequest("GET", s.base+path, nil)
		req.SetBasicAuth(user, pass)
		return doReq(t, req).Status
	}
	for _, a := range []struct {
		what string
		got  int
		want int
	}{
		{"whoami with a wrong token", s.do(t, "GET", "/v1/data-import/whoami/", "abc.def.ghi", nil).Status, 401},
		{"whoami with a wrong key", s.do(t, "GET", "/v1/data-import/whoami/", "bik_0123456789abcdefghijklmnopqrstuvwxyzABCDEF", nil).Status, 401},
		{"whoami without a credential", s.do(t, "GET", "/v1/data-import/whoami/", "", nil).Status, 401},
		{"whoami with the token", s.do(t, "GET", "/v1/data-import/whoami/", tok, nil).Status, 200},
		{"migration page with a wrong login", basic("/migration/", pageUser, "nope"), 401},
		{"migration page with a wrong key", basic("/migration/", "x", "bik_0123456789abcdefghijklmnop"), 401},
		{"migration page with the key", basic("/migration/", "x", key), 200},
		{"dashboard with a wrong login", basic("/monitoring/", pageUser, "nope"), 401},
		{"dashboard with the login", basic("/monitoring/", pageUser, pagePass), 200},
	} {
		if a.got != a.want {
			t.Errorf("%s: %d, want %d", a.what, a.got, a.want)
		}
	}

	want := map[string]float64{"api/wrong": 2, "api/throttled": 0, "token/wrong": 4, "token/throttled": 0,
		"migration_page/wrong": 2, "migration_page/throttled": 0, "monitoring/wrong": 1, "monitoring/throttled": 0}
	if diff := cmp.Diff(want, read()); diff != "" {
		t.Errorf("failed authentications by channel (-want +got):\n%s", diff)
	}
}
