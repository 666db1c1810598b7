// Package db is the PostgreSQL system of record: the pool (DB, the one way
// to run a query, which prepares every statement by its text), the embedded
// goose migrations, and storage errors translated into sentinels that the
// domain can test for.
package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the embedded migration files, for tools that need them.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the folder exists
	}
	return sub
}

// ErrNotFound is the storage outcome "no such row", for the domain to
// branch on.
var ErrNotFound = errors.New("not found")

// Open connects to PostgreSQL and checks the connection. The pool size is
// bounded because every API replica and worker shares one server.
func Open(ctx context.Context, url string, maxConns int) (*DB, error) {
	d, err := sqlx.Open("postgres", url)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if maxConns <= 0 {
		maxConns = 20
	}
	d.SetMaxOpenConns(maxConns)
	d.SetMaxIdleConns(maxConns)
	d.SetConnMaxIdleTime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.PingContext(pctx); err != nil {
		d.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return New(d), nil
}

func provider(d *sql.DB) (*goose.Provider, error) {
	// Several replicas may start at once with --migrate; the session advisory
	// lock makes them apply the migrations one after the other. The period is
	// short because a waiting replica otherwise sleeps 5 s per try.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectPostgres, d, Migrations(), goose.WithSessionLocker(locker))
}

// Migrate applies every pending migration and returns how many it applied.
func Migrate(ctx context.Context, d *sql.DB) (int, error) {
	p, err := provider(d)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	return len(res), nil
}

// ErrSchemaOutdated is returned by CheckSchema when migrations are pending.
var ErrSchemaOutdated = errors.New("database schema is out of date")

// CheckSchema returns ErrSchemaOutdated (wrapped, with both versions) when the
// database lacks migrations that this binary carries.
func CheckSchema(ctx context.Context, d *sql.DB) error {
	p, err := goose.NewProvider(goose.DialectPostgres, d, Migrations())
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	current, target, err := p.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if current < target {
		return fmt.Errorf("%w: database at version %d, binary needs %d", ErrSchemaOutdated, current, target)
	}
	return nil
}

// IsUniqueViolation reports whether err is, or wraps, a PostgreSQL unique
// violation, on the named constraint or index when constraint is not empty.
// It is the one place that reads the driver's error: domain packages ask it
// rather than inspect codes. It is a predicate, not a sentinel error
// (ErrDuplicate), because callers branch on which constraint refused the row,
// and they hold the driver's error straight from sqlx, with no layer in
// between to translate it.
func IsUniqueViolation(err error, constraint string) bool {
	pe := pq.As(err, pqerror.UniqueViolation)
	return pe != nil && (constraint == "" || pe.Constraint == constraint)
}

// UniqueViolationDetail returns the DETAIL of the unique violation err is,
// or wraps, on the named constraint, and whether err is one. A trigger that
// raises a unique violation of its own puts in DETAIL what the caller needs
// to explain the refusal.
func UniqueViolationDetail(err error, constraint string) (string, bool) {
	pe := pq.As(err, pqerror.UniqueViolation)
	if pe == nil || pe.Constraint != constraint {
		return "", false
	}
	return pe.Detail, true
}

// IsNumericOverflow reports whether err is, or wraps, PostgreSQL's
// numeric_value_out_of_range: a value, or a sum, beyond what its numeric
// column holds.
func IsNumericOverflow(err error) bool {
	return pq.As(err, pqerror.NumericValueOutOfRange) != nil
}

// IsCheckViolation reports whether err is, or wraps, PostgreSQL's refusal
// of a row by the named CHECK constraint.
func IsCheckViolation(err error, constraint string) bool {
	pe := pq.As(err, pqerror.CheckViolation)
	return pe != nil && pe.Constraint == constraint
}

// IsUnavailable reports whether err is, or wraps, PostgreSQL being out of
// reach rather than refusing the statement: a connection refused or broken
// (closed between two messages too, which the driver reads as io.EOF), or
// the server shutting down or starting up (SQLSTATE class 08 and 57P01
// to 57P03), as while it restarts. Such a failure passes without the caller
// changing anything, so the API answers it as a service failure to retry,
// not as an unexpected error.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if pe := pq.As(err); pe != nil {
		return pe.Code.Class() == pqerror.ClassConnectionException ||
			slices.Contains([]pqerror.Code{pqerror.AdminShutdown, pqerror.CrashShutdown, pqerror.CannotConnectNow}, pe.Code)
	}
	// An outgoing HTTP call (a payment vendor) fails with the same network
	// errors; it is not the database out of reach.
	var ue *url.Error
	if errors.As(err, &ue) {
		return false
	}
	var ne *net.OpError
	return errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// InTx runs fn in a transaction of d (a Tx, which runs its statements
// prepared), committing when fn returns nil and rolling back otherwise.
func InTx(ctx context.Context, d *DB, fn func(tx *Tx) error) error {
	tx, err := d.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
