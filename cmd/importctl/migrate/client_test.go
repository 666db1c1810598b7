package migrate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
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
