package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/status"
)

// idleInTransaction counts the service's sessions that wait inside a
// transaction.
func idleInTransaction(t *testing.T, s *service) int {
	t.Helper()
	var n int
	if err := s.db.Get(&n, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state = 'idle in transaction' AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stallListStarted opens a raw connection that asks for path and returns
// once the answer's status line has arrived, so that the list is known to be
// in flight; then it reads no more, as a client that has stopped reading
// does.
func stallListStarted(t *testing.T, addr, path, tok string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.(*net.TCPConn).SetReadBuffer(1024)
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: importd\r\nAuthorization: Token %s\r\n\r\n", path, tok); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	line := make([]byte, len("HTTP/1.1 200"))
	if _, err := io.ReadFull(conn, line); err != nil || string(line) != "HTTP/1.1 200" {
		t.Fatalf("list: %q %v", line, err)
	}
}

// List requests of one client that never read their answers held pooled
// connections idle in transaction for as long as their writes could block:
// 40 slow readers held 20 of 20, and another supplier's client got 0 of 4
// answers within 1 s. Lists now read a page at a time, each in a query of
// its own that gives its connection back before the page is written, so
// stalled readers hold no connection at all: here 10 of them, as many as
// the key's share of a pool of 20, and every other client is answered at
// once.
// The client's requests beyond its in-flight cap get 429, and the stalled
// lists are cut off after the per-write deadline, freeing their slots.
func TestHarden_StalledListReadersHoldNoDatabaseConnection(t *testing.T) {
	t.Parallel()
	const writeTimeout, stalled = 20 * time.Second, 10
	s := startService(t, "api", map[string]string{
		"DB_MAX_CONNS":              "20",
		"MAX_IN_FLIGHT_PER_KEY":     fmt.Sprint(stalled),
		"HTTP_STREAM_WRITE_TIMEOUT": writeTimeout.String(),
	})
	sup, err := admin.CreateSupplier(context.Background(), s.db, admin.Supplier{Code: "DEMO", Status: status.Ongoing})
	if err != nil {
		t.Fatal(err)
	}
	// About 15 MB of JSON: far more than the kernel buffers between the
	// server and a client that does not read.
	if _, err := s.db.Exec(`INSERT INTO import_processes (supplier_id, external_account_number, payload)
		SELECT $1, 'ACC-' || lpad(i::text, 9, '0'), '{}' FROM generate_series(1, 150000) AS i`, sup.ID); err != nil {
		t.Fatal(err)
	}
	greedyKey, otherKey := s.newKey(t, "greedy"), s.newKey(t, "other")
	greedy, other := s.accessToken(t, greedyKey), s.accessToken(t, otherKey)

	addr := strings.TrimPrefix(s.base, "http://")
	// Each list has begun (its status line arrived) and stalls: it stays
	// in flight, writing, until its write deadline.
	for range stalled {
		stallListStarted(t, addr, pathList("all", "DEMO", ""), greedy)
	}
	refused := s.do(t, "GET", pathTransferStatus("DEMO", "ACC-000000001"), greedy, nil)
	t.Run("over its cap the client gets 429", func(t *testing.T) {
		want := map[string]any{"code": "too_many_requests_in_flight", "detail": fmt.Sprintf("This API key has %d requests in progress; wait for one to finish.", stalled), "errors": []any{}}
		if diff := cmp.Diff(want, refused.Body); diff != "" || refused.Header.Get("Retry-After") == "" {
			t.Errorf("body (-want +got):\n%s\nRetry-After %q", diff, refused.Header.Get("Retry-After"))
		}
	})
	t.Run("the stalled lists hold no connection waiting on their clients", func(t *testing.T) {
		if n := idleInTransaction(t, s); n != 0 {
			t.Errorf("%d connections idle in transaction", n)
		}
	})
	t.Run("other clients are answered at once", func(t *testing.T) {
		for i := range 4 {
			// A time-out of its own, far below the stalled lists' write
			// deadline, so that an answer that waits for their
			// connections fails the test rather than stalling it.
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
			req, _ := http.NewRequestWithContext(ctx, "GET", s.base+pathTransferStatus("DEMO", fmt.Sprintf("ACC-%09d", i+1)), nil)
			req.Header.Set("Authorization", "Token "+other)
			if r := doReq(t, req); r.Status != http.StatusOK {
				t.Errorf("E10 %d: %d %s", i, r.Status, r.Raw)
			}
			cancel()
		}
		if out, errs := s.token(t, fmt.Sprintf(`{"APIKey": %q}`, otherKey)); len(errs) > 0 || out["token"] == nil {
			t.Errorf("token endpoint: %v", errs)
		}
	})
	// With its slots back, the client is served again.
	waitFor(t, "the stalled lists are cut off", writeTimeout+20*time.Second, func() bool {
		return s.do(t, "GET", pathTransferStatus("DEMO", "ACC-000000001"), greedy, nil).Status == http.StatusOK
	})
}

// A client that sends a body slowly, or part of it and then nothing, once
// held its request (and a goroutine) for ever. Now the body must arrive
// within HTTP_BODY_READ_TIMEOUT, or the answer is 400 request_body_timeout.
func TestHarden_SlowBodyIsCutOffAfterTheBodyReadTimeout(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", map[string]string{"HTTP_BODY_READ_TIMEOUT": "1s"})
	// Without the body timeout the request would wait for ever; the read
	// deadline and the bound below are only generous deadlines for it.
	tok := s.accessToken(t, s.newKey(t, "slow"))
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: importd\r\nAuthorization: Token %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"ext", pathValidateAccount, tok)
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer res.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(res.Body).Decode(&body)
	if res.StatusCode != http.StatusBadRequest || body["code"] != "request_body_timeout" {
		t.Errorf("answer %d %v", res.StatusCode, body)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("answered after %s", d)
	}
}

// Requests that took every connection of the pool also stopped every
// client from authenticating: the token endpoint and API keys read the
// database through the same pool. Logins and tokens now have connections
// of their own. Here the pool's one connection waits on a lock the test
// holds; a token request and an API key used directly are still
// answered.
func TestHarden_LoginsAndTokensKeepConnectionsOfTheirOwn(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", map[string]string{"DB_MAX_CONNS": "1"})
	if _, err := admin.CreateSupplier(context.Background(), s.db, admin.Supplier{Code: "DEMO", Status: status.Ongoing}); err != nil {
		t.Fatal(err)
	}
	key := s.newKey(t, "k")
	tok := s.accessToken(t, key)
	tx, err := s.db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`LOCK TABLE import_processes IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan response, 1)
	go func() { blocked <- s.do(t, "GET", pathTransferStatus("DEMO", "ACC-1"), tok, nil) }()
	waitFor(t, "E10 holds the pool's connection, waiting on the lock", 20*time.Second, func() bool {
		var n int
		if err := s.db.Get(&n, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%import_processes%'`); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	get := func(path, authorization string) response {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.base+path, nil)
		req.Header.Set("Authorization", authorization)
		return doReq(t, req)
	}
	if r := get("/v1/data-import/whoami/", "Token "+key); r.Status != http.StatusOK {
		t.Errorf("an API key used directly: %d %s", r.Status, r.Raw)
	}
	body, _ := json.Marshal(map[string]any{"query": `mutation($k: String) { obtainServiceToken(input: {APIKey: $k}) { token } }`, "variables": map[string]any{"k": key}})
	req, _ := http.NewRequestWithContext(ctx, "POST", s.base+"/v1/graphql/", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if r := doReq(t, req); r.Status != http.StatusOK || r.Body["errors"] != nil {
		t.Errorf("a token request: %d %s", r.Status, r.Raw)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if r := <-blocked; r.Status != http.StatusNotFound {
		t.Errorf("E10 after the lock: %d %s", r.Status, r.Raw)
	}
}

// One key's requests could take every connection of the pool: 64 in
// flight are allowed per key, against 20 connections. Now a key runs at
// most half of DB_MAX_CONNS requests against the database at once, and
// the rest wait for its share. Here the pool has 4 connections and a key's
// 4 requests wait on a lock the test holds: 2 of them hold connections,
// and another key is still answered.
func TestHarden_OneKeyTakesAtMostAShareOfThePool(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", map[string]string{"DB_MAX_CONNS": "4"})
	if _, err := admin.CreateSupplier(context.Background(), s.db, admin.Supplier{Code: "DEMO", Status: status.Ongoing}); err != nil {
		t.Fatal(err)
	}
	greedy, other := s.accessToken(t, s.newKey(t, "greedy")), s.accessToken(t, s.newKey(t, "other"))
	tx, err := s.db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`LOCK TABLE import_processes IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	waiting := func() int {
		var n int
		if err := s.db.Get(&n, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%import_processes%'`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	done := make(chan int, 4)
	for i := range 4 {
		go func() {
			done <- s.do(t, "GET", pathTransferStatus("DEMO", fmt.Sprintf("ACC-%d", i)), greedy, nil).Status
		}()
	}
	waitFor(t, "the key's share of connections waits on the lock", 20*time.Second, func() bool { return waiting() >= 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.base+pathTransferStatus("NO-SUCH-SUPPLIER", "ACC-1"), nil)
	req.Header.Set("Authorization", "Token "+other)
	if r := doReq(t, req); r.Status != http.StatusNotFound || r.Body["code"] != "import_supplier_not_found" {
		t.Errorf("another key while the first waits: %d %s", r.Status, r.Raw)
	}
	if n := waiting(); n != 2 {
		t.Errorf("%d of the key's requests hold connections, want its share of 2", n)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if code := <-done; code != http.StatusNotFound {
			t.Errorf("the key's request after the lock: %d", code)
		}
	}
}
