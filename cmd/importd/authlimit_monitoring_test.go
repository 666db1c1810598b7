package main

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/auth"
)

// basicFrom requests path with the basic-auth login user:pass from the
// client address addr (an X-Forwarded-For; "" for none).
func (s *service) basicFrom(t testing.TB, path, addr, user, pass string) (attempt, response) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+path, nil)
	req.SetBasicAuth(user, pass)
	if addr != "" {
		req.Header.Set("X-Forwarded-For", addr)
	}
	r := doReq(t, req)
	code, _ := r.Body["code"].(string)
	return attempt{Status: r.Status, Code: code}, r
}

// The MONITORING_USER login is limited too, or it would be the one place to
// guess passwords without end: wrong passwords for the dashboard (in importd api and importd dashboard) and for the migration
// page now count against the client's address like wrong API keys, and are
// answered authentication_failed as a wrong token is. Past the limit every
// login from that address gets 429 with Retry-After, the right one
// included, while the right login from another address still works.
func TestAuthLimit_WrongMonitoringPasswordsAreThrottled(t *testing.T) {
	t.Parallel()
	const limit = 4
	const user, password = "ops", testPassword
	tests := []struct {
		name, mode, path string
		wrong            attempt
		// sharedWithKeys: the API runs in this mode, and its API keys
		// count against the same address.
		sharedWithKeys bool
	}{
		{"dashboard in the API", "api", "/monitoring/api/queues", attempt{401, auth.CodeAuthenticationFailed}, true},
		{"migration page", "api", "/migration/", attempt{401, auth.CodeAuthenticationFailed}, true},
		{"importd dashboard", "dashboard", "/monitoring/api/queues", attempt{401, auth.CodeAuthenticationFailed}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startService(t, tc.mode, map[string]string{"MONITORING_USER": user, "MONITORING_PASSWORD": password,
				"AUTH_FAILURE_LIMIT": strconv.Itoa(limit), "AUTH_FAILURE_WINDOW": "10m", "TRUSTED_PROXIES": "127.0.0.1"})
			const attacker, other = "203.0.113.30", "198.51.100.30"

			var got []attempt
			var last response
			for i := range limit + 2 {
				a, r := s.basicFrom(t, tc.path, attacker, user, fmt.Sprintf("guess-%d", i))
				got = append(got, a)
				last = r
			}
			want := []attempt{tc.wrong, tc.wrong, tc.wrong, tc.wrong, throttled, throttled}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("wrong passwords (-want +got):\n%s", diff)
			}
			checkThrottled(t, last, 10*time.Minute)

			if a, _ := s.basicFrom(t, tc.path, attacker, user, password); a != throttled {
				t.Errorf("right login from the throttled address: %+v, want %+v", a, throttled)
			}
			if a, r := s.basicFrom(t, tc.path, other, user, password); a.Status != 200 {
				t.Errorf("right login from another address: %+v %s", a, r.Raw)
			}
			if tc.sharedWithKeys {
				good := s.newKey(t, "good")
				if a, _ := s.tokenFrom(t, attacker, keyInput(good)); a != tokenThrottled {
					t.Errorf("API key from the throttled address: %+v, want %+v", a, tokenThrottled)
				}
			}
		})
	}
}

// `importd dashboard` counts the connection's address unless the connection
// comes from TRUSTED_PROXIES, as the API does: a client cannot pick a new
// X-Forwarded-For for every guess.
func TestAuthLimit_DashboardIgnoresForwardedForWithoutTrustedProxies(t *testing.T) {
	t.Parallel()
	const limit = 3
	s := startService(t, "dashboard", map[string]string{"MONITORING_USER": "ops", "MONITORING_PASSWORD": testPassword,
		"AUTH_FAILURE_LIMIT": strconv.Itoa(limit)})
	var got []attempt
	for i := range limit + 1 {
		a, _ := s.basicFrom(t, "/monitoring/api/queues", fmt.Sprintf("198.51.100.%d", i+1), "ops", fmt.Sprintf("guess-%d", i))
		got = append(got, a)
	}
	wrong := attempt{401, auth.CodeAuthenticationFailed}
	if diff := cmp.Diff([]attempt{wrong, wrong, wrong, throttled}, got); diff != "" {
		t.Errorf("wrong passwords with a new X-Forwarded-For each (-want +got):\n%s", diff)
	}
}
