package db

import "github.com/jmoiron/sqlx"

// NewBounded returns d as a DB that holds at most max texts prepared.
func NewBounded(d *sqlx.DB, max int) *DB {
	return &DB{DB: d, stmts: newStatements(d, max)}
}

// Held reports whether d holds query prepared on the pool.
func (d *DB) Held(query string) bool {
	e := d.stmts.acquire(query)
	defer d.stmts.release(e)
	return e != nil && e.st != nil
}
