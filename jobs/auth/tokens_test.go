package auth

import (
	"context"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// A remembered token is served until its expiry and never after it, and a
// refresh token is never taken for an access token.
func TestVerifiedTokens_ExpireAndKeepTheirKind(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := New(nil, []byte("0123456789abcdef0123456789abcdef")).WithClock(func() time.Time { return start })
	pair, err := s.issue(1, "k", start, 0, "r1", start.Add(RefreshTTL))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.parse(pair.Token, "access")
	if err != nil {
		t.Fatal(err)
	}
	s.tokens.put(pair.Token, c)
	if _, ok := s.tokens.get(pair.Token, start.Add(59*time.Minute)); !ok {
		t.Fatal("a verified token was not remembered")
	}
	if _, ok := s.tokens.get(pair.Token, start.Add(60*time.Minute)); ok {
		t.Fatal("a remembered token was served at its expiry")
	}
	// Past the expiry Authenticate verifies again, and refuses, before any
	// key lookup (this Service has no database).
	_, err = s.WithClock(func() time.Time { return start.Add(61 * time.Minute) }).Authenticate(context.Background(), pair.Token)
	if p, ok := problem.As(err); !ok || p.Code != CodeAuthenticationFailed || p.Detail != "The token has expired; obtain a new one." {
		t.Fatalf("expired remembered token: %v", err)
	}
	// A refresh token is never remembered as an access token.
	if _, err := s.WithClock(func() time.Time { return start }).Authenticate(context.Background(), pair.RefreshToken); err == nil {
		t.Fatal("a refresh token authenticated a request")
	}
	if _, ok := s.tokens.get(pair.RefreshToken, start); ok {
		t.Fatal("a refresh token was remembered")
	}
}

func TestVerifiedTokens_BoundedMemory(t *testing.T) {
	t.Parallel()
	v := newVerifiedTokens()
	for i := range maxVerifiedTokens + 5 {
		v.put(string(rune(i))+"-token", &claims{})
	}
	if n := v.lru.Len(); n > maxVerifiedTokens {
		t.Fatalf("%d tokens remembered, bound is %d", n, maxVerifiedTokens)
	}
}

// When full, the cache drops the token used least recently, not all of them:
// a client that keeps sending its token keeps it cached.
func TestVerifiedTokens_FullDropsTheLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	now := time.Now()
	live := &claims{}
	live.ExpiresAt = jwt.NewNumericDate(now.Add(time.Hour))
	v := newVerifiedTokensSized(2, time.Hour)
	v.put("a", live)
	v.put("b", live)
	if _, ok := v.get("a", now); !ok { // a is now the most recently used
		t.Fatal("a was not remembered")
	}
	v.put("c", live)
	got := map[string]bool{}
	for _, tok := range []string{"a", "b", "c"} {
		_, got[tok] = v.get(tok, now)
	}
	if diff := cmp.Diff(map[string]bool{"a": true, "b": false, "c": true}, got); diff != "" {
		t.Errorf("remembered tokens after a third put into a cache of two (-want +got):\n%s", diff)
	}
}

// An entry is dropped after the cache's time-to-live even while the token
// itself is still valid.
func TestVerifiedTokens_EntriesExpireAfterTheirTimeToLive(t *testing.T) {
	t.Parallel()
	live := &claims{}
	live.ExpiresAt = jwt.NewNumericDate(time.Now().Add(time.Hour))
	v := newVerifiedTokensSized(10, 20*time.Millisecond)
	v.put("a", live)
	if _, ok := v.get("a", time.Now()); !ok {
		t.Fatal("a verified token was not remembered")
	}
	time.Sleep(60 * time.Millisecond)
	if _, ok := v.get("a", time.Now()); ok {
		t.Fatal("a token was served from the cache past the cache's time-to-live")
	}
}
