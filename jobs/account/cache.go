package account

import (
	"context"
	"sync"
	"time"

	"github.com/bulkimport/bulkimport/db"
)

// CatalogCache remembers catalogue answers that stay true, so that a
// validation whose supplier, tariffs and contract were all seen recently
// needs no database round trip. One CatalogCache is shared by all requests;
// View gives each caller its own visibility.
//
// Only positive answers are kept: a tariff or contract created a moment ago
// must not be reported missing because an older "no" was remembered. A
// supplier is kept for the TTL, so a change of its status or country shows
// within that time; code that must act on the current status (staging
// refuses a Paused supplier) reads it again in its own transaction. What is
// kept is bounded by the catalogue itself, never by what callers send.
type CatalogCache struct {
	inner BatchCatalog // sees every supplier; visibility is applied by views
	ttl   time.Duration
	now   func() time.Time

	mu        sync.RWMutex
	suppliers map[string]cachedSupplier
	tariffs   map[string]time.Time // code -> when it was seen to exist
	contracts map[contractKey]time.Time
}

type cachedSupplier struct {
	s  Supplier
	at time.Time
}

type contractKey struct {
	supplierID int64
	identifier string
}

// NewCatalogCache returns a cache over the PostgreSQL catalogue. ttl is how
// long an answer is trusted; zero or less disables caching (every view asks
// the database).
func NewCatalogCache(d *db.DB, ttl time.Duration) *CatalogCache {
	return newCatalogCache(NewCatalog(d, nil).(BatchCatalog), ttl)
}

func newCatalogCache(inner BatchCatalog, ttl time.Duration) *CatalogCache {
	return &CatalogCache{
		inner:     inner,
		ttl:       ttl,
		now:       time.Now,
		suppliers: map[string]cachedSupplier{},
		tariffs:   map[string]time.Time{},
		contracts: map[contractKey]time.Time{},
	}
}

// View returns a Catalog for one caller: visible, when non-nil, limits which
// supplier codes exist for it, exactly as with NewCatalog.
func (c *CatalogCache) View(visible func(code string) bool) Catalog {
	return cacheView{c: c, visible: visible}
}

type cacheView struct {
	c       *CatalogCache
	visible func(string) bool
}

func (v cacheView) isVisible(code string) bool { return v.visible == nil || v.visible(code) }

func (v cacheView) Supplier(ctx context.Context, code string) (Supplier, bool, error) {
	l, err := v.Lookup(ctx, code, nil, "")
	return l.Supplier, l.SupplierFound, err
}

func (v cacheView) MissingTariffs(ctx context.Context, codes []string) ([]string, error) {
	l, err := v.Lookup(ctx, "", codes, "")
	return l.MissingTariffs, err
}

func (v cacheView) ContractExists(ctx context.Context, supplierID int64, identifier string) (bool, error) {
	c := v.c
	if c.fresh(c.contractSeen(contractKey{supplierID, identifier})) {
		return true, nil
	}
	ok, err := c.inner.ContractExists(ctx, supplierID, identifier)
	if ok && err == nil {
		c.mu.Lock()
		c.contracts[contractKey{supplierID, identifier}] = c.now()
		c.mu.Unlock()
	}
	return ok, err
}

func (c *CatalogCache) fresh(at time.Time) bool {
	return c.ttl > 0 && !at.IsZero() && c.now().Sub(at) < c.ttl
}

func (c *CatalogCache) contractSeen(k contractKey) time.Time {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.contracts[k]
}

// Lookup answers from the cache when it can answer everything, and
// otherwise asks the database the whole question in one round trip.
func (v cacheView) Lookup(ctx context.Context, code string, tariffs []string, contract string) (Lookup, error) {
	c := v.c
	if !v.isVisible(code) {
		code = ""
	}
	if l, ok := c.cached(code, tariffs, contract); ok {
		return l, nil
	}
	l, err := c.inner.Lookup(ctx, code, tariffs, contract)
	if err != nil {
		return l, err
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.SupplierFound {
		c.suppliers[code] = cachedSupplier{l.Supplier, now}
		if l.ContractExists {
			c.contracts[contractKey{l.Supplier.ID, contract}] = now
		}
	}
	for _, t := range tariffs {
		c.tariffs[t] = now
	}
	for _, t := range l.MissingTariffs {
		delete(c.tariffs, t)
	}
	return l, nil
}

// cached returns the answer when every part of it is known and fresh.
func (c *CatalogCache) cached(code string, tariffs []string, contract string) (Lookup, bool) {
	var l Lookup
	c.mu.RLock()
	defer c.mu.RUnlock()
	if code != "" {
		s, ok := c.suppliers[code]
		if !ok || !c.fresh(s.at) {
			return l, false
		}
		l.Supplier, l.SupplierFound = s.s, true
	}
	for _, t := range tariffs {
		if !c.fresh(c.tariffs[t]) {
			return l, false
		}
	}
	if contract != "" && l.SupplierFound {
		if !c.fresh(c.contracts[contractKey{l.Supplier.ID, contract}]) {
			return l, false
		}
		l.ContractExists = true
	}
	return l, true
}
