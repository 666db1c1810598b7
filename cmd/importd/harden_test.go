package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/admin"
)

// stallList opens a raw connection that asks for path and never reads the
// answer, as a client that has stopped reading does. Its receive buffer is
// small, so the server's writes block once the kernel's buffers are full.
func stallList(t *testing.T, addr, path, tok string) {
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
}

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

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Many list requests of one client that never read their answers once held
// every pooled connection idle in transaction, and E10 and the token
// endpoint of every other client hung. Now the client's requests beyond its
// in-flight cap get 429, other clients are answered at once, and the stalled
// lists are cut off after the per-write deadline, freeing their connections.
func TestHarden_StalledListReadersDoNotStarveOtherClients(t *testing.T) {
	t.Parallel()
	// Long enough that the lists are still stalled while the subtests run
	// on a loaded machine, and that an answer which waited for them to be
	// cut off is told from one that did not.
	const writeTimeout = 20 * time.Second
	s := startService(t, "api", map[string]string{
		"DB_MAX_CONNS":              "8",
		"MAX_IN_FLIGHT_PER_KEY":     "4",
		"HTTP_STREAM_WRITE_TIMEOUT": writeTimeout.String(),
	})
	sup, err := admin.CreateSupplier(context.Background(), s.db, admin.Supplier{Code: "DEMO", Status: admin.StatusOngoing})
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
	for range 10 {
		stallList(t, addr, pathList("all", "DEMO", ""), greedy)
	}
	waitFor(t, "the lists stall inside their transactions", writeTimeout, func() bool { return idleInTransaction(t, s) >= 4 })

	t.Run("over its cap the client gets 429", func(t *testing.T) {
		r := s.do(t, "GET", pathTransferStatus("DEMO", "ACC-000000001"), greedy, nil)
		if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
			t.Fatalf("status %d, Retry-After %q: %s", r.Status, r.Header.Get("Retry-After"), r.Raw)
		}
		want := map[string]any{"code": "too_many_requests_in_flight", "detail": "This API key has 4 requests in progress; wait for one to finish.", "errors": []any{}}
		if diff := cmp.Diff(want, r.Body); diff != "" {
			t.Errorf("body (-want +got):\n%s", diff)
		}
	})
	t.Run("other clients are answered at once", func(t *testing.T) {
		start := time.Now()
		// A time-out of its own, so that a hung answer fails the test
		// rather than stalling it.
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout/2)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", s.base+pathTransferStatus("DEMO", "ACC-000000001"), nil)
		req.Header.Set("Authorization", "Token "+other)
		if r := doReq(t, req); r.Status != http.StatusOK {
			t.Errorf("E10: %d %s", r.Status, r.Raw)
		}
		if out, errs := s.token(t, fmt.Sprintf(`{"APIKey": %q}`, otherKey)); len(errs) > 0 || out["token"] == nil {
			t.Errorf("token endpoint: %v", errs)
		}
		if d := time.Since(start); d > writeTimeout/2 {
			t.Errorf("E10 and the token endpoint took %s while the lists stalled, want well under the %v before they are cut off", d, writeTimeout)
		}
	})
	waitFor(t, "the stalled lists release their connections", writeTimeout+10*time.Second, func() bool { return idleInTransaction(t, s) == 0 })
	// With its slots back, the client is served again.
	if r := s.do(t, "GET", pathTransferStatus("DEMO", "ACC-000000001"), greedy, nil); r.Status != http.StatusOK {
		t.Errorf("E10 after the release: %d %s", r.Status, r.Raw)
	}
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
