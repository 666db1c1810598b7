package auth

import (
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// verifiedTokens remembers the claims of access tokens whose signature has
// been checked, so that a client sending the same token with every request
// (for up to its 60 minutes) costs a map lookup rather than a signature check
// and a JSON decode each time. It holds no decision about the key: that
// comes from the principal cache or the database on every request, so a
// revocation takes effect as before. Expiry is checked on every use.
//
// When full it drops the least recently used token, so the clients that are
// busy keep their entries while a burst of one-off tokens passes through.
type verifiedTokens struct {
	lru *expirable.LRU[string, *claims]
}

// maxVerifiedTokens bounds the memory; a token dropped when the cache is
// full costs its client one more verification.
const maxVerifiedTokens = 10_000

func newVerifiedTokens() *verifiedTokens {
	// No access token outlives AccessTTL, so an entry older than that can
	// only be refused; the LRU drops it in the background rather than keeping
	// it until it is pushed out.
	return newVerifiedTokensSized(maxVerifiedTokens, AccessTTL)
}

func newVerifiedTokensSized(size int, ttl time.Duration) *verifiedTokens {
	return &verifiedTokens{lru: expirable.NewLRU[string, *claims](size, nil, ttl)}
}

// get returns the claims of token if it was verified and has not expired at
// now. The LRU's own time-to-live runs on the wall clock; the token's expiry
// is checked against now, the Service's clock.
func (v *verifiedTokens) get(token string, now time.Time) (*claims, bool) {
	c, ok := v.lru.Get(token)
	if !ok || c.ExpiresAt == nil || !now.Before(c.ExpiresAt.Time) {
		return nil, false
	}
	return c, true
}

func (v *verifiedTokens) put(token string, c *claims) {
	v.lru.Add(token, c)
}
