package process

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/bulkimport/bulkimport/db/prepared"
)

// Statements are E5's statements, prepared once per pool (db/prepared):
// every task runs the same few. It is safe for concurrent use.
type Statements struct{ *prepared.Statements }

// NewStatements returns the statements of pool d, prepared as they are first
// used.
func NewStatements(d *sqlx.DB) *Statements {
	return &Statements{prepared.New(d)}
}

// in is prepared.Statements.In: query prepared for use inside tx.
func (s *Statements) in(ctx context.Context, tx *sqlx.Tx, query string) (*sqlx.Stmt, error) {
	return s.In(ctx, tx, query)
}
