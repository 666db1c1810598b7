package account

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/bulkimport/bulkimport/db"
	"github.com/lib/pq"
)

// SupplyTypeCatalog answers which supply types exist: the catalogue of
// table supply_types, the five types of spec 2.2.4 and those the operator
// added (importctl supply-type add). Errors are infrastructure failures.
type SupplyTypeCatalog interface {
	// UnknownSupplyTypes returns those of codes that are not in the
	// catalogue, in the order asked.
	UnknownSupplyTypes(ctx context.Context, codes []string) ([]string, error)
}

// NewSupplyTypeCatalog returns a SupplyTypeCatalog backed by PostgreSQL
// that remembers the types it has found. Types are never removed, so a
// known type stays known and a payload of known types costs no query; an
// unknown one is asked about again each time, so that a type the operator
// has just added is accepted at once, on every replica.
func NewSupplyTypeCatalog(d *db.DB) SupplyTypeCatalog {
	return &supplyTypes{db: d, known: map[string]bool{}}
}

type supplyTypes struct {
	db    *db.DB
	mu    sync.Mutex
	known map[string]bool
}

func (s *supplyTypes) UnknownSupplyTypes(ctx context.Context, codes []string) ([]string, error) {
	s.mu.Lock()
	var ask []string
	for _, c := range codes {
		if !s.known[c] && !slices.Contains(ask, c) {
			ask = append(ask, c)
		}
	}
	s.mu.Unlock()
	if len(ask) == 0 {
		return nil, nil
	}
	var found []string
	if err := s.db.SelectContext(ctx, &found, `SELECT code FROM supply_types WHERE code = ANY($1::text[])`, pq.Array(ask)); err != nil {
		return nil, fmt.Errorf("query supply types: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range found {
		s.known[c] = true
	}
	var unknown []string
	for _, c := range ask {
		if !s.known[c] {
			unknown = append(unknown, c)
		}
	}
	return unknown, nil
}
