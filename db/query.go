package db

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"
)

// DB is the service's pool of PostgreSQL connections. It is the one way
// to run a query: its query methods (GetContext, SelectContext,
// ExecContext, QueryContext, QueryxContext, QueryRowxContext) run each
// statement prepared, by its text, and BeginTxx starts a Tx whose query
// methods do the same. No caller chooses whether a statement is prepared.
//
// Why prepared: lib/pq sends a query with arguments as two round trips
// (parse and describe, then bind and execute) and PostgreSQL plans it
// afresh each time; a prepared statement costs one round trip and no
// planning. database/sql prepares a pool statement on each connection the
// first time it runs there and keeps it for the connection's life.
//
// The embedded *sqlx.DB is the pool itself, for wiring (its *sql.DB for
// migrations and statistics) and for tests; its methods without a context
// (Get, Exec, Select, MustExec) run unprepared. Its Close closes the pool:
// the statements prepared on its connections end with them. DB is safe for
// concurrent use.
type DB struct {
	*sqlx.DB
	stmts *statements
}

// MaxStatements bounds how many query texts a DB keeps prepared. The
// service runs a fixed set of texts: about a hundred call sites, the few
// that build their text choosing among a handful of fragments (a filter, a
// column name), never putting a value in it. The bound is there so that a
// text built with a value in it by mistake cannot grow the cache, on each
// pooled connection of PostgreSQL as well as here, without end. Texts
// beyond it run unprepared, and StatementStats counts them.
const MaxStatements = 512

// New returns d as a DB, with an empty cache of prepared statements.
// Open returns one; New is for a pool opened another way (tests that
// count round trips, tools).
func New(d *sqlx.DB) *DB {
	return &DB{DB: d, stmts: newStatements(d, MaxStatements)}
}

// StatementStats are the figures of a DB's prepared statements.
type StatementStats struct {
	// Prepared is how many query texts are held prepared.
	Prepared int
	// Unprepared counts the statements that ran unprepared: their text
	// came when MaxStatements were held already, PostgreSQL refused to
	// prepare it (a text of several statements), or preparing it on the
	// pool failed (PostgreSQL out of reach).
	Unprepared int64
}

// StatementStats returns the figures of d's prepared statements. (Stats,
// the embedded pool's, are its connections'.)
func (d *DB) StatementStats() StatementStats {
	d.stmts.mu.RLock()
	defer d.stmts.mu.RUnlock()
	return StatementStats{Prepared: len(d.stmts.m), Unprepared: d.stmts.unprepared.Load()}
}

// Prepare prepares queries on the pool now, so that a transaction that
// runs them later finds them ready. Call it before a transaction begins,
// on a hot path: preparing on the pool takes a connection of its own, and
// a transaction that waited for one while holding another would deadlock
// a pool that every transaction holds (Tx never does; see Tx). It returns
// the first failure to prepare, PostgreSQL being out of reach for example.
func (d *DB) Prepare(ctx context.Context, queries ...string) error {
	for _, q := range queries {
		e, err := d.stmts.get(ctx, q)
		if err != nil {
			return err
		}
		d.stmts.release(e)
	}
	return nil
}

// ExecContext runs query, prepared, with args.
func (d *DB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return onPool(ctx, d, query,
		func(st *sqlx.Stmt) (sql.Result, error) { return st.ExecContext(ctx, args...) },
		func() (sql.Result, error) { return d.DB.ExecContext(ctx, query, args...) })
}

// QueryContext runs query, prepared, with args.
func (d *DB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return onPool(ctx, d, query,
		func(st *sqlx.Stmt) (*sql.Rows, error) { return st.QueryContext(ctx, args...) },
		func() (*sql.Rows, error) { return d.DB.QueryContext(ctx, query, args...) })
}

// QueryxContext runs query, prepared, with args.
func (d *DB) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	return onPool(ctx, d, query,
		func(st *sqlx.Stmt) (*sqlx.Rows, error) { return st.QueryxContext(ctx, args...) },
		func() (*sqlx.Rows, error) { return d.DB.QueryxContext(ctx, query, args...) })
}

// QueryRowxContext runs query, prepared, with args; the Row reports any
// failure when scanned.
func (d *DB) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	row, _ := onPool(ctx, d, query,
		func(st *sqlx.Stmt) (*sqlx.Row, error) { r := st.QueryRowxContext(ctx, args...); return r, r.Err() },
		func() (*sqlx.Row, error) { r := d.DB.QueryRowxContext(ctx, query, args...); return r, r.Err() })
	return row
}

// GetContext reads the one row of query, prepared, into dest, as
// sqlx.GetContext does; when there is none, the error is ErrNotFound
// (errNoRows).
func (d *DB) GetContext(ctx context.Context, dest any, query string, args ...any) error {
	return noRowsAsNotFound(sqlx.GetContext(ctx, d, dest, query, args...))
}

// SelectContext reads the rows of query, prepared, into the slice dest, as
// sqlx.SelectContext does.
func (d *DB) SelectContext(ctx context.Context, dest any, query string, args ...any) error {
	return sqlx.SelectContext(ctx, d, dest, query, args...)
}

// SelectPlannedForArgs reads the rows of query into dest, as SelectContext
// does, but never prepared: PostgreSQL plans it for args at each call. It
// is for a query whose best plan depends on its values (a filter that
// matches most rows or none), which a prepared statement would run on its
// cached generic plan, made without them, after its fifth execution. Its
// planning is paid on every call, so it is not for hot paths.
func (d *DB) SelectPlannedForArgs(ctx context.Context, dest any, query string, args ...any) error {
	return d.DB.SelectContext(ctx, dest, query, args...)
}

// BeginTxx begins a transaction whose query methods run their statements
// prepared (see Tx).
func (d *DB) BeginTxx(ctx context.Context, opts *sql.TxOptions) (*Tx, error) {
	tx, err := d.DB.BeginTxx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Tx{Tx: tx, stmts: d.stmts}, nil
}

// Tx is a transaction of a DB whose query methods run each statement
// prepared, as DB's do. It never waits for a second pool connection: a
// text that the pool has not prepared yet is prepared on the
// transaction's own connection, for the transaction alone, and on the pool
// in the background, so that the next transactions find it (DB.Prepare
// readies texts ahead). A text runs prepared at most once per transaction.
//
// The embedded *sqlx.Tx is the transaction itself: Commit and Rollback are
// its own, and its methods without a context run unprepared.
type Tx struct {
	*sqlx.Tx
	stmts *statements
	mu    sync.Mutex
	m     map[string]*sqlx.Stmt // this transaction's statements, by text
}

// ExecContext runs query, prepared, with args.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return inTx(ctx, t, query,
		func(st *sqlx.Stmt) (sql.Result, error) { return st.ExecContext(ctx, args...) },
		func() (sql.Result, error) { return t.Tx.ExecContext(ctx, query, args...) })
}

// QueryContext runs query, prepared, with args.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return inTx(ctx, t, query,
		func(st *sqlx.Stmt) (*sql.Rows, error) { return st.QueryContext(ctx, args...) },
		func() (*sql.Rows, error) { return t.Tx.QueryContext(ctx, query, args...) })
}

// QueryxContext runs query, prepared, with args.
func (t *Tx) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	return inTx(ctx, t, query,
		func(st *sqlx.Stmt) (*sqlx.Rows, error) { return st.QueryxContext(ctx, args...) },
		func() (*sqlx.Rows, error) { return t.Tx.QueryxContext(ctx, query, args...) })
}

// QueryRowxContext runs query, prepared, with args; the Row reports any
// failure when scanned. A *sqlx.Row cannot be made to carry an error, so
// when the preparation fails the query runs unprepared, and its Row
// reports that the transaction is aborted.
func (t *Tx) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	row, _ := inTx(ctx, t, query,
		func(st *sqlx.Stmt) (*sqlx.Row, error) { r := st.QueryRowxContext(ctx, args...); return r, r.Err() },
		func() (*sqlx.Row, error) { r := t.Tx.QueryRowxContext(ctx, query, args...); return r, r.Err() })
	if row == nil { // the preparation failed
		return t.Tx.QueryRowxContext(ctx, query, args...)
	}
	return row
}

// GetContext reads the one row of query, prepared, into dest, as
// sqlx.GetContext does; when there is none, the error is ErrNotFound
// (errNoRows).
func (t *Tx) GetContext(ctx context.Context, dest any, query string, args ...any) error {
	return noRowsAsNotFound(sqlx.GetContext(ctx, t, dest, query, args...))
}

// errNoRows is the error of a GetContext that found no row: ErrNotFound,
// the one "no such row" the domain branches on, and also sql.ErrNoRows,
// so that code written against database/sql keeps its meaning.
var errNoRows error = noRows{}

type noRows struct{}

func (noRows) Error() string { return "not found: " + sql.ErrNoRows.Error() }

// Is makes errors.Is find both ErrNotFound and sql.ErrNoRows in it.
func (noRows) Is(target error) bool { return target == ErrNotFound || target == sql.ErrNoRows }

func noRowsAsNotFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return errNoRows
	}
	return err
}

// SelectContext reads the rows of query, prepared, into the slice dest, as
// sqlx.SelectContext does.
func (t *Tx) SelectContext(ctx context.Context, dest any, query string, args ...any) error {
	return sqlx.SelectContext(ctx, t, dest, query, args...)
}

// onPool runs query on the pool with its prepared statement (prepared), or
// unprepared (plain) when the text is not held prepared. A statement whose
// cached plan went stale is prepared again and run once more: PostgreSQL
// refuses it before executing anything, so the second run cannot repeat
// an effect.
func onPool[T any](ctx context.Context, d *DB, query string, prepared func(*sqlx.Stmt) (T, error), plain func() (T, error)) (T, error) {
	e, _ := d.stmts.get(ctx, query) // a failure to prepare: plain reports it
	if e == nil || e.st == nil {
		d.stmts.unprepared.Add(1)
		return plain()
	}
	v, err := prepared(e.st)
	if staleResultType(err) {
		d.stmts.evict(query, e)
		d.stmts.release(e)
		if e, _ = d.stmts.get(ctx, query); e == nil || e.st == nil {
			d.stmts.unprepared.Add(1)
			return plain()
		}
		v, err = prepared(e.st)
	}
	d.stmts.release(e)
	return v, err
}

// inTx runs query inside t with its prepared statement, or unprepared
// (plain) when the text is not to be held prepared. A statement whose
// cached plan went stale has aborted the transaction, which the caller
// rolls back; it is dropped, here and on the pool, so that the
// transaction's retry and every later one prepare it afresh. A failure to
// prepare is returned as it is: it has aborted the transaction too, so
// running the text unprepared could only report that.
func inTx[T any](ctx context.Context, t *Tx, query string, prepared func(*sqlx.Stmt) (T, error), plain func() (T, error)) (T, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		var zero T
		return zero, err
	}
	if st == nil {
		t.stmts.unprepared.Add(1)
		return plain()
	}
	v, err := prepared(st)
	if staleResultType(err) {
		t.mu.Lock()
		delete(t.m, query)
		t.mu.Unlock()
		t.stmts.evictText(query)
	}
	return v, err
}

// stmt returns query prepared for t, or nil to run it unprepared.
func (t *Tx) stmt(ctx context.Context, query string) (*sqlx.Stmt, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st, ok := t.m[query]; ok {
		return st, nil
	}
	var st *sqlx.Stmt
	if e := t.stmts.acquire(query); e != nil {
		if e.st == nil {
			t.stmts.release(e)
			return nil, nil
		}
		// The pool's statement, prepared on this connection unless it is
		// already; database/sql keeps it there for the connection's life,
		// and a Close of the pool's statement waits for the transaction.
		st = t.Tx.StmtxContext(ctx, e.st)
		t.stmts.release(e)
	} else {
		if !t.stmts.prepareInBackground(query) {
			return nil, nil // MaxStatements are held
		}
		var err error
		if st, err = t.Tx.PreparexContext(ctx, query); err != nil {
			return nil, err
		}
	}
	if t.m == nil {
		t.m = map[string]*sqlx.Stmt{}
	}
	t.m[query] = st
	return st, nil
}

// staleResultType reports whether err is PostgreSQL refusing a prepared
// statement whose result columns changed since it was prepared (a
// migration altered a table that it reads with *, for example). Any other
// change of the schema is planned anew without an error.
func staleResultType(err error) bool {
	pe := pq.As(err, pqerror.FeatureNotSupported)
	return pe != nil && strings.Contains(pe.Message, "cached plan must not change result type")
}

// refusedToPrepare reports whether err is PostgreSQL refusing to prepare a
// text that it would run unprepared: several statements in one text,
// which lib/pq sends as a simple query when it has no arguments.
func refusedToPrepare(err error) bool {
	pe := pq.As(err, pqerror.SyntaxError)
	return pe != nil && strings.Contains(pe.Message, "multiple commands")
}

// statements are a pool's prepared statements, by text. The lock is never
// held while preparing, which waits for a pool connection.
type statements struct {
	pool       *sqlx.DB
	max        int
	mu         sync.RWMutex
	m          map[string]*entry
	pending    map[string]bool // being prepared in the background (Tx.stmt)
	unprepared atomic.Int64
}

// entry is a text held prepared. Its statement is closed once it is
// dropped (evict) and no caller holds it (users).
type entry struct {
	st      *sqlx.Stmt // nil: PostgreSQL refused to prepare the text
	users   atomic.Int64
	evicted atomic.Bool
	once    sync.Once
}

// close closes e's statement in the background: database/sql closes it on
// each connection that holds it, and waits for a connection that is
// running a query, perhaps one blocked on a lock for as long as another
// transaction holds it, which no caller should wait for.
func (e *entry) close() {
	e.once.Do(func() {
		if e.st != nil {
			go e.st.Close()
		}
	})
}

func newStatements(d *sqlx.DB, max int) *statements {
	return &statements{pool: d, max: max, m: map[string]*entry{}, pending: map[string]bool{}}
}

// acquire returns the entry of query, held until release, or nil.
func (s *statements) acquire(query string) *entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.m[query]
	if e != nil {
		e.users.Add(1)
	}
	return e
}

func (s *statements) release(e *entry) {
	if e != nil && e.users.Add(-1) == 0 && e.evicted.Load() {
		e.close()
	}
}

// get returns the entry of query, preparing it on the pool if need be,
// held until release; nil when MaxStatements are held. A failed
// preparation is not remembered, so that a database that was down at the
// first call does not break later ones, unless PostgreSQL refused the text
// itself.
func (s *statements) get(ctx context.Context, query string) (*entry, error) {
	if e := s.acquire(query); e != nil {
		return e, nil
	}
	if s.full() {
		return nil, nil
	}
	st, err := s.pool.PreparexContext(ctx, query)
	if err != nil && !refusedToPrepare(err) {
		return nil, err
	}
	e := &entry{st: st}
	e.users.Store(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.m[query]; ok { // prepared meanwhile by another caller
		e.close()
		prev.users.Add(1)
		return prev, nil
	}
	if len(s.m) >= s.max {
		e.close()
		return nil, nil
	}
	s.m[query] = e
	return e, nil
}

func (s *statements) full() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m) >= s.max
}

// backgroundPrepare bounds a preparation that a transaction starts on the
// pool.
const backgroundPrepare = time.Minute

// prepareInBackground starts preparing query on the pool unless that is
// under way already, and reports whether query is to be prepared: false
// when MaxStatements are held.
func (s *statements) prepareInBackground(query string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		return false
	}
	if s.pending[query] {
		return true
	}
	s.pending[query] = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), backgroundPrepare)
		defer cancel()
		e, _ := s.get(ctx, query)
		s.release(e)
		s.mu.Lock()
		delete(s.pending, query)
		s.mu.Unlock()
	}()
	return true
}

// evict drops e, the entry of query; its statement is closed once no
// caller holds it.
func (s *statements) evict(query string, e *entry) {
	s.mu.Lock()
	if s.m[query] == e {
		delete(s.m, query)
	}
	s.mu.Unlock()
	e.evicted.Store(true)
	if e.users.Load() == 0 {
		e.close()
	}
}

// evictText drops the entry of query, if any.
func (s *statements) evictText(query string) {
	if e := s.acquire(query); e != nil {
		s.evict(query, e)
		s.release(e)
	}
}
