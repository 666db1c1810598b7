package auth

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// newRefreshService is a Service on a database of the test's own, with a
// key, whose clock the test moves through *now.
func newRefreshService(t *testing.T, maxAge time.Duration) (*Service, string, *time.Time) {
	t.Helper()
	d, err := db.Open(context.Background(), dbtest.NewDatabase(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	key, err := CreateKey(context.Background(), d, "refresher", "", AllSuppliers())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s := New(d, []byte("0123456789abcdef0123456789abcdef")).WithSessionMaxAge(maxAge).WithClock(func() time.Time { return now })
	return s, key, &now
}

func refusedCode(err error) string {
	if p, ok := problem.As(err); ok {
		return p.Code
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// A refresh token copied by an attacker used to work for ever beside the
// client's own. Now each is exchanged once; the second exchange of one is
// refused and revokes the whole chain, so the successor issued by the first
// exchange is refused too, and the client must present its key again.
func TestRefresh_ReusedTokenIsRefusedAndRevokesItsChain(t *testing.T) {
	t.Parallel()
	s, key, _ := newRefreshService(t, DefaultSessionMaxAge)
	ctx := context.Background()
	first, err := s.TokenFromKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.TokenFromRefresh(ctx, first.RefreshToken)
	if err != nil {
		t.Fatalf("first exchange: %v", err)
	}
	_, err = s.TokenFromRefresh(ctx, first.RefreshToken)
	if diff := cmp.Diff(CodeInvalidRefreshToken, refusedCode(err)); diff != "" {
		t.Errorf("second exchange of one token (-want +got):\n%s", diff)
	}
	_, err = s.TokenFromRefresh(ctx, second.RefreshToken)
	if diff := cmp.Diff(CodeInvalidRefreshToken, refusedCode(err)); diff != "" {
		t.Errorf("successor after the reuse (-want +got):\n%s", diff)
	}
	// The key starts a new chain, untouched by the revoked one.
	fresh, err := s.TokenFromKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TokenFromRefresh(ctx, fresh.RefreshToken); err != nil {
		t.Errorf("a new chain after the revocation: %v", err)
	}
}

// A chain of refreshes went on for ever, each token renewing the next. Now
// the chain ends SESSION_MAX_AGE after the key's token request: refresh
// tokens expire no later than that, and none is exchanged after it.
func TestRefresh_SessionEndsAtItsMaximumAge(t *testing.T) {
	t.Parallel()
	const maxAge = 10 * 24 * time.Hour
	s, key, now := newRefreshService(t, maxAge)
	start := *now
	ctx := context.Background()
	pair, err := s.TokenFromKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// Refresh every 5 days (within the 7-day lifetime of each token).
	*now = start.Add(5 * 24 * time.Hour)
	if pair, err = s.TokenFromRefresh(ctx, pair.RefreshToken); err != nil {
		t.Fatalf("refresh within the session: %v", err)
	}
	if diff := cmp.Diff(start.Add(maxAge).Unix(), pair.RefreshExpiresIn); diff != "" {
		t.Errorf("refreshExpiresIn is not cut at the session's end (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(start.Unix(), pair.Payload["origIat"]); diff != "" {
		t.Errorf("origIat (-want +got):\n%s", diff)
	}
	*now = start.Add(maxAge)
	_, err = s.TokenFromRefresh(ctx, pair.RefreshToken)
	if diff := cmp.Diff(CodeInvalidRefreshToken, refusedCode(err)); diff != "" {
		t.Errorf("refresh at the session's end (-want +got):\n%s", diff)
	}
	// A token whose signature outlives the session (issued before the cap
	// was lowered) is refused by the session's start in the database.
	short := s.WithSessionMaxAge(time.Hour)
	*now = start.Add(5*24*time.Hour + time.Minute)
	_, err = short.TokenFromRefresh(ctx, pair.RefreshToken)
	if diff := cmp.Diff(CodeInvalidRefreshToken, refusedCode(err)); diff != "" {
		t.Errorf("refresh past a lowered cap (-want +got):\n%s", diff)
	}
}

// An access token obtained before its refresh chain was revoked kept
// working until it expired, up to TOKEN_TTL after the revocation. Access
// tokens now carry their session, and a revoked session refuses them: on
// the replica that revoked it at once, and on another, which caches
// principals and sessions, as soon as the revocation's NOTIFY arrives.
func TestRefresh_RevokedChainRefusesItsAccessTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewDatabase(t)
	d, err := db.Open(ctx, url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	key, err := CreateKey(ctx, d, "chain", "", AllSuppliers())
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	revoker := New(d, secret)
	// other is another replica: it listens for revocations and caches.
	other := New(d, secret)
	lctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	if err := other.Listen(lctx, url, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	first, err := revoker.TokenFromKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	second, err := revoker.TokenFromRefresh(ctx, first.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	unrelated, err := revoker.TokenFromKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{first.Token, second.Token, unrelated.Token} {
		for _, s := range []*Service{revoker, other} {
			if _, err := s.Authenticate(ctx, tok); err != nil {
				t.Fatalf("before the revocation: %v", err)
			}
		}
	}
	// The first refresh token, used again, revokes its chain.
	if _, err := revoker.TokenFromRefresh(ctx, first.RefreshToken); refusedCode(err) != CodeInvalidRefreshToken {
		t.Fatalf("reuse: %v", err)
	}
	for _, tok := range []string{first.Token, second.Token} {
		if _, err := revoker.Authenticate(ctx, tok); refusedCode(err) != CodeAuthenticationFailed {
			t.Errorf("an access token of the revoked chain on the revoking replica: %v, want %s", err, CodeAuthenticationFailed)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := other.Authenticate(ctx, tok)
			if refusedCode(err) == CodeAuthenticationFailed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("an access token of the revoked chain on another replica: %v after 20 s", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, s := range []*Service{revoker, other} {
		if _, err := s.Authenticate(ctx, unrelated.Token); err != nil {
			t.Errorf("a token of another chain of the key: %v", err)
		}
	}
}
