package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/auth"
	"github.com/bulkimport/bulkimport/jobs/progress"
)

// sharedExempt are the routes that do not take the caller's share of the
// database pool, each for its reason. Every other route of the API and of
// the migration page does: it reads or writes the database for a key.
var sharedExempt = map[string]string{
	"GET /healthz":                "no key",
	"GET /readyz":                 "no key",
	"POST /v1/graphql/":           "no key: the token endpoint, bounded by the failed-attempt limit",
	"POST /v1/graphql":            "the token endpoint without its trailing slash",
	"GET " + SchemaPath:           "no key, no database",
	"GET " + DocsPath + "*file":   "no key, no database",
	"GET " + MigrationRoot:        "a redirect",
	"GET /v1/data-import/whoami/": "reads the token only",
	"POST /v1/data-import/account-import-process/process/":      "E5 waits on the worker, which has the concurrency limit",
	"POST /v1/data-import/payment-instruction/create/":          "E9 waits on the vendor's verification, a task",
	"POST /v1/data-import/business-payment-instruction/create/": "E2 waits on the vendor's verification, a task",
	"GET " + MigrationRoot + "/static/*file":                    "the page's own files",
	"GET " + MigrationRoot + "/:supplier":                       "a redirect",
}

// Every route that reads the database for a key takes that key's share of
// the pool: with the key's one slot held, each answers 429
// too_many_requests_in_flight once the wait for it is over, and the route
// list holds no route that is neither shared nor exempt for a reason. The
// reconciliation stream was once registered without the share, and 16 of
// one key's took the whole pool. The migration page's operator login has
// a share of its own.
func TestRoutes_EveryDatabaseRouteTakesTheKeysShare(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	a := auth.New(d, []byte(strings.Repeat("s", 32)))
	const operator, operatorPassword = "op", "a97f9afcc67f6ca14ff2920b37fd0e3a"
	s := New(Config{PoolShare: 1, PoolShareWait: 20 * time.Millisecond, Migration: MigrationLogin{User: operator, Password: operatorPassword}},
		Deps{DB: d, Redis: rc, Auth: a, Progress: progress.New(d, nil), Log: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	key, err := auth.CreateKey(ctx, d, "greedy", "", auth.AllSuppliers())
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.AuthenticateKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{p.KeyID, operatorCaller} {
		release, ok := s.shares.acquire(ctx, id)
		if !ok {
			t.Fatal("the share's one slot was not free")
		}
		t.Cleanup(release)
	}

	type answer struct {
		Status int
		Code   string
	}
	refused := answer{http.StatusTooManyRequests, "too_many_requests_in_flight"}
	do := func(method, path string, login func(*http.Request)) answer {
		var body *strings.Reader
		if method == "POST" {
			body = strings.NewReader(`{}`)
		} else {
			body = strings.NewReader("")
		}
		req := httptest.NewRequest(method, path, body)
		req.Header.Set("Content-Type", "application/json")
		login(req)
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		got := answer{Status: w.Code}
		if w.Code == http.StatusTooManyRequests {
			got.Code = "too_many_requests_in_flight"
			if !strings.Contains(w.Body.String(), `"too_many_requests_in_flight"`) {
				got.Code = w.Body.String()
			}
		}
		return got
	}
	withKey := func(r *http.Request) { r.Header.Set("Authorization", "Token "+key) }
	pageKey := func(r *http.Request) { r.SetBasicAuth("viewer", key) }
	pageOperator := func(r *http.Request) { r.SetBasicAuth(operator, operatorPassword) }

	seen := 0
	for _, r := range s.router.Routes() {
		route := r.Method + " " + r.Path
		if _, ok := sharedExempt[route]; ok {
			continue
		}
		seen++
		path := r.Path
		for _, part := range strings.Split(path, "/") {
			if strings.HasPrefix(part, ":") || strings.HasPrefix(part, "*") {
				path = strings.Replace(path, part, "DEMO", 1)
			}
		}
		t.Run(route, func(t *testing.T) {
			t.Parallel()
			logins := map[string]func(*http.Request){"key": withKey}
			switch {
			case strings.HasPrefix(path, MigrationRoot+"/"):
				logins = map[string]func(*http.Request){"key": pageKey, "operator": pageOperator}
			case !strings.HasPrefix(path, "/v1/data-import/"):
				t.Fatalf("%s is neither an API route nor the migration page's, and not exempt for a reason", route)
			}
			for name, login := range logins {
				if d := cmp.Diff(refused, do(r.Method, path, login)); d != "" {
					t.Errorf("%s with its share held (-want +got):\n%s", name, d)
				}
			}
		})
	}
	if seen < 14 {
		t.Errorf("%d routes checked; the API and the page have more", seen)
	}
}
