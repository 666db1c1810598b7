package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/auth"
)

// testSecret and testPassword are TOKEN_SECRET and MONITORING_PASSWORD of the
// tests' services: random, as importd refuses secrets that are easy to guess.
const (
	testSecret   = "f07fb65b08cc30ae81427df622b4e9ca91e1f6b70f5b97c5305f967c2a6649d7"
	testPassword = "a97f9afcc67f6ca14ff2920b37fd0e3a"
)

// service is a running importd started by run() on port 0.
type service struct {
	base string
	db   *db.DB
	env  map[string]string
	// stop cancels run's context, as SIGTERM does; the test's cleanup still
	// waits for run to return.
	stop context.CancelFunc
}

// startService migrates a fresh database, starts `importd <mode>` on port 0
// with a Redis database of the test's own, and stops it when the test ends.
func startService(t testing.TB, mode string, extra map[string]string) *service {
	t.Helper()
	return startServiceLogging(t, mode, extra, io.Discard)
}

// startServiceLogging is startService with the service's log output (run's
// stderr) going to stderr.
func startServiceLogging(t testing.TB, mode string, extra map[string]string, stderr io.Writer) *service {
	t.Helper()
	dbURL := dbtest.NewDatabase(t)
	env := map[string]string{
		"DATABASE_URL": dbURL,
		"REDIS_URL":    dbtest.NewRedis(t),
		"HTTP_ADDR":    "127.0.0.1:0",
		"TOKEN_SECRET": testSecret,
		"LOG_LEVEL":    "error",
		// Every service has a document store, as in production: the
		// fixture's note names a document, which E5 checks (seedDemo
		// places it).
		"DOCUMENTS_URL": "file://" + t.TempDir(),
	}
	for k, v := range extra {
		env[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{mode}, func(k string) string { return env[k] }, io.Discard, stderr, func(a string) { addr <- a })
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case err := <-done:
		cancel()
		t.Fatalf("importd %s exited early: %v", mode, err)
	case <-time.After(liveness):
		cancel()
		t.Fatal("importd did not start listening")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("importd %s: %v", mode, err)
			}
		case <-time.After(30 * time.Second):
			t.Error("importd did not stop within 30s")
		}
	})
	d, err := db.Open(context.Background(), dbURL, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &service{base: base, db: d, env: env, stop: cancel}
}

type response struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

func (s *service) do(t testing.TB, method, path, token string, body any) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Token "+token)
	}
	return doReq(t, req)
}

func doReq(t testing.TB, req *http.Request) response {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := response{Status: res.StatusCode, Header: res.Header, Raw: raw}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

// token runs the GraphQL mutation and returns data.obtainServiceToken and errors.
func (s *service) token(t testing.TB, input string) (map[string]any, []any) {
	t.Helper()
	q := map[string]any{"query": `mutation($input: ObtainJSONWebTokenInput!) { obtainServiceToken(input: $input) { token payload refreshToken refreshExpiresIn } }`,
		"variables": map[string]any{"input": json.RawMessage(input)}}
	r := s.do(t, "POST", "/v1/graphql/", "", q)
	if r.Status != 200 {
		t.Fatalf("graphql answered %d: %s", r.Status, r.Raw)
	}
	errs, _ := r.Body["errors"].([]any)
	data, _ := r.Body["data"].(map[string]any)
	out, _ := data["obtainServiceToken"].(map[string]any)
	return out, errs
}

// newKey creates a key limited to suppliers, or for all suppliers when none
// are given.
func (s *service) newKey(t testing.TB, name string, suppliers ...string) string {
	t.Helper()
	scope := auth.OnlySuppliers(suppliers...)
	if len(suppliers) == 0 {
		scope = auth.AllSuppliers()
	}
	key, err := auth.CreateKey(context.Background(), s.db, name, "", scope)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func (s *service) accessToken(t testing.TB, key string) string {
	t.Helper()
	out, errs := s.token(t, fmt.Sprintf(`{"APIKey": %q}`, key))
	if len(errs) > 0 || out == nil {
		t.Fatalf("obtainServiceToken: %v", errs)
	}
	return out["token"].(string)
}

func errorCode(t testing.TB, errs []any) string {
	t.Helper()
	if len(errs) != 1 {
		t.Fatalf("want one GraphQL error, got %v", errs)
	}
	ext, _ := errs[0].(map[string]any)["extensions"].(map[string]any)
	code, _ := ext["errorCode"].(string)
	if typ, _ := ext["errorType"].(string); typ == "" {
		t.Errorf("GraphQL error has no extensions.errorType: %v", errs[0])
	}
	return code
}

func TestAuth_KeyTokenAuthenticatedCall(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	key := s.newKey(t, "team-a")
	if len(key) < 4+43 {
		t.Fatalf("key %q is shorter than 32 random bytes", key)
	}
	out, errs := s.token(t, fmt.Sprintf(`{"APIKey": %q}`, key))
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	payload, _ := out["payload"].(map[string]any)
	exp, _ := payload["exp"].(float64)
	if d := time.Until(time.Unix(int64(exp), 0)); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("access token lives %v, want 60m", d)
	}
	rexp, _ := out["refreshExpiresIn"].(float64)
	if d := time.Until(time.Unix(int64(rexp), 0)); d < 7*24*time.Hour-time.Minute || d > 7*24*time.Hour+time.Minute {
		t.Errorf("refresh token lives %v, want 7 days", d)
	}
	r := s.do(t, "GET", "/v1/data-import/whoami/", out["token"].(string), nil)
	if r.Status != 200 || r.Body["key_name"] != "team-a" {
		t.Fatalf("authenticated call: %d %s", r.Status, r.Raw)
	}
}

func TestAuth_KeyIsStoredOnlyAsHash(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	key := s.newKey(t, "hashed")
	var n int
	if err := s.db.Get(&n, `SELECT count(*) FROM api_keys WHERE position($1 in encode(secret_hash, 'escape')) > 0 OR prefix = $1`, key); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("the key is stored in clear")
	}
}

func TestAuth_RefreshToken(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	key := s.newKey(t, "refresher")
	first, _ := s.token(t, fmt.Sprintf(`{"APIKey": %q}`, key))
	out, errs := s.token(t, fmt.Sprintf(`{"refreshToken": %q}`, first["refreshToken"]))
	if len(errs) > 0 {
		t.Fatalf("refresh: %v", errs)
	}
	if r := s.do(t, "GET", "/v1/data-import/whoami/", out["token"].(string), nil); r.Status != 200 {
		t.Fatalf("refreshed token refused: %d %s", r.Status, r.Raw)
	}
	// An access token is not a refresh token.
	_, errs = s.token(t, fmt.Sprintf(`{"refreshToken": %q}`, first["token"]))
	if code := errorCode(t, errs); code != auth.CodeInvalidRefreshToken {
		t.Errorf("access token used as refresh token: code %q", code)
	}
}

func TestAuth_TokenInputNeedsExactlyOneCredential(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	for _, in := range []string{`{}`, `{"APIKey": "a", "refreshToken": "b"}`} {
		_, errs := s.token(t, in)
		if code := errorCode(t, errs); code != auth.CodeInvalidTokenInput {
			t.Errorf("input %s: code %q, want %q", in, code, auth.CodeInvalidTokenInput)
		}
	}
	_, errs := s.token(t, `{"APIKey": "bik_not-a-real-key-at-all-not-a-real-key-at-all"}`)
	if code := errorCode(t, errs); code != auth.CodeInvalidAPIKey {
		t.Errorf("unknown key: code %q", code)
	}
}

func TestAuth_RefusedCredentialsGet401(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	key := s.newKey(t, "k")
	good := s.accessToken(t, key)

	// A token issued two hours ago has expired.
	old := auth.New(s.db, []byte(testSecret)).WithClock(func() time.Time { return time.Now().Add(-2 * time.Hour) })
	pair, err := old.TokenFromKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	forged := auth.New(s.db, []byte("another-secret-another-secret-0123456"))
	fpair, _ := forged.TokenFromKey(context.Background(), key)

	cases := []struct {
		name, header, code string
	}{
		{"missing header", "", auth.CodeNotAuthenticated},
		{"wrong scheme", "Bearer " + good, auth.CodeNotAuthenticated},
		{"scheme without token", "Token ", auth.CodeNotAuthenticated},
		{"garbage token", "Token abc.def.ghi", auth.CodeAuthenticationFailed},
		{"expired token", "Token " + pair.Token, auth.CodeAuthenticationFailed},
		{"refresh token used as access token", "Token " + pair.RefreshToken, auth.CodeAuthenticationFailed},
		{"token signed with another secret", "Token " + fpair.Token, auth.CodeAuthenticationFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest("GET", s.base+"/v1/data-import/whoami/", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			r := doReq(t, req)
			if r.Status != 401 || r.Body["code"] != tc.code {
				t.Fatalf("got %d %s, want 401 %s", r.Status, r.Raw, tc.code)
			}
			if _, ok := r.Body["errors"].([]any); !ok || r.Body["detail"] == "" {
				t.Errorf("401 body is not the section 7 shape: %s", r.Raw)
			}
		})
	}
}

// The Authorization forms of reference-api.md 2.1 besides "Token <token>":
// the token alone, and the API key used directly with "Token ", whose scope
// and revocation apply as to its tokens.
func TestAuth_BareTokenAndKeyUsedDirectlyAreAccepted(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	ctx := context.Background()
	for _, code := range []string{"ALPHA", "BETA"} {
		if _, err := admin.CreateSupplier(ctx, s.db, admin.Supplier{Code: code}); err != nil {
			t.Fatal(err)
		}
	}
	all := s.newKey(t, "direct-all")
	alpha := s.newKey(t, "direct-alpha", "ALPHA")
	whoami := func(header string) response {
		t.Helper()
		req, _ := http.NewRequest("GET", s.base+"/v1/data-import/whoami/", nil)
		req.Header.Set("Authorization", header)
		return doReq(t, req)
	}
	for _, tc := range []struct{ name, header, key, scope string }{
		{"token alone", s.accessToken(t, all), "direct-all", "[]"},
		{"Token and API key", "Token " + all, "direct-all", "[]"},
		{"Token and scoped API key", "Token " + alpha, "direct-alpha", "[ALPHA]"},
	} {
		r := whoami(tc.header)
		if r.Status != 200 || r.Body["key_name"] != tc.key || fmt.Sprint(r.Body["import_suppliers"]) != tc.scope {
			t.Errorf("%s: %d %s, want 200 %s %s", tc.name, r.Status, r.Raw, tc.key, tc.scope)
		}
	}

	// The scoped key used directly sees only its supplier: BETA looks missing.
	req, _ := http.NewRequest("GET", s.base+"/v1/data-import/all-account-import-processes/BETA/", nil)
	req.Header.Set("Authorization", "Token "+alpha)
	if r := doReq(t, req); r.Status != 404 || r.Body["code"] != "import_supplier_not_found" {
		t.Errorf("scoped key used directly on another supplier: %d %s, want 404 import_supplier_not_found", r.Status, r.Raw)
	}

	// A key used directly is read on every request: its revocation stops it
	// with the next one.
	if err := auth.RevokeKey(ctx, s.db, "direct-alpha"); err != nil {
		t.Fatal(err)
	}
	if r := whoami("Token " + alpha); r.Status != 401 || r.Body["code"] != auth.CodeAuthenticationFailed {
		t.Errorf("revoked key used directly: %d %s, want 401 %s", r.Status, r.Raw, auth.CodeAuthenticationFailed)
	}
	if r := whoami(all); r.Status != 401 || r.Body["code"] != auth.CodeAuthenticationFailed {
		t.Errorf("API key without Token: %d %s, want 401 %s", r.Status, r.Raw, auth.CodeAuthenticationFailed)
	}
}

func TestAuth_RevokedKeyStopsTokensAndRefreshAtOnce(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	key := s.newKey(t, "to-revoke")
	out, _ := s.token(t, fmt.Sprintf(`{"APIKey": %q}`, key))
	if r := s.do(t, "GET", "/v1/data-import/whoami/", out["token"].(string), nil); r.Status != 200 {
		t.Fatalf("before revocation: %d %s", r.Status, r.Raw) // also puts the key in the cache
	}
	if err := auth.RevokeKey(context.Background(), s.db, "to-revoke"); err != nil {
		t.Fatal(err)
	}
	// The API caches keys and hears of the revocation by PostgreSQL NOTIFY,
	// which lands within milliseconds; allow it two seconds, far below the
	// cache's own TTL, so the test fails if the notification does not work.
	deadline := time.Now().Add(2 * time.Second)
	for {
		r := s.do(t, "GET", "/v1/data-import/whoami/", out["token"].(string), nil)
		if r.Status == 401 && r.Body["code"] == auth.CodeAuthenticationFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("token of a revoked key still accepted: %d %s", r.Status, r.Raw)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, errs := s.token(t, fmt.Sprintf(`{"refreshToken": %q}`, out["refreshToken"]))
	if code := errorCode(t, errs); code != auth.CodeInvalidRefreshToken {
		t.Errorf("refresh with a revoked key: %q", code)
	}
	_, errs = s.token(t, fmt.Sprintf(`{"APIKey": %q}`, key))
	if code := errorCode(t, errs); code != auth.CodeInvalidAPIKey {
		t.Errorf("revoked key: %q", code)
	}
}

func TestErrors_EveryFailureHasTheSection7Body(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", map[string]string{"MAX_BODY_BYTES": "1024"})
	tok := s.accessToken(t, s.newKey(t, "k"))
	big := `{"query": "` + strings.Repeat("x", 2048) + `"}`
	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		code                            string
	}{
		{"unknown route", "GET", "/nope", "", "", 404, "not_found"},
		// Spec 7.2 has no 405, 413 or 415: these are 400, told apart by their code.
		{"wrong method", "DELETE", "/v1/graphql/", "", "", 400, "method_not_allowed"},
		{"wrong method on E3", "GET", "/v1/data-import/validate-account/", "", "", 400, "method_not_allowed"},
		{"E3 body over the limit", "POST", "/v1/data-import/validate-account/", "application/json", big, 400, "request_too_large"},
		{"E3 body not JSON", "POST", "/v1/data-import/validate-account/", "text/plain", "hello", 400, "unsupported_media_type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var rd io.Reader
			if tc.body != "" {
				rd = strings.NewReader(tc.body)
			}
			req, _ := http.NewRequest(tc.method, s.base+tc.path, rd)
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			req.Header.Set("Authorization", "Token "+tok)
			r := doReq(t, req)
			if r.Status != tc.status || r.Body["code"] != tc.code {
				t.Fatalf("got %d %s, want %d %s", r.Status, r.Raw, tc.status, tc.code)
			}
			if _, ok := r.Body["errors"].([]any); !ok {
				t.Errorf("no errors array: %s", r.Raw)
			}
			if r.Header.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id header")
			}
		})
	}
}

func TestHealth_ProbesNeedNoToken(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := s.do(t, "GET", p, "", nil); r.Status != 200 {
			t.Errorf("%s: %d %s", p, r.Status, r.Raw)
		}
	}
}

func TestHealth_ReadinessFailsWhenRedisStops(t *testing.T) {
	t.Parallel()
	redisPath, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not installed; `make test` installs it")
	}
	// A Redis of this test's own, so that stopping it disturbs no other test.
	port := freePort(t)
	dir := t.TempDir()
	cmd := exec.Command(redisPath, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitTCP(t, fmt.Sprintf("127.0.0.1:%d", port))

	s := startService(t, "api", map[string]string{"REDIS_URL": fmt.Sprintf("redis://127.0.0.1:%d/0", port)})
	if r := s.do(t, "GET", "/readyz", "", nil); r.Status != 200 {
		t.Fatalf("ready with Redis up: %d %s", r.Status, r.Raw)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	r := s.do(t, "GET", "/readyz", "", nil)
	if r.Status != 503 || r.Body["code"] != "redis_unavailable" {
		t.Fatalf("with Redis stopped: %d %s, want 503 redis_unavailable", r.Status, r.Raw)
	}
	if r := s.do(t, "GET", "/healthz", "", nil); r.Status != 200 {
		t.Errorf("liveness must not depend on Redis: %d", r.Status)
	}
}

func TestConfig_ErrorNamesTheVariable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"missing database", map[string]string{"REDIS_URL": "redis://127.0.0.1:1/0", "TOKEN_SECRET": testSecret}, "DATABASE_URL: required"},
		{"short secret", map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "REDIS_URL": "redis://127.0.0.1:1/0", "TOKEN_SECRET": "short"}, "TOKEN_SECRET: must be at least 32 bytes"},
		{"bad redis", map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "REDIS_URL": "http://x", "TOKEN_SECRET": testSecret}, "REDIS_URL:"},
		{"bad limit", map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "REDIS_URL": "redis://127.0.0.1:1/0", "TOKEN_SECRET": testSecret, "PROCESS_CONCURRENCY_LIMIT": "-1"}, "PROCESS_CONCURRENCY_LIMIT:"},
		{"bad duration", map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "REDIS_URL": "redis://127.0.0.1:1/0", "TOKEN_SECRET": testSecret, "PROCESS_WAIT_TIMEOUT": "soon"}, "PROCESS_WAIT_TIMEOUT:"},
		{"bad address", map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "REDIS_URL": "redis://127.0.0.1:1/0", "TOKEN_SECRET": testSecret, "HTTP_ADDR": "8080"}, "HTTP_ADDR:"},
		{"example token secret", map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "REDIS_URL": "redis://127.0.0.1:1/0", "TOKEN_SECRET": "local-only-token-secret-change-me-0123456789"}, "TOKEN_SECRET: is a published example"},
		{"example dashboard password", map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "REDIS_URL": "redis://127.0.0.1:1/0", "TOKEN_SECRET": testSecret, "MONITORING_USER": "admin", "MONITORING_PASSWORD": "admin"}, "MONITORING_PASSWORD: is a published example"},
		{"half monitoring", map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "REDIS_URL": "redis://127.0.0.1:1/0", "TOKEN_SECRET": testSecret, "MONITORING_USER": "a"}, "MONITORING_PASSWORD:"},
		{"no account writers", map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "REDIS_URL": "redis://127.0.0.1:1/0", "TOKEN_SECRET": testSecret, "ACCOUNT_WRITERS": "0"}, "ACCOUNT_WRITERS:"},
		{"bad account batch", map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "REDIS_URL": "redis://127.0.0.1:1/0", "TOKEN_SECRET": testSecret, "ACCOUNT_BATCH": "many"}, "ACCOUNT_BATCH:"},
		{"profiles without their port", map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "REDIS_URL": "redis://127.0.0.1:1/0", "TOKEN_SECRET": testSecret, "METRICS_PROFILES": "true"}, "METRICS_PROFILES: needs METRICS_ADDR"},
		{"bad log format", map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "REDIS_URL": "redis://127.0.0.1:1/0", "TOKEN_SECRET": testSecret, "LOG_FORMAT": "xml"}, "LOG_FORMAT: must be json or text"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := run(context.Background(), []string{"serve"}, func(k string) string { return tc.env[k] }, io.Discard, io.Discard, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestHelp_ListsEveryVariable(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, func(string) string { return "" }, &out, io.Discard, nil); err != nil {
		t.Fatal(err)
	}
	for _, v := range vars {
		if !strings.Contains(out.String(), v.name) {
			t.Errorf("--help does not list %s", v.name)
		}
	}
}

func TestServe_RefusesOutdatedSchema(t *testing.T) {
	t.Parallel()
	// A database with no migrations at all.
	admin := dbtest.New(t)
	var name string
	if err := admin.Get(&name, `SELECT current_database()`); err != nil {
		t.Fatal(err)
	}
	empty := name + "_empty"
	if _, err := admin.Exec(`CREATE DATABASE ` + empty); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(`DROP DATABASE IF EXISTS ` + empty + ` WITH (FORCE)`) })
	u := strings.Replace(dbtest.DatabaseURL(), "/importd?", "/"+empty+"?", 1)
	if !strings.Contains(u, empty) {
		t.Skip("DATABASE_URL does not name the database in the usual form")
	}
	env := map[string]string{"DATABASE_URL": u, "REDIS_URL": dbtest.NewRedis(t), "TOKEN_SECRET": testSecret, "HTTP_ADDR": "127.0.0.1:0", "LOG_LEVEL": "error"}
	err := run(context.Background(), []string{"api"}, func(k string) string { return env[k] }, io.Discard, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "importd migrate") {
		t.Fatalf("api on an empty schema: %v, want a message naming `importd migrate`", err)
	}
	// --migrate applies the migrations first and then starts.
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"api", "--migrate"}, func(k string) string { return env[k] }, io.Discard, io.Discard, func(string) { close(started) })
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("api --migrate: %v", err)
	case <-time.After(liveness):
		t.Fatal("api --migrate did not start")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestMigrate_IsIdempotent(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": dbtest.NewDatabase(t)}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"migrate"}, func(k string) string { return env[k] }, &out, io.Discard, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "applied 0 migration") {
		t.Errorf("second migrate on a migrated database: %q", out.String())
	}
}

func TestAuth_KeyLimitedToSupplierSeesOnlyIt(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	ctx := context.Background()
	for _, code := range []string{"ALPHA", "BETA"} {
		if _, err := admin.CreateSupplier(ctx, s.db, admin.Supplier{Code: code}); err != nil {
			t.Fatal(err)
		}
	}
	tok := s.accessToken(t, s.newKey(t, "alpha-only", "ALPHA"))
	r := s.do(t, "GET", "/v1/data-import/whoami/", tok, nil)
	if got := fmt.Sprint(r.Body["import_suppliers"]); got != "[ALPHA]" {
		t.Fatalf("scope %s, want [ALPHA]", got)
	}
	if _, err := auth.CreateKey(ctx, s.db, "ghost", "", auth.OnlySuppliers("NOPE")); err == nil {
		t.Error("a key limited to a supplier that does not exist was created")
	}
	_ = os.Getenv // keep imports stable as tests grow
}

// DATABASE_URL in lib/pq's multi-host form is accepted; several hosts with
// their ports beside them, which lib/pq misreads (checkHostPorts), are
// refused at start-up.
func TestConfig_DatabaseURLOfSeveralHostsTakesPortsInTheQuery(t *testing.T) {
	t.Parallel()
	for v, ok := range map[string]bool{
		"postgres://u@pg1:5432/d": true,
		"postgres://u@pg1,pg2/d?port=5432,5433&target_session_attrs=read-write": true,
		"postgres://u@pg1:5432,pg2:5433/d?target_session_attrs=read-write":      false,
		"postgres://u@pg1,pg2:5433/d":                                           false,
	} {
		_, err := loadConfig(func(k string) string { return map[string]string{"DATABASE_URL": v}[k] }, 0)
		if (err == nil) != ok {
			t.Errorf("DATABASE_URL=%s: %v", v, err)
		}
	}
}
