package admin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

func supplierID(ctx context.Context, q sqlx.QueryerContext, code string) (int64, error) {
	var id int64
	err := sqlx.GetContext(ctx, q, &id, `SELECT id FROM import_suppliers WHERE code = $1`, code)
	if err != nil {
		return 0, problem.Invalidf("import_supplier_not_found", "supplier", "Supplier %s does not exist.", code)
	}
	return id, nil
}

// SkipAccount marks an account to be left out of the migration: staging it
// is refused until it is unskipped. Marking twice is not an error.
func SkipAccount(ctx context.Context, d *db.DB, supplier, externalAccountNumber string) error {
	id, err := supplierID(ctx, d, supplier)
	if err != nil {
		return err
	}
	if strings.TrimSpace(externalAccountNumber) == "" {
		return problem.Invalidf("blank", "external_account_number", "The external account number may not be blank.")
	}
	_, err = d.ExecContext(ctx, `INSERT INTO skipped_accounts (supplier_id, external_account_number) VALUES ($1, $2) ON CONFLICT DO NOTHING`, id, externalAccountNumber)
	if err != nil {
		return fmt.Errorf("skip account: %w", err)
	}
	return nil
}

// UnskipAccount removes a skip mark. Removing a mark that is not there is an
// error, so that a typo in the account number does not pass unnoticed.
func UnskipAccount(ctx context.Context, d *db.DB, supplier, externalAccountNumber string) error {
	id, err := supplierID(ctx, d, supplier)
	if err != nil {
		return err
	}
	res, err := d.ExecContext(ctx, `DELETE FROM skipped_accounts WHERE supplier_id = $1 AND external_account_number = $2`, id, externalAccountNumber)
	if err != nil {
		return fmt.Errorf("unskip account: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return problem.Invalidf("not_found", "external_account_number", "Account %s of supplier %s is not marked to be skipped.", externalAccountNumber, supplier)
	}
	return nil
}

// Skipped is one skip mark, for listings.
type Skipped struct {
	Supplier              string    `db:"supplier" json:"supplier"`
	ExternalAccountNumber string    `db:"external_account_number" json:"external_account_number"`
	CreatedAt             time.Time `db:"created_at" json:"created_at"`
}

// ListSkipped returns the skip marks of a supplier.
func ListSkipped(ctx context.Context, d *db.DB, supplier string) ([]Skipped, error) {
	id, err := supplierID(ctx, d, supplier)
	if err != nil {
		return nil, err
	}
	out := []Skipped{}
	err = d.SelectContext(ctx, &out, `SELECT $2::text AS supplier, external_account_number, created_at FROM skipped_accounts WHERE supplier_id = $1 ORDER BY external_account_number`, id, supplier)
	if err != nil {
		return nil, fmt.Errorf("list skipped: %w", err)
	}
	return out, nil
}
