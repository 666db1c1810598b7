package auth

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lib/pq"
)

// keysChannel is the PostgreSQL NOTIFY channel on which a key's change
// (revocation) is announced, with the key id as payload, and a refresh
// session's revocation, with sessionNotice and the session id.
const keysChannel = "importd_api_keys"

// sessionNotice prefixes the payload of a session's revocation.
const sessionNotice = "session:"

// principalTTL bounds how long a cached principal is trusted. Revocations
// arrive by NOTIFY within milliseconds; the TTL is the backstop should a
// notification be lost in a way the listener did not notice.
const principalTTL = 5 * time.Second

// principalCache keeps the principals of recently seen keys, so that an
// authenticated request does not need a database round trip. It is only
// used while the NOTIFY listener is connected: while it is not, a
// revocation could go unheard, so every request reads the key again.
type principalCache struct {
	live atomic.Bool
	mu   sync.RWMutex
	m    map[int64]cachedPrincipal
	// sessions holds whether recently seen refresh sessions are revoked,
	// for the access tokens they issued (Service.sessionRevoked), under
	// the same rules: evicted by NOTIFY, trusted for principalTTL.
	sessions map[int64]cachedSession
	// gen counts evictions. A principal read from the database is cached only
	// if no eviction happened since the read began: otherwise a revocation
	// that landed between the read and the put would be undone for a TTL.
	gen uint64
}

type cachedPrincipal struct {
	p  Principal
	at time.Time
}

type cachedSession struct {
	revoked bool
	at      time.Time
}

// getSession returns whether the session id is revoked, if known.
func (c *principalCache) getSession(id int64, now time.Time) (revoked, ok bool) {
	if !c.live.Load() {
		return false, false
	}
	c.mu.RLock()
	e, ok := c.sessions[id]
	c.mu.RUnlock()
	if !ok || now.Sub(e.at) > principalTTL {
		return false, false
	}
	return e.revoked, true
}

// putSession caches the state of session id read at at, unless an
// eviction happened since generation returned gen.
func (c *principalCache) putSession(id int64, revoked bool, at time.Time, gen uint64) {
	if !c.live.Load() {
		return
	}
	c.mu.Lock()
	if c.gen == gen {
		if c.sessions == nil || len(c.sessions) >= maxCachedSessions {
			c.sessions = map[int64]cachedSession{}
		}
		c.sessions[id] = cachedSession{revoked: revoked, at: at}
	}
	c.mu.Unlock()
}

// maxCachedSessions bounds the session cache; when full it starts over.
const maxCachedSessions = 10_000

func (c *principalCache) evictSession(id int64) {
	c.mu.Lock()
	delete(c.sessions, id)
	c.gen++
	c.mu.Unlock()
}

func (c *principalCache) get(id int64, now time.Time) (Principal, bool) {
	if !c.live.Load() {
		return Principal{}, false
	}
	c.mu.RLock()
	e, ok := c.m[id]
	c.mu.RUnlock()
	if !ok || now.Sub(e.at) > principalTTL {
		return Principal{}, false
	}
	return e.p, true
}

// generation returns the eviction count, to pass to put.
func (c *principalCache) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

func (c *principalCache) put(p Principal, at time.Time, gen uint64) {
	if !c.live.Load() {
		return
	}
	c.mu.Lock()
	if c.gen == gen {
		c.m[p.KeyID] = cachedPrincipal{p: p, at: at}
	}
	c.mu.Unlock()
}

func (c *principalCache) evict(id int64) {
	c.mu.Lock()
	delete(c.m, id)
	c.gen++
	c.mu.Unlock()
}

func (c *principalCache) reset(live bool) {
	c.mu.Lock()
	c.m = map[int64]cachedPrincipal{}
	c.sessions = map[int64]cachedSession{}
	c.gen++
	c.live.Store(live)
	c.mu.Unlock()
}

// Listen turns on the principal cache and keeps it in step with revocations
// made anywhere (another replica, importctl) by listening for their
// NOTIFY on a connection of its own, until ctx is done. log reports the
// listener's disconnections; it must not be nil.
func (s *Service) Listen(ctx context.Context, databaseURL string, log *slog.Logger) error {
	if log == nil {
		panic("auth.Listen: nil *slog.Logger")
	}
	l := pq.NewListener(databaseURL, 100*time.Millisecond, 5*time.Second, func(ev pq.ListenerEventType, err error) {
		switch ev {
		case pq.ListenerEventConnected, pq.ListenerEventReconnected:
			// Anything may have been revoked while we were not listening.
			s.cache.reset(true)
		default:
			s.cache.reset(false)
			if err != nil {
				log.Warn("api key listener disconnected; reading keys on every request", "error", err)
			}
		}
	})
	if err := l.Listen(keysChannel); err != nil {
		l.Close()
		return err
	}
	s.cache.reset(true)
	go func() {
		defer l.Close()
		ping := time.NewTicker(30 * time.Second)
		defer ping.Stop()
		for {
			select {
			case <-ctx.Done():
				s.cache.reset(false)
				return
			case n := <-l.Notify:
				if n == nil { // reconnected: the event callback reset the cache
					continue
				}
				if rest, ok := strings.CutPrefix(n.Extra, sessionNotice); ok {
					if id, err := strconv.ParseInt(rest, 10, 64); err == nil {
						s.cache.evictSession(id)
						continue
					}
				}
				if id, err := strconv.ParseInt(n.Extra, 10, 64); err == nil {
					s.cache.evict(id)
				} else {
					s.cache.reset(true)
				}
			case <-ping.C:
				// Ping finds a dead connection that TCP alone would not report.
				_ = l.Ping()
			}
		}
	}()
	return nil
}
