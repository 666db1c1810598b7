package auth

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

// Attempts sent at once made the limit ask Redis as many times at once, and
// every answer slower than its timeout let its attempt through: over HTTP,
// 1,000 wrong keys sent at once from one address on a loaded machine had
// 427 to 698 checked. One address now has at most the limit's worth of
// checks in flight on a replica, whatever Redis answers; the others are
// refused at once without asking it. Redis is unreachable here, the
// slowest answer of all: every admitted attempt is let through, and the
// checks are held until the refusals are counted.
func TestFailureLimiter_ChecksInFlightFromOneAddressAreAtMostTheLimit(t *testing.T) {
	t.Parallel()
	const limit, n = 5, 100
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer rc.Close()
	l := NewFailureLimiter(rc, limit, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := WithClientAddr(context.Background(), "203.0.113.9")
	other := WithClientAddr(context.Background(), "198.51.100.9")

	var entered atomic.Int64
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	defer release() // a failed test does not leave the checks waiting
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := l.CheckLogin(ctx, fmt.Sprintf("ops:guess-%d", i), func() bool { entered.Add(1); <-hold; return false })
			code := refusedCode(err)
			if err == nil && !ok {
				code = "wrong"
			}
			mu.Lock()
			got[code]++
			mu.Unlock()
		}()
	}
	close(start)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		refused := got[CodeTooManyFailedAttempts]
		mu.Unlock()
		if refused == n-limit && entered.Load() == limit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d checks running, %d refused; want %d and %d", entered.Load(), refused, limit, n-limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Another address is not held up by them.
	if ok, err := l.CheckLogin(other, "ops:right", func() bool { return true }); !ok || err != nil {
		t.Errorf("the right login from another address: %v %v", ok, err)
	}
	release()
	wg.Wait()
	if diff := cmp.Diff(map[string]int{"wrong": limit, CodeTooManyFailedAttempts: n - limit}, got); diff != "" {
		t.Errorf("%d wrong logins at once with Redis unreachable (-want +got):\n%s", n, diff)
	}
	if c := entered.Load(); c != limit {
		t.Errorf("%d wrong logins were checked, want %d", c, limit)
	}
	// The count in flight is given back: the address's next check runs.
	if ok, err := l.CheckLogin(ctx, "ops:right", func() bool { return true }); !ok || err != nil {
		t.Errorf("the right login after them, with Redis unreachable: %v %v", ok, err)
	}
}
