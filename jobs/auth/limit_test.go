package auth

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db/dbtest"
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
