// Package postimport imports data onto accounts that E5 has created: notes
// (E6), financial transactions (E7) and historical statements (E8).
//
// Each request is parsed with the validate schema DSL (every problem at its
// dot path), then checked against the account and the document store, then
// written in one database transaction that first locks the account's row.
// The lock is what makes concurrent requests for one account take turns, so
// that the "does this note or transaction exist already?" question and the
// write that follows it see the same world; unique constraints on
// (account, transaction_id) and (account, statement_id) back it up. The
// usual request of each endpoint is decided in Go as if the account had
// none of its items, and written by one PL/pgSQL function in one round trip
// (post_notes, post_transactions, post_statements): the function takes the
// same lock, checks what the request was decided on, and writes, or
// writes nothing and the request is decided again in the transaction.
//
// The rules, the open statement period, the ledger's sign convention and
// every error code are in RULES.md, which TestRulesFile keeps in step with
// the code.
package postimport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// Service imports notes, transactions and statements. Its methods are safe
// for concurrent use.
type Service struct {
	db *db.DB
	// docs is nil when no document store is configured; a request that
	// references a document then gets 500.
	docs *documents.Store
	// now is the clock; "today" is its date in the supplier's time zone
	// (zones). Tests fix it.
	now   func() time.Time
	zones *zones
}

// New returns a Service over d. docs may be nil when DOCUMENTS_URL is not
// set: requests without document references still work.
func New(d *db.DB, docs *documents.Store) *Service {
	return &Service{db: d, docs: docs, now: time.Now, zones: newZones(d, time.Now)}
}

// account is the target of an import request.
type account struct {
	ID           int64  `db:"id"`
	DocumentRoot string `db:"document_root"`
	// RequireDocuments is the supplier's setting: whether the documents a
	// request names must be in the store.
	RequireDocuments bool `db:"require_documents"`
}

// accountNotFound is the answer for an account that does not exist, exists
// only as staged data, or belongs to a supplier the caller's key may not
// see: the three must be indistinguishable.
func accountNotFound(supplier, ean string) *problem.Error {
	d := fmt.Sprintf("No imported account %s exists for import supplier %s.", ean, supplier)
	return &problem.Error{Kind: problem.NotFound, Code: CodeAccountNotFound, Detail: d,
		Errors: []problem.FieldError{{Detail: d, Code: CodeAccountNotFound, Attr: "external_account_number"}}}
}

const findAccountSQL = `SELECT a.id, s.document_root, s.require_documents FROM accounts a
	JOIN import_suppliers s ON s.id = a.supplier_id
	WHERE ` + accountByKey

// accountByKey finds the account of supplier code $1 and external account
// number $2 by both columns of its unique key, whatever the planner knows:
// joined on s.code = $1, a table not yet analysed (the first minutes of a
// migration into a new database) could be planned accounts first, walking
// the whole index for the account number alone, and a prepared statement
// keeps that plan. The supplier's id is found first, in an InitPlan.
// post_transactions, post_notes and post_statements lock the account the
// same way; TestAccountLookups_ReadAFewPagesOnAFreshTable holds all of them.
const accountByKey = `a.supplier_id = (SELECT id FROM import_suppliers WHERE code = $1) AND a.external_account_number = $2`

// findAccount resolves the account without locking it, for the checks that
// run before the transaction (document existence).
func (s *Service) findAccount(ctx context.Context, supplier, ean string, visible func(string) bool) (account, error) {
	var a account
	if visible != nil && !visible(supplier) {
		return a, accountNotFound(supplier, ean)
	}
	err := s.db.GetContext(ctx, &a, findAccountSQL, supplier, ean)
	if errors.Is(err, db.ErrNotFound) {
		return a, accountNotFound(supplier, ean)
	}
	if err != nil {
		return a, fmt.Errorf("find account: %w", err)
	}
	return a, nil
}

// preflight does what a request needs before its transaction: it answers
// 404 when the account is not one the caller may use and the request has
// problems too (the 404 comes first), and adds the problems of the
// documents that refs name. A request without problems or documents skips
// it, one query less: the lock in its transaction answers the same 404.
func (s *Service) preflight(ctx context.Context, supplier, ean string, visible func(string) bool, refs []documents.Ref,
	errs *problem.List) error {
	if len(refs) == 0 && len(*errs) == 0 {
		return nil
	}
	acc, err := s.findAccount(ctx, supplier, ean, visible)
	if err != nil {
		return err
	}
	return s.checkDocuments(ctx, acc, refs, errs)
}

// lockAccount resolves the account inside tx and locks its row until tx
// ends. FOR NO KEY UPDATE is the weakest lock that excludes another import
// request for the same account, and it still lets other transactions insert
// rows that reference the account (their foreign key checks take KEY SHARE).
//
// Statements that run after this one in tx see everything committed before
// the lock was granted, because each statement of a READ COMMITTED
// transaction takes a new snapshot. That is why lookups are never folded
// into this query: a subquery here would use the snapshot taken before the
// wait, and miss the rows of the request it waited for.
func lockAccount(ctx context.Context, tx *db.Tx, supplier, ean string, visible func(string) bool) (account, error) {
	var a account
	if visible != nil && !visible(supplier) {
		return a, accountNotFound(supplier, ean)
	}
	err := tx.GetContext(ctx, &a, findAccountSQL+` FOR NO KEY UPDATE OF a`, supplier, ean)
	if errors.Is(err, db.ErrNotFound) {
		return a, accountNotFound(supplier, ean)
	}
	if err != nil {
		return a, fmt.Errorf("lock account: %w", err)
	}
	return a, nil
}

// checkDocuments adds a problem for each reference to a document that is
// not in the store under the account's root, when its supplier requires
// documents; otherwise it does not read the store. A store that is missing
// or cannot answer is a 500, not a validation problem.
func (s *Service) checkDocuments(ctx context.Context, acc account, refs []documents.Ref, errs *problem.List) error {
	if !acc.RequireDocuments {
		return nil
	}
	return documents.Check(ctx, s.docs, acc.DocumentRoot, refs, errs)
}

// hasErrorAt reports whether errs has a problem at one of attrs.
func hasErrorAt(errs problem.List, attrs ...string) bool {
	for _, e := range errs {
		for _, a := range attrs {
			if e.Attr == a {
				return true
			}
		}
	}
	return false
}
