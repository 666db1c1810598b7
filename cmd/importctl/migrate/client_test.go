package migrate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// tokenHandler answers the token mutation with a token that lives an hour.
func tokenHandler(w http.ResponseWriter) {
	now := time.Now().Unix()
	fmt.Fprintf(w, `{"data":{"obtainServiceToken":{"token":"t","refreshToken":"r","refreshExpiresIn":%d,"payload":{"iat":%d,"exp":%d}}}}`,
		now+3600, now, now+3600)
}

// The client's retry rules against answers a service gives: 429s are
// waited out however many come; 500s are retried up to the limit, then
// answered; 400s are answered at once; a service that is not there is an
// *errConnection after the limit.
func TestClientDo_RetriesWhatTheServiceAsksToBeRetried(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/graphql/" {
			tokenHandler(w)
			return
		}
		mu.Lock()
		calls[r.URL.Path]++
		n := calls[r.URL.Path]
		mu.Unlock()
		switch {
		case r.URL.Path == "/busy" && n <= 12:
			w.WriteHeader(http.StatusTooManyRequests)
		case r.URL.Path == "/flaky" && n <= 2:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusInternalServerError)
		case r.URL.Path == "/broken":
			w.WriteHeader(http.StatusInternalServerError)
		case r.URL.Path == "/invalid":
			w.WriteHeader(http.StatusBadRequest)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	defer srv.Close()
	cfg := Config{BaseURL: srv.URL, APIKey: "k", Team: "x", Cohort: "-", ReportDir: "-", Retries: 3,
		InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	c := newClient(cfg)
	type got struct {
		Status, Retries, Waits int
	}
	for _, tc := range []struct {
		path string
		want got
	}{
		{"/busy", got{201, 12, 12}},
		{"/flaky", got{201, 2, 0}},
		{"/broken", got{500, 3, 0}},
		{"/invalid", got{400, 0, 0}},
	} {
		var n counts
		a, err := c.do(context.Background(), http.MethodPost, tc.path, []byte(`{}`), &n)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if d := cmp.Diff(tc.want, got{a.Status, n.retries, n.waits429}); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.path, d)
		}
	}
	srv.Close()
	c.mu.Lock()
	c.renewAt = time.Time{} // the token must be renewed, from a service that is gone
	c.mu.Unlock()
	var n counts
	_, err := c.do(context.Background(), http.MethodPost, "/gone", []byte(`{}`), &n)
	var conn *errConnection
	if !errors.As(err, &conn) {
		t.Errorf("service gone: %v, want an errConnection", err)
	}
}

// Behind a 307 to another host the client re-sent its token request, the
// API key in its body, to that host. It now follows no redirect at all, to
// another host or its own: the run stops with a usage error that names
// the redirect, and the other host hears nothing.
func TestClient_FollowsNoRedirect(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var heard []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		heard = append(heard, r.Method+" "+r.URL.Path)
		mu.Unlock()
		tokenHandler(w)
	}))
	defer elsewhere.Close()
	for _, tc := range []struct{ name, to string }{
		{"to another host", elsewhere.URL + "/v1/graphql/"},
		{"to its own host", "/v1/graphql/other/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/graphql/other/" {
					tokenHandler(w)
					return
				}
				http.Redirect(w, r, tc.to, http.StatusTemporaryRedirect)
			}))
			defer srv.Close()
			cfg := Config{BaseURL: srv.URL, APIKey: "bik_secret", Team: "x", Cohort: "-", ReportDir: "-", Retries: 3,
				InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
			if err := cfg.check(); err != nil {
				t.Fatal(err)
			}
			_, err := newClient(cfg).accessToken(context.Background(), false)
			var usage *errUsage
			if !errors.As(err, &usage) || !strings.Contains(err.Error(), "307") || !strings.Contains(err.Error(), tc.to) {
				t.Errorf("token request behind a redirect: %v, want a usage error naming the 307 and %s", err, tc.to)
			}
			if cfg.HTTPClient.CheckRedirect != nil {
				t.Error("the caller's HTTP client was changed")
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 0 {
		t.Errorf("the other host received %v", heard)
	}
}

func TestInsecureURL_PlainHTTPToAnotherMachine(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]bool{
		"http://import.example":        true,
		"http://10.0.0.5:8080":         true,
		"HTTP://import.example/":       true,
		"http://127.0.0.1:8080":        false,
		"http://127.8.9.10":            false,
		"http://[::1]:8080":            false,
		"http://localhost:8080":        false,
		"http://api.localhost":         false,
		"https://import.example":       false,
		"http://localhost.example.com": true,
	} {
		if got := InsecureURL(url); got != want {
			t.Errorf("InsecureURL(%q) = %v, want %v", url, got, want)
		}
	}
}

// A token request that GraphQL answers with the service's own failure
// (HTTP 200, errorType INTERNAL: PostgreSQL restarting, say) is retried as
// a 500 would be, not taken for a refused key; a refused key is not
// retried.
func TestClientAccessToken_RetriesTheServicesOwnFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, errorType string
		failures        int // answers with the error before the token
		wantErr         bool
		wantCalls       int
	}{
		{"internal", "INTERNAL", 2, false, 3},
		{"throttled", "THROTTLED", 2, false, 3},
		{"refused", "AUTHORIZATION", 2, true, 1},
		// Retries: 3, so the fourth failure ends the retries.
		{"internal without end", "INTERNAL", 100, true, 4},
		{"throttled without end", "THROTTLED", 100, true, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			calls := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				calls++
				n := calls
				mu.Unlock()
				if n <= tc.failures {
					fmt.Fprintf(w, `{"data":null,"errors":[{"message":"no","extensions":{"errorCode":"x","errorType":%q}}]}`, tc.errorType)
					return
				}
				tokenHandler(w)
			}))
			defer srv.Close()
			cfg := Config{BaseURL: srv.URL, APIKey: "k", Team: "x", Cohort: "-", ReportDir: "-", Retries: 3,
				InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
			if err := cfg.check(); err != nil {
				t.Fatal(err)
			}
			_, err := newClient(cfg).accessToken(context.Background(), false)
			if (err != nil) != tc.wantErr {
				t.Errorf("accessToken: %v, want error %v", err, tc.wantErr)
			}
			mu.Lock()
			defer mu.Unlock()
			if calls != tc.wantCalls {
				t.Errorf("%d token requests, want %d", calls, tc.wantCalls)
			}
		})
	}
}
