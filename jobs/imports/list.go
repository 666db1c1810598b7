package imports

import (
	"context"
	"database/sql"
	"fmt"
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

// fetchSize is how many rows each page of a list reads. It bounds memory:
// the list is never held whole, whatever its length.
const fetchSize = 1000

// datetimeLayout is the spec's datetime form.
const datetimeLayout = "2006-01-02T15:04:05Z"

// List calls emit for each process of the supplier in the order of external
// account numbers. It reads them a page of fetchSize at a time by keyset
// (the external account numbers after the last one emitted), each page in
// a query of its own whose connection goes back to the pool before any of
// its items is emitted: emit writes to the client, and a client that reads
// slowly must not hold a database connection. A server-side cursor in one
// transaction did: 40 slow readers held 20 of 20 connections idle in
// transaction, and another supplier's client got no answer. So a list is not
// one snapshot: an account staged meanwhile after the page being written
// appears in it. An error from emit stops the listing and is returned.
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
	q := `SELECT external_account_number, service_account_number, account_created_at
		FROM import_processes
		WHERE supplier_id = $1 AND external_account_number > $2` + cond + `
		ORDER BY external_account_number LIMIT $3`
	after, left := page.After, page.Limit
	for {
		n := fetchSize
		if page.Limit > 0 {
			n = min(n, left)
		}
		items, err := s.listPage(ctx, q, id, after, n)
		if err != nil {
			return err
		}
		for _, it := range items {
			if err := emit(it); err != nil {
				return err
			}
		}
		if len(items) < n {
			return nil
		}
		after = items[len(items)-1].ExternalAccountNumber
		if page.Limit > 0 {
			if left -= len(items); left == 0 {
				return nil
			}
		}
	}
}

// listPage reads one page of a list, whole, so that its connection is back
// in the pool when List emits it.
func (s *Service) listPage(ctx context.Context, q string, supplierID int64, after string, n int) ([]Item, error) {
	rows, err := s.db.QueryContext(ctx, q, supplierID, after, n)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	defer rows.Close()
	items := make([]Item, 0, n)
	for rows.Next() {
		var it Item
		var number sql.NullString
		var created sql.NullTime
		if err := rows.Scan(&it.ExternalAccountNumber, &number, &created); err != nil {
			return nil, fmt.Errorf("list: scan: %w", err)
		}
		if number.Valid {
			it.ServiceAccountNumber = &number.String
		}
		if created.Valid {
			ts := created.Time.UTC().Format(datetimeLayout)
			it.AccountCreatedAt = &ts
		}
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	return items, nil
}
