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

// in returns query prepared on the connection of tx, for use inside tx.
func (s *Statements) in(ctx context.Context, tx *sqlx.Tx, query string) (*sqlx.Stmt, error) {
	st, err := s.get(ctx, query)
	if err != nil {
		return nil, err
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
