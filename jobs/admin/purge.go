package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/status"
)

// PurgeStaged blanks the staged payloads (the account data as E4 received
// it: names, dates of birth, e-mail addresses, phone numbers, addresses) of
// the supplier's COMPLETED accounts and returns how many it blanked. The
// created accounts are the record from then on; a COMPLETED payload is
// never read again (E4 refuses to restage it, the worker does not
// re-validate it), so nothing the service answers changes. Payloads of
// accounts not yet created are kept: they are what E5 creates from.
//
// It is meant for a closed migration: while the supplier is Ongoing it is
// refused (import_supplier_migration_ongoing) unless force, so that data a
// team may still compare its runs against is not lost by mistake. Running it
// again purges only what completed since.
func PurgeStaged(ctx context.Context, d *db.DB, code string, force bool) (int64, error) {
	var state string
	err := d.GetContext(ctx, &state, `SELECT status FROM import_suppliers WHERE code = $1`, code)
	if errors.Is(err, db.ErrNotFound) {
		return 0, problem.Invalidf("import_supplier_not_found", "code", "Supplier %s does not exist.", code)
	}
	if err != nil {
		return 0, fmt.Errorf("purge staged: %w", err)
	}
	if state == status.Ongoing && !force {
		return 0, problem.Invalidf("import_supplier_migration_ongoing", "code",
			"Supplier %s is Ongoing: set it Complete (or Paused) when its migration is closed, or force the purge.", code)
	}
	res, err := d.ExecContext(ctx, `
		UPDATE import_processes p SET payload = '{}'::jsonb, updated_at = now()
		FROM import_suppliers s
		WHERE s.code = $1 AND p.supplier_id = s.id
		  AND p.status = '`+status.Completed+`' AND p.service_account_number IS NOT NULL AND p.payload <> '{}'::jsonb`, code)
	if err != nil {
		return 0, fmt.Errorf("purge staged: %w", err)
	}
	return res.RowsAffected()
}
