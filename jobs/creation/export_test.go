package creation

import (
	"context"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/account"
)

// CreateAccount writes a validated account and everything in it inside tx,
// as the worker writes one account alone, and records its process (opt.ProcessID) as
// COMPLETED with the new number. The caller commits or rolls back. It
// returns a *problem.Error of Kind Invalid when the catalogue changed since
// validation (a tariff or contract disappeared); what was written is then
// for the caller to roll back.
func CreateAccount(ctx context.Context, tx *db.Tx, acc *account.Account, opt options) (created, error) {
	cs, errs, err := createAccounts(ctx, tx, []toCreate{{acc, opt}}, newServiceAccountNumber)
	if err != nil {
		return created{CreatedAt: createdAt(opt)}, err
	}
	return cs[0], errs[0]
}
