package main

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// silentBodies opens n connections to the service that each send a POST
// announcing 200,000 bytes of body (under the 256 KiB that net/http drains
// of an unread body) and then nothing, and returns, for each, what it
// received and whether the service closed it within `within`.
func silentBodies(t *testing.T, s *service, n int, path, authorization string, within time.Duration) (answers []string, closed int) {
	t.Helper()
	addr := strings.TrimPrefix(s.base, "http://")
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		head := "POST " + path + " HTTP/1.1\r\nHost: importd\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n"
		if authorization != "" {
			head += "Authorization: " + authorization + "\r\n"
		}
		if _, err := io.WriteString(conn, head+"\r\n{"); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = conn.SetReadDeadline(time.Now().Add(within))
			got, err := io.ReadAll(conn)
			mu.Lock()
			defer mu.Unlock()
			answers = append(answers, strings.SplitN(string(got), "\r\n", 2)[0])
			if err == nil { // EOF: the service closed the connection
				closed++
			} else if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("read: %v", err)
			}
		}()
	}
	wg.Wait()
	return answers, closed
}

// Bodies that are never sent once held their connections for ever: 1,000
// unauthenticated POSTs announcing 200,000 bytes and then silent were still
// open after 60 s, as net/http drains an unread body without a deadline
// before it answers. Now a refusal of the credentials closes the
// connection at once (the body timeout is 10 minutes here, so only that
// passes), and any other request that leaves its body unread is cut at the
// body timeout. The deadlines are generous: each close is immediate or
// within the 2 s body timeout.
func TestHarden_BodiesNeverSentDoNotHoldConnections(t *testing.T) {
	t.Parallel()
	const n = 50
	t.Run("refused credentials close at once", func(t *testing.T) {
		t.Parallel()
		s := startService(t, "api", map[string]string{"HTTP_BODY_READ_TIMEOUT": "10m", "AUTH_FAILURE_LIMIT": "1000"})
		for _, authorization := range []string{"", "Token not.a.token"} {
			answers, closed := silentBodies(t, s, n, pathValidateAccount, authorization, 30*time.Second)
			if closed != n {
				t.Errorf("authorization %q: %d of %d connections closed within 30 s", authorization, closed, n)
			}
			for _, a := range answers {
				if a != "HTTP/1.1 401 Unauthorized" {
					t.Errorf("authorization %q: answer %q, want a 401", authorization, a)
					break
				}
			}
		}
	})
	t.Run("unread bodies are cut at the body timeout", func(t *testing.T) {
		t.Parallel()
		s := startService(t, "api", map[string]string{"HTTP_BODY_READ_TIMEOUT": "2s"})
		tok := s.accessToken(t, s.newKey(t, "k"))
		for _, tc := range []struct{ path, authorization, answer string }{
			{"/v1/no-such-endpoint/", "", "HTTP/1.1 404 Not Found"},
			{pathValidateAccount, "Token " + tok, "HTTP/1.1 400 Bad Request"},
		} {
			answers, closed := silentBodies(t, s, n, tc.path, tc.authorization, 30*time.Second)
			if closed != n {
				t.Errorf("%s: %d of %d connections closed within 30 s", tc.path, closed, n)
			}
			for _, a := range answers {
				if a != tc.answer {
					t.Errorf("%s: answer %q, want %q", tc.path, a, tc.answer)
					break
				}
			}
		}
	})
}
