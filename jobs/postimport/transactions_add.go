package postimport

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/problem"
	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// CreateTransactions is E7: it adds the posted transactions to the account
// and its ledger balance, all or none, in one database transaction. query
// holds the options (check_previously_added, force_add_to_current_statement).
//
// Errors: *problem.Error of Kind Invalid (400) in E7's form (see
// TransactionsFailure), or NotFound (404, account_not_found) when the
// account is not an imported account the caller may see.
func (s *Service) CreateTransactions(ctx context.Context, body []byte, query url.Values, visible func(string) bool) (*TransactionsResult, error) {
	now := s.now().UTC()
	var errs problem.List
	opts := parseOptions(query, &errs)
	var today v.Date
	r, err := parseTransactions(ctx, body, func(supplier string) v.Date {
		today = s.zones.today(ctx, supplier, now)
		return today
	}, &errs)
	if err != nil {
		return nil, err
	}
	v.NoteSubject(ctx, r.ImportSupplier, r.ExternalAccountNumber)
	if hasErrorAt(errs, "import_supplier", "external_account_number") {
		return nil, TransactionsFailure(errs, r.raw)
	}
	if res, done, err := s.addTransactionsDirect(ctx, r, opts, now, today, errs, visible); done {
		return res, err
	}
	var res *TransactionsResult
	err = db.InTx(ctx, s.db, func(tx *db.Tx) error {
		var err error
		res, err = addTransactions(ctx, tx, r, opts, now, today, errs, visible)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// lookup is what the checks against the account need.
type lookup struct {
	FirstOpenDay    string         `db:"first_open_day"`
	Existing        pq.StringArray `db:"existing"`
	MissingProducts pq.StringArray `db:"missing_products"`
}

// lookupColumns returns the columns that read a lookup of the account a;
// ids and codes are the parameters that hold the posted transaction ids and
// product codes.
func lookupColumns(ids, codes string) string {
	return firstOpenDayExpr + ` AS first_open_day,
	ARRAY(SELECT t.transaction_id FROM transactions t WHERE t.account_id = a.id AND t.transaction_id = ANY(` + ids + `::text[])) AS existing,
	ARRAY(SELECT c FROM unnest(` + codes + `::text[]) AS c WHERE NOT EXISTS (SELECT 1 FROM products p WHERE p.code = c)) AS missing_products`
}

// lockLookupSQL locks the account (see lockAccount) and reads its lookup in
// the same round trip. The lookup comes from the statement's snapshot,
// taken before a wait for the lock: when another import held the account,
// it may miss what that import wrote. Only a request that then writes uses
// it, and its insert checks that nothing it relied on changed (see
// insertTransactionsSQL); every other answer is decided on a lookup read
// after the lock.
var lockLookupSQL = `SELECT a.id, s.document_root, s.require_documents, ` + lookupColumns("$3", "$4") + `
	FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id
	WHERE ` + accountByKey + `
	FOR NO KEY UPDATE OF a`

// lookupSQL reads the lookup of the locked account $1 in a statement of its
// own, whose snapshot is taken with the lock held.
var lookupSQL = `SELECT ` + lookupColumns("$2", "$3") + ` FROM accounts a WHERE a.id = $1`

// lookupArgs returns the posted transaction ids and the distinct product
// codes, the arguments of a lookup.
func lookupArgs(r *TransactionsRequest) (ids, codes []string) {
	ids = make([]string, 0, len(r.Transactions))
	for _, t := range r.Transactions {
		if t.TransactionID != "" {
			ids = append(ids, t.TransactionID)
		}
	}
	return ids, ProductCodes(nil, r.Transactions)
}

// addTransactionsDirect is the common case of E7, a request that adds all
// its transactions as posted, in one round trip without BEGIN and COMMIT:
// it is decided as if the account had none of the transactions and its open
// period started before all of them, and post_transactions, in one
// implicit transaction, locks the account, checks that this holds and
// writes. done is false, and nothing was written, when the request is
// another case (a problem, a dry run, an account the caller may not see) or
// the check failed (a known transaction id, a date before the open period,
// an unknown product, no such account); addTransactions then decides it on
// a lookup read under the lock.
func (s *Service) addTransactionsDirect(ctx context.Context, r *TransactionsRequest, opts TransactionOptions,
	now time.Time, today v.Date, errs problem.List, visible func(string) bool) (res *TransactionsResult, done bool, err error) {
	if len(errs) > 0 || (r.DryRun != nil && *r.DryRun) || (visible != nil && !visible(r.ImportSupplier)) {
		return nil, false, nil
	}
	d := decideTransactions(r, opts, lookup{}, today, errs)
	if len(d.errs) > 0 || len(d.add) == 0 || len(d.moved) > 0 {
		return nil, false, nil
	}
	wrote, err := insertTransactions(ctx, s.db, r.ImportSupplier, r.ExternalAccountNumber, d.ts, d.add, "", opts.CheckPreviouslyAdded)
	if err != nil || !wrote {
		return nil, err != nil, err
	}
	return d.res, true, nil
}

// addTransactions locks the account, runs the checks that need the
// database and writes the transactions. errs holds the problems found so
// far; any problem refuses the whole request.
func addTransactions(ctx context.Context, tx *db.Tx, r *TransactionsRequest, opts TransactionOptions,
	now time.Time, today v.Date, errs problem.List, visible func(string) bool) (*TransactionsResult, error) {
	if visible != nil && !visible(r.ImportSupplier) {
		return nil, accountNotFound(r.ImportSupplier, r.ExternalAccountNumber)
	}
	ids, codes := lookupArgs(r)
	var locked struct {
		account
		lookup
	}
	err := tx.GetContext(ctx, &locked, lockLookupSQL, r.ImportSupplier, r.ExternalAccountNumber, pq.Array(ids), pq.Array(codes))
	if errors.Is(err, db.ErrNotFound) {
		return nil, accountNotFound(r.ImportSupplier, r.ExternalAccountNumber)
	}
	if err != nil {
		return nil, fmt.Errorf("add transactions: lock and look up: %w", err)
	}
	accountID, l := locked.ID, locked.lookup
	dryRun := r.DryRun != nil && *r.DryRun
	for fresh := false; ; fresh = true {
		d := decideTransactions(r, opts, l, today, errs)
		inserted := false
		if len(d.errs) == 0 && !dryRun && len(d.add) > 0 {
			inserted, err = insertTransactions(ctx, tx, r.ImportSupplier, r.ExternalAccountNumber, d.ts, d.add, l.FirstOpenDay,
				opts.CheckPreviouslyAdded)
			if err != nil {
				return nil, err
			}
		}
		switch {
		case inserted:
			if len(d.moved) > 0 {
				if err := pinMoveNote(ctx, tx, accountID, d.period, d.moved, now); err != nil {
					return nil, err
				}
			}
			return d.res, nil
		case !fresh:
			// Decide again on what the account holds now that it is
			// locked.
			if err := tx.GetContext(ctx, &l, lookupSQL, accountID, pq.Array(ids), pq.Array(codes)); err != nil {
				return nil, fmt.Errorf("add transactions: lookup: %w", err)
			}
			continue
		case len(d.errs) > 0:
			return nil, TransactionsFailure(d.errs, r.raw)
		case dryRun:
			d.res.DryRun = true
			return d.res, nil
		case len(d.add) == 0:
			return d.res, nil
		}
		return nil, errors.New("add transactions: the account changed while locked")
	}
}
