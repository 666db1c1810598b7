package api

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

// numbers is a JSON body of about size bytes holding size/2 numbers: the
// most tree per byte a flat body can build.
func numbers(size int) string {
	return `{"x":[` + strings.Repeat("0,", size/2) + `0]}`
}

// text is a JSON body of about size bytes holding one string.
func text(size int) string { return `{"x":"` + strings.Repeat("a", size) + `"}` }

// bodyServer is a Server with a budget of body memory of budget bytes
// and two routes that read a body: /test/hold holds its request (and the
// body's charge) open until release is closed, after sending on held;
// /test/read answers at once.
func bodyServer(t *testing.T, budget int64) (post func(path, body string) (int, string), held chan struct{}, release chan struct{}) {
	t.Helper()
	s := New(Config{BodyMemory: budget, BodyReadTimeout: 300 * time.Millisecond}, Deps{Log: slog.New(slog.DiscardHandler)})
	held, release = make(chan struct{}, 1), make(chan struct{})
	s.router.POST("/test/hold", func(c *gin.Context) {
		if _, err := s.readJSON(c); err != nil {
			writeError(c, err)
			return
		}
		held <- struct{}{}
		<-release
		c.Status(http.StatusOK)
	})
	s.router.POST("/test/read", func(c *gin.Context) {
		if _, err := s.readJSON(c); err != nil {
			writeError(c, err)
			return
		}
		c.Status(http.StatusOK)
	})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	post = func(path, body string) (int, string) {
		res, err := http.Post(srv.URL+path, "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(raw)
	}
	return post, held, release
}

// waitHeld waits for the /test/hold request to have its body charged.
func waitHeld(t *testing.T, held chan struct{}) {
	t.Helper()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the first large body was not served")
	}
}

// Parsed request bodies had no budget but the key's 64 requests in flight:
// 16 E3 bodies of 2 MB held 1.75 GB at once, and one key could hold about
// 6.7 GB. Bodies over LargeBody are now charged to the replica's budget
// (Config.BodyMemory) until their request ends: while one holds it all, the
// next large body waits the body timeout and is refused with 429, small
// bodies pass, and once the first ends the next large one is served.
func TestBodyMemory_LargeBodiesWaitForTheBudget(t *testing.T) {
	t.Parallel()
	post, held, release := bodyServer(t, 4<<20)
	// 100 KiB of numbers, a tree of about 4.5 MB, counts as the whole
	// budget.
	first := make(chan int, 1)
	go func() { code, _ := post("/test/hold", numbers(100<<10)); first <- code }()
	waitHeld(t, held)
	if code, raw := post("/test/read", numbers(100<<10)); code != 429 || !strings.Contains(raw, codeTooManyLargeRequests) {
		t.Errorf("a large body while the budget is spent: %d %s", code, raw)
	}
	if code, raw := post("/test/read", numbers(10<<10)); code != 200 {
		t.Errorf("a small body while the budget is spent: %d %s", code, raw)
	}
	close(release)
	if code := <-first; code != 200 {
		t.Errorf("the first large body: %d", code)
	}
	if code, raw := post("/test/read", numbers(100<<10)); code != 200 {
		t.Errorf("a large body once the budget is back: %d %s", code, raw)
	}
}

// A body is charged what its parsed values cost, not a multiple of its
// bytes: a 256 KiB string builds almost nothing and leaves room in a 16 MiB
// budget for another, where 256 KiB of numbers, a tree of 12 MB counted
// twice, takes the whole budget. Counted at 52 times their size, as
// before, both took 13 MB, and the second string waited and was refused.
func TestBodyMemory_ChargedByWhatTheValuesCost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, first string
		want        int
	}{
		{"after a body of one string", text(256 << 10), 200},
		{"after a body of numbers", numbers(256 << 10), 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			post, held, release := bodyServer(t, 16<<20)
			first := make(chan int, 1)
			go func() { code, _ := post("/test/hold", tt.first); first <- code }()
			waitHeld(t, held)
			code, raw := post("/test/read", text(256<<10))
			close(release)
			if code != tt.want {
				t.Errorf("a 256 KiB string: %d %s, want %d", code, raw, tt.want)
			}
			if code := <-first; code != 200 {
				t.Errorf("the first body: %d", code)
			}
		})
	}
}
