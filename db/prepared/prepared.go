// Package prepared keeps a pool's statements prepared once and hands them
// out by their text. A statement without a prepared form costs lib/pq two
// round trips (parse and describe, then bind and execute) and a fresh plan;
// a prepared one costs one round trip. database/sql prepares a pool
// statement again on each connection the first time it runs there, and
// keeps it for the connection's life.
package prepared

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// Statements are the statements of one pool, prepared as they are first
// used. It is safe for concurrent use.
type Statements struct {
	db      *sqlx.DB
	mu      sync.Mutex
	m       map[string]*sqlx.Stmt
	pending map[string]bool // being prepared on the pool in the background (In)
}

// New returns the statements of pool d.
func New(d *sqlx.DB) *Statements {
	return &Statements{db: d, m: map[string]*sqlx.Stmt{}, pending: map[string]bool{}}
}

func (s *Statements) lookup(query string) (*sqlx.Stmt, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[query]
	return st, ok
}

// Get returns query prepared on the pool. A failed preparation is not
// remembered, so a database that was down at the first call does not break
// later ones. The lock is not held while preparing, which waits for a pool
// connection: callers of In must never wait behind it.
func (s *Statements) Get(ctx context.Context, query string) (*sqlx.Stmt, error) {
	if st, ok := s.lookup(query); ok {
		return st, nil
	}
	st, err := s.db.PreparexContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.m[query]; ok { // prepared meanwhile by another caller
		_ = st.Close()
		return prev, nil
	}
	s.m[query] = st
	return st, nil
}

// Prepare prepares queries on the pool, so that In finds them. Call it
// before a transaction begins: preparing on the pool takes a connection of
// its own, and a transaction that waited for one while holding another
// would deadlock a pool that every transaction holds.
func (s *Statements) Prepare(ctx context.Context, queries ...string) error {
	for _, q := range queries {
		if _, err := s.Get(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// backgroundPrepare bounds a preparation that In starts on the pool.
const backgroundPrepare = time.Minute

// In returns query prepared for use inside tx. A query that Get or Prepare
// has not seen is prepared for tx alone, on tx's own connection, never by
// waiting for another (see Prepare), and on the pool in the background, so
// that the next transactions find it.
func (s *Statements) In(ctx context.Context, tx *sqlx.Tx, query string) (*sqlx.Stmt, error) {
	s.mu.Lock()
	st, ok := s.m[query]
	start := !ok && !s.pending[query]
	if start {
		s.pending[query] = true
	}
	s.mu.Unlock()
	if start {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), backgroundPrepare)
			defer cancel()
			_, _ = s.Get(ctx, query)
			s.mu.Lock()
			delete(s.pending, query)
			s.mu.Unlock()
		}()
	}
	if !ok {
		return tx.PreparexContext(ctx, query)
	}
	return tx.StmtxContext(ctx, st), nil
}

// QueryRowxContext runs query prepared on the pool, outside any
// transaction. A *sqlx.Row cannot be made to carry an error, so when the
// preparation fails the query runs unprepared, and its Row reports the
// failure.
func (s *Statements) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	st, err := s.Get(ctx, query)
	if err != nil {
		return s.db.QueryRowxContext(ctx, query, args...)
	}
	return st.QueryRowxContext(ctx, args...)
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
