package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// An address is counted on its own for IPv4 and by its /64 for IPv6, so that
// a client cannot spread its guesses over the addresses of its network.
func TestAddrGroup_IPv6CountsByItsSlash64(t *testing.T) {
	t.Parallel()
	tests := []struct{ addr, want string }{
		{"203.0.113.7", "203.0.113.7"},
		{"::ffff:203.0.113.7", "203.0.113.7"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"not an address", "not an address"},
	}
	for _, tc := range tests {
		if got := addrGroup(tc.addr); got != tc.want {
			t.Errorf("addrGroup(%q) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// Authentication does not depend on Redis: with Redis unreachable the
// limit lets attempts through and says so in the log.
func TestFailureLimiter_RedisDownLetsAttemptsThrough(t *testing.T) {
	t.Parallel()
	ctx := WithClientAddr(context.Background(), "203.0.113.7")
	d := dbtest.New(t)
	key, err := CreateKey(ctx, d, "k", "", AllSuppliers())
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer rc.Close()
	var logs bytes.Buffer
	s := New(d, []byte(headerTestSecret)).WithFailureLimiter(NewFailureLimiter(rc, 1, time.Minute, slog.New(slog.NewTextHandler(&logs, nil))))
	for range 2 {
		if _, err := s.TokenFromKey(ctx, badKeyFor(key)); refusedCode(err) != CodeInvalidAPIKey {
			t.Fatalf("bad key with Redis down: %v, want %s", err, CodeInvalidAPIKey)
		}
	}
	if _, err := s.TokenFromKey(ctx, key); err != nil {
		t.Fatalf("good key with Redis down: %v", err)
	}
	if !strings.Contains(logs.String(), "redis did not answer") {
		t.Errorf("log does not report Redis: %q", logs.String())
	}
}

// badKeyFor is key with its last character changed.
func badKeyFor(key string) string {
	last := "A"
	if strings.HasSuffix(key, "A") {
		last = "B"
	}
	return key[:len(key)-1] + last
}

// newLimitedService is a Service on a database and a Redis database of the
// test's own, with a failure limit of limit per window.
func newLimitedService(t *testing.T, limit int) (*Service, *FailureLimiter, string) {
	t.Helper()
	d := dbtest.New(t)
	key, err := CreateKey(context.Background(), d, "k", "", AllSuppliers())
	if err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	l := NewFailureLimiter(rc, limit, 10*time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	// A Redis call that takes longer lets its attempt through, by design;
	// hundreds at once under -race on a loaded machine may.
	l.timeout = 30 * time.Second
	return New(d, []byte(headerTestSecret)).WithFailureLimiter(l), l, key
}

// atOnce runs f(i) for i in [0, n) in n goroutines released together, and
// returns the codes of their errors ("" for none), counted.
func atOnce(n int, f func(i int) error) map[string]int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]int{}
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			code := refusedCode(f(i))
			mu.Lock()
			got[code]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return got
}

// Wrong credentials sent at once once all passed the check of the count
// before any of them was counted: 1,000 wrong keys sent together had 954
// checked against a limit of 20. The count is now spent before the check, in
// one atomic step, so at most the limit are checked, and the others are
// refused with 429 without being looked at.
func TestFailureLimiter_AttemptsSentAtOnceAreCheckedAtMostTheLimit(t *testing.T) {
	t.Parallel()
	const limit, n = 20, 300
	ctx := WithClientAddr(context.Background(), "203.0.113.7")
	t.Run("API keys", func(t *testing.T) {
		t.Parallel()
		s, _, key := newLimitedService(t, limit)
		got := atOnce(n, func(i int) error {
			_, err := s.TokenFromKey(ctx, fmt.Sprintf("bik_%08dxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", i))
			return err
		})
		want := map[string]int{CodeInvalidAPIKey: limit, CodeTooManyFailedAttempts: n - limit}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%d wrong keys at once (-want +got):\n%s", n, diff)
		}
		if _, err := s.TokenFromKey(ctx, key); refusedCode(err) != CodeTooManyFailedAttempts {
			t.Errorf("the right key after them: %v, want %s", err, CodeTooManyFailedAttempts)
		}
	})
	t.Run("logins", func(t *testing.T) {
		t.Parallel()
		_, l, _ := newLimitedService(t, limit)
		var checked atomic.Int64
		got := atOnce(n, func(i int) error {
			ok, err := l.CheckLogin(ctx, fmt.Sprintf("ops:guess-%d", i), func() bool { checked.Add(1); return false })
			if err == nil && !ok {
				return problem.New(problem.Unauthenticated, CodeAuthenticationFailed, "wrong")
			}
			return err
		})
		if c := checked.Load(); c != limit {
			t.Errorf("%d of %d wrong logins at once were checked, want %d", c, n, limit)
		}
		want := map[string]int{CodeAuthenticationFailed: limit, CodeTooManyFailedAttempts: n - limit}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%d wrong logins at once (-want +got):\n%s", n, diff)
		}
	})
}

// Spending the count before the check must not slow a client that
// authenticates well: its successes give back what they spent, and many
// requests at once with one new credential share one check, so they are
// not refused for having more checks in flight than the limit.
func TestFailureLimiter_SuccessesAtOnceAreNeverRefused(t *testing.T) {
	t.Parallel()
	const limit = 3
	ctx := WithClientAddr(context.Background(), "203.0.113.8")
	s, l, key := newLimitedService(t, limit)
	for round := range 3 {
		got := atOnce(64, func(int) error { _, err := s.AuthenticateKey(ctx, key); return err })
		if diff := cmp.Diff(map[string]int{"": 64}, got); diff != "" {
			t.Fatalf("round %d: 64 requests with the right key at once (-want +got):\n%s", round, diff)
		}
		got = atOnce(64, func(int) error {
			ok, err := l.CheckLogin(ctx, "ops:right", func() bool { return true })
			if err == nil && !ok {
				return errors.New("refused")
			}
			return err
		})
		if diff := cmp.Diff(map[string]int{"": 64}, got); diff != "" {
			t.Fatalf("round %d: 64 right logins at once (-want +got):\n%s", round, diff)
		}
	}
	// Nothing was left counted: the limit's failures are all still there.
	for i := range limit {
		if _, err := s.TokenFromKey(ctx, badKeyFor(key)+fmt.Sprint(i)); refusedCode(err) != CodeInvalidAPIKey {
			t.Fatalf("failure %d after the successes: %v, want %s", i+1, err, CodeInvalidAPIKey)
		}
	}
	if _, err := s.TokenFromKey(ctx, key); refusedCode(err) != CodeTooManyFailedAttempts {
		t.Errorf("after the limit's failures: %v, want %s", err, CodeTooManyFailedAttempts)
	}
}
