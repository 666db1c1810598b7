package process

import (
	"github.com/jmoiron/sqlx"

	"github.com/bulkimport/bulkimport/db/prepared"
)

// Statements are E5's statements, prepared once per pool (db/prepared):
// every task runs the same few. It is safe for concurrent use.
type Statements = prepared.Statements

// NewStatements returns the statements of pool d, prepared as they are first
// used.
func NewStatements(d *sqlx.DB) *Statements { return prepared.New(d) }
