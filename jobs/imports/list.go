package imports

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Which selects the import processes a list covers.
type Which int

// The lists of E11, E12 and E13.
const (
	All      Which = iota // E11: pending and imported
	Pending               // E12: staged, no account yet
	Imported              // E13: account created
)

// Item is one entry of a list. Pending processes have nil for the last two.
type Item struct {
	ExternalAccountNumber string  `json:"external_account_number" db:"external_account_number"`
	ServiceAccountNumber  *string `json:"service_account_number" db:"service_account_number"`
	AccountCreatedAt      *string `json:"account_created_at" db:"-"`
}

// Page is the optional paging of lists, an addition to the spec: items after
// the external account number After, at most Limit of them (0: no limit).
type Page struct {
	After string
	Limit int
}

// MaxPageLimit bounds ?limit=.
const MaxPageLimit = 10000

// fetchSize is how many rows each FETCH from the cursor brings. It bounds
// memory: the list is never held whole, whatever its length.
const fetchSize = 1000

// listIdleTimeout is the longest the listing's transaction may stay idle
// between statements: well above the API's per-write deadline, so that it
// only ends a session whose caller is stuck.
const listIdleTimeout = "2min"

// datetimeLayout is the spec's datetime form.
const datetimeLayout = "2006-01-02T15:04:05Z"

// List calls emit for each process of the supplier in the order of external
// account numbers. It reads them through a server-side cursor, so a supplier
// with millions of accounts is listed with flat memory. An error from emit
// stops the listing and is returned.
func (s *Service) List(ctx context.Context, supplier string, which Which, page Page, visible func(string) bool, emit func(Item) error) error {
	id, err := s.supplierID(ctx, supplier, visible)
	if err != nil {
		return err
	}
	cond := ""
	switch which {
	case Pending:
		cond = " AND service_account_number IS NULL"
	case Imported:
		cond = " AND service_account_number IS NOT NULL"
	}
	limit := "ALL"
	if page.Limit > 0 {
		limit = fmt.Sprint(page.Limit)
	}
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only; closing the cursor is all it does
	// The transaction is idle while rows are written to the client. The API
	// bounds each write, but should a caller ever block between FETCHes for
	// longer, PostgreSQL ends the session rather than leave a pooled
	// connection idle in transaction (a client that stopped reading once held
	// every connection of the pool this way).
	if _, err := tx.ExecContext(ctx, "SET LOCAL idle_in_transaction_session_timeout = '"+listIdleTimeout+"'"); err != nil {
		return fmt.Errorf("list: %w", err)
	}
	_, err = tx.ExecContext(ctx, `DECLARE processes NO SCROLL CURSOR FOR
		SELECT external_account_number, service_account_number, account_created_at
		FROM import_processes
		WHERE supplier_id = $1 AND external_account_number > $2`+cond+`
		ORDER BY external_account_number LIMIT `+limit, id, page.After)
	if err != nil {
		return fmt.Errorf("list: declare: %w", err)
	}
	for {
		n, err := fetch(ctx, tx, emit)
		if err != nil {
			return err
		}
		if n < fetchSize {
			return nil
		}
	}
}

func fetch(ctx context.Context, tx *sqlx.Tx, emit func(Item) error) (int, error) {
	rows, err := tx.QueryContext(ctx, fmt.Sprintf("FETCH %d FROM processes", fetchSize))
	if err != nil {
		return 0, fmt.Errorf("list: fetch: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var it Item
		var number sql.NullString
		var created sql.NullTime
		if err := rows.Scan(&it.ExternalAccountNumber, &number, &created); err != nil {
			return n, fmt.Errorf("list: scan: %w", err)
		}
		if number.Valid {
			it.ServiceAccountNumber = &number.String
		}
		if created.Valid {
			ts := created.Time.UTC().Format(datetimeLayout)
			it.AccountCreatedAt = &ts
		}
		n++
		if err := emit(it); err != nil {
			return n, err
		}
	}
	return n, rows.Err()
}
