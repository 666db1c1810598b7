package process

import (
	"context"
	"fmt"
	"sync"

	"github.com/jmoiron/sqlx"
)

// Statements prepares E5's statements once per pool and hands them out. A
// statement without a prepared form costs lib/pq two round trips (parse and
// describe, then bind and execute); a prepared one costs one. database/sql
// prepares a pool statement again on each connection the first time it runs
// there, and keeps it for the connection's life. It is safe for concurrent
// use.
type Statements struct {
	db *sqlx.DB
	mu sync.Mutex
	m  map[string]*sqlx.Stmt
}

// NewStatements returns the statements of pool d, prepared as they are first
// used.
func NewStatements(d *sqlx.DB) *Statements {
	return &Statements{db: d, m: map[string]*sqlx.Stmt{}}
}

// get returns query prepared on the pool. A failed preparation is not
// remembered: the next call tries again.
func (s *Statements) get(ctx context.Context, query string) (*sqlx.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.m[query]; ok {
		return st, nil
	}
	st, err := s.db.PreparexContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	s.m[query] = st
	return st, nil
}

// prepare prepares queries on the pool, so that in finds them. Call it
// before a transaction begins: preparing on the pool takes a connection of
// its own, and a transaction that waited for one while holding another
// would deadlock a pool that every transaction holds.
func (s *Statements) prepare(ctx context.Context, queries ...string) error {
	for _, q := range queries {
		if _, err := s.get(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// in returns query prepared on the connection of tx, for use inside tx. A
// query that prepare has not seen is prepared for tx alone, on tx's own
// connection, never by waiting for another (see prepare).
func (s *Statements) in(ctx context.Context, tx *sqlx.Tx, query string) (*sqlx.Stmt, error) {
	s.mu.Lock()
	st, ok := s.m[query]
	s.mu.Unlock()
	if !ok {
		return tx.PreparexContext(ctx, query)
	}
	return tx.StmtxContext(ctx, st), nil
}

// Close releases the prepared statements.
func (s *Statements) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for q, st := range s.m {
		_ = st.Close()
		delete(s.m, q)
	}
	return nil
}
