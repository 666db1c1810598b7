package auth

import (
	"testing"
	"time"
)

func TestCache_PutAfterAnEvictionIsDropped(t *testing.T) {
	t.Parallel()
	c := &principalCache{m: map[int64]cachedPrincipal{}}
	c.reset(true)
	now := time.Now()
	gen := c.generation() // a request starts reading key 1 from the database
	c.evict(1)            // the key is revoked meanwhile
	c.put(Principal{KeyID: 1}, now, gen)
	if _, ok := c.get(1, now); ok {
		t.Fatal("a principal read before a revocation was cached after it")
	}
	c.put(Principal{KeyID: 1}, now, c.generation())
	if _, ok := c.get(1, now); !ok {
		t.Fatal("a fresh principal was not cached")
	}
	if _, ok := c.get(1, now.Add(principalTTL+time.Second)); ok {
		t.Fatal("a principal older than the TTL was served")
	}
}

func TestCache_OffWhileTheListenerIsDown(t *testing.T) {
	t.Parallel()
	c := &principalCache{m: map[int64]cachedPrincipal{}}
	c.reset(true)
	now := time.Now()
	c.put(Principal{KeyID: 7}, now, c.generation())
	c.reset(false) // the listener lost its connection
	if _, ok := c.get(7, now); ok {
		t.Fatal("served from the cache while revocations could go unheard")
	}
	c.put(Principal{KeyID: 7}, now, c.generation())
	if _, ok := c.get(7, now); ok {
		t.Fatal("cached while the listener is down")
	}
}
