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

// Parsed request bodies had no budget but the key's 64 requests in flight:
// 16 E3 bodies of 2 MB held 1.75 GB at once, and one key could hold about
// 6.7 GB. Bodies over LargeBody are now charged to the replica's budget
// (Config.BodyMemory) until their request ends: while one holds it all, the
// next large body waits the body timeout and is refused with 429, small
// bodies pass, and once the first ends the next large one is served.
func TestBodyMemory_LargeBodiesWaitForTheBudget(t *testing.T) {
	t.Parallel()
	s := New(Config{BodyMemory: 4 << 20, BodyReadTimeout: 300 * time.Millisecond}, Deps{Log: slog.New(slog.DiscardHandler)})
	held, release := make(chan struct{}, 1), make(chan struct{})
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
	defer srv.Close()
	post := func(path string, size int) (int, string) {
		body := `{"x":"` + strings.Repeat("a", size) + `"}`
		res, err := http.Post(srv.URL+path, "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(raw)
	}
	// 100 KiB counts as 5.2 MB: the whole budget.
	first := make(chan int, 1)
	go func() { code, _ := post("/test/hold", 100<<10); first <- code }()
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the first large body was not served")
	}
	if code, raw := post("/test/read", 100<<10); code != 429 || !strings.Contains(raw, codeTooManyLargeRequests) {
		t.Errorf("a large body while the budget is spent: %d %s", code, raw)
	}
	if code, raw := post("/test/read", 10<<10); code != 200 {
		t.Errorf("a small body while the budget is spent: %d %s", code, raw)
	}
	close(release)
	if code := <-first; code != 200 {
		t.Errorf("the first large body: %d", code)
	}
	if code, raw := post("/test/read", 100<<10); code != 200 {
		t.Errorf("a large body once the budget is back: %d %s", code, raw)
	}
}
