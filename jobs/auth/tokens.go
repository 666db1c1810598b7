package auth

import (
	"sync"
	"time"
)

// verifiedTokens remembers the claims of access tokens whose signature has
// been checked, so that a client sending the same token with every request
// (for up to its 60 minutes) costs a map lookup rather than a signature check
// and a JSON decode each time. It holds no decision about the key: that
// comes from the principal cache or the database on every request, so a
// revocation takes effect as before. Expiry is checked on every use.
type verifiedTokens struct {
	mu sync.RWMutex
	m  map[string]*claims
}

// maxVerifiedTokens bounds the memory: when full, the map starts afresh,
// which costs each client one more verification.
const maxVerifiedTokens = 10_000

func newVerifiedTokens() *verifiedTokens {
	return &verifiedTokens{m: make(map[string]*claims)}
}

// get returns the claims of token if it was verified and has not expired at now.
func (v *verifiedTokens) get(token string, now time.Time) (*claims, bool) {
	v.mu.RLock()
	c, ok := v.m[token]
	v.mu.RUnlock()
	if !ok || c.ExpiresAt == nil || !now.Before(c.ExpiresAt.Time) {
		return nil, false
	}
	return c, true
}

func (v *verifiedTokens) put(token string, c *claims) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.m) >= maxVerifiedTokens {
		v.m = make(map[string]*claims)
	}
	v.m[token] = c
}
