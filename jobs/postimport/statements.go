package postimport

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/lib/pq"
	"github.com/shopspring/decimal"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/problem"
	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// StatementsRequest is the body of E8, and its 201 answer once validated.
type StatementsRequest struct {
	ImportSupplier        string      `json:"import_supplier"`
	ExternalAccountNumber string      `json:"external_account_number"`
	Statements            []Statement `json:"statements"`
}

// Statement is one historical statement (spec 2.9): a closed billing period
// whose PDF may be in the document store. Both dates are inclusive, as the
// reference says: BillPeriodToDate is the last day billed, and the open
// statement period starts the day after it (docs/decisions.md argues the
// reading against the reference's example statements that share a day).
type Statement struct {
	StatementID        string  `json:"statement_id"`
	Number             *string `json:"number,omitzero"`
	BillPeriodFromDate v.Date  `json:"bill_period_from_date"`
	BillPeriodToDate   v.Date  `json:"bill_period_to_date"`
	IssuedDate         *v.Date `json:"issued_date,omitzero"`
	// GrossAmount is an integer in the currency's lowest denomination, as
	// the reference defines it, stored and answered exactly as sent.
	GrossAmount   *int64  `json:"gross_amount,omitzero"`
	StatementPath *string `json:"statement_path,omitzero"`
}

// StatementSchema is the field table of one historical statement: E8's
// statements[] and the account payload's statements[] (spec 2.2) share it,
// with CheckStatements, so that a statement is the same wherever it is sent.
var StatementSchema = v.NewObject(
	v.Req("statement_id", v.StringValue, func(s *Statement) *string { return &s.StatementID }, v.MaxLength(maxCode),
		v.Codes(CodeDuplicateStatementIDs, CodeStatementExists), v.Note("Unique per account.")),
	v.Opt("number", v.StringValue, func(s *Statement) **string { return &s.Number }, v.MaxLength(maxCode),
		v.Note("The statement's number as printed on it.")),
	v.Req("bill_period_from_date", v.DateValue, func(s *Statement) *v.Date { return &s.BillPeriodFromDate },
		v.Codes(CodeStartAfterEnd), v.Note("The period's first day.")),
	v.Req("bill_period_to_date", v.DateValue, func(s *Statement) *v.Date { return &s.BillPeriodToDate },
		v.Codes(CodeStatementInFuture), v.Note("Inclusive: the period's last day, as the reference says (3.5, \"both inclusive\"). The account's open statement period starts the day after the latest one, unless a later day is billed (last_billed_to_date).")),
	v.Opt("issued_date", v.DateValue, func(s *Statement) **v.Date { return &s.IssuedDate }),
	grossAmountField,
	v.Opt("statement_path", v.StringValue, func(s *Statement) **string { return &s.StatementPath },
		v.MaxLength(documents.MaxPathLength), v.Codes(CodeInvalidDocumentPath, CodeDocumentNotFound),
		v.Note("Document path of the PDF, relative to the import supplier's document root.")),
)

var statementsSchema = v.NewObject(
	v.Req("import_supplier", v.StringValue, func(r *StatementsRequest) *string { return &r.ImportSupplier }, v.MaxLength(maxCode),
		v.Codes(CodeAccountNotFound)),
	v.Req("external_account_number", v.StringValue, func(r *StatementsRequest) *string { return &r.ExternalAccountNumber },
		v.MaxLength(maxAccountRef), v.Codes(CodeAccountNotFound)),
	v.List("statements", StatementSchema, func(r *StatementsRequest) *[]Statement { return &r.Statements }, v.Required(),
		v.MaxItems(MaxStatements), v.Note(fmt.Sprintf("At most %d statements; all are created, or none.", MaxStatements))),
)

// grossAmountField is the optional integer gross_amount. A number written
// with a zero fraction (100.0) is the integer it equals; anything with a
// non-zero fraction is refused, never rounded or scaled.
var grossAmountField = v.Custom(&v.Spec{Name: "gross_amount", Type: v.TypeInteger, Codes: []string{CodeAmountOutOfRange},
	Note: "In the currency's lowest denomination (pence, cents), as the reference defines it: `100` is 1.00 in the major unit. Stored and answered exactly as sent."},
	func(w *v.Walker, val *v.Value, dst *Statement) {
		switch val.Kind {
		case v.KindNumber:
		case v.KindNull:
			w.Add(v.CodeInvalid, "This field may not be null.")
			return
		default:
			w.Add(v.CodeInvalid, "Expected an integer but got %s.", val.Kind)
			return
		}
		d, err := v.ParseDecimal(val.Text)
		if err != nil || !d.Decimal().IsInteger() {
			w.Add(v.CodeInvalid, "A valid integer is required: the amount in the currency's lowest denomination.")
			return
		}
		if d.Decimal().Abs().GreaterThan(decimal.NewFromInt(math.MaxInt64)) {
			w.Add(CodeAmountOutOfRange, "The amount must be between -%d and %d.", int64(math.MaxInt64), int64(math.MaxInt64))
			return
		}
		n := d.Decimal().IntPart()
		dst.GrossAmount = &n
	})

const detailStatementsFailed = "Could not validate the historical statements; nothing was created."

// ParseStatements decodes and checks the body of E8 with every rule that
// needs neither the database nor the document store; today is the date no
// statement date may be after. It returns a *problem.Error of Kind Invalid
// with every problem: code parse_error for a body that is not a JSON
// object, else historical_statements_failed_validation.
func ParseStatements(body []byte, today time.Time) (*StatementsRequest, error) {
	r, errs, err := parseStatements(context.Background(), body, func(string) v.Date { return v.DateOf(today.UTC()) })
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errs.Err(CodeStatementsFailed, detailStatementsFailed)
	}
	return r, nil
}

// parseStatements decodes and checks the body; todayFor dates "today" for
// the request's supplier, once that is read from the body. It fails for a
// body that is not a JSON object (a parse_error *problem.Error), or for a
// request whose client hung up: it stops between its phases
// (validate.Checkpoint).
func parseStatements(ctx context.Context, body []byte, todayFor func(supplier string) v.Date) (*StatementsRequest, problem.List, error) {
	var r StatementsRequest
	var w v.Walker
	if _, err := statementsSchema.Decode(ctx, body, &w, &r); err != nil {
		return nil, nil, fmt.Errorf("statements: %w", err)
	}
	today := todayFor(r.ImportSupplier)
	if err := v.Checkpoint(ctx, v.LookedUp); err != nil {
		return nil, nil, fmt.Errorf("statements: %w", err)
	}
	CheckStatements(&w, "statements", r.Statements, today)
	return &r, w.Errors, nil
}

// CheckStatements runs the rules of StatementItemRules that need neither
// the database nor the document store on sts, the statements at the list
// path list, reporting each problem at list.N.field; today is the date no
// statement may end after. E8 and the account payload both call it.
func CheckStatements(w *v.Walker, list string, sts []Statement, today v.Date) {
	seen := make(map[string]bool, len(sts))
	for i := range sts {
		st := &sts[i]
		if id := st.StatementID; id != "" {
			if seen[id] {
				w.AddAt(v.Attr(list, i, "statement_id"), CodeDuplicateStatementIDs,
					"Statement id %q appears more than once.", id)
			}
			seen[id] = true
		}
		if st.BillPeriodFromDate != "" && st.BillPeriodToDate != "" && st.BillPeriodFromDate > st.BillPeriodToDate {
			w.AddAt(v.Attr(list, i, "bill_period_from_date"), CodeStartAfterEnd,
				"bill_period_from_date (%s) is later than bill_period_to_date (%s).", st.BillPeriodFromDate, st.BillPeriodToDate)
		}
		// A historical statement covers a closed period. One that ends in
		// the future would start the open period after today, where no
		// transaction could ever be dated.
		if d := st.BillPeriodToDate; d != "" && d > today {
			w.AddAt(v.Attr(list, i, "bill_period_to_date"), CodeStatementInFuture,
				"bill_period_to_date (%s) is after today (%s); a historical statement covers a past period.", d, today)
		}
		if p := st.StatementPath; p != nil && *p != "" {
			if msg := documents.PathProblem(*p); msg != "" {
				w.AddAt(v.Attr(list, i, "statement_path"), CodeInvalidDocumentPath, "%s", msg)
			}
		}
	}
}

// StatementDocumentRefs returns the document paths that the statements at
// the list path list name, valid ones only (the others are refused by
// CheckStatements), for documents.Check.
func StatementDocumentRefs(list string, sts []Statement) []documents.Ref {
	var refs []documents.Ref
	for i, st := range sts {
		if st.StatementPath != nil && documents.ValidPath(*st.StatementPath) {
			refs = append(refs, documents.Ref{Attr: v.Attr(list, i, "statement_path"), Path: *st.StatementPath})
		}
	}
	return refs
}

// CreateStatements is E8. It creates every posted statement, or none, and
// answers the validated statements. The latest bill_period_to_date of an
// account's statements ends its closed history, so statements move the open
// statement period of E7. The usual request, none of whose statements the
// account has, costs one round trip (postStatements); one that names a
// statement of the account is refused in a transaction that holds the
// account's lock, statement by statement.
//
// Errors: *problem.Error of Kind Invalid (400) with every problem, NotFound
// (404, account_not_found) when the account is not an imported account the
// caller may see, Unavailable (500) when documents cannot be checked.
func (s *Service) CreateStatements(ctx context.Context, body []byte, visible func(string) bool) (*StatementsRequest, error) {
	now := s.now()
	r, errs, err := parseStatements(ctx, body, func(supplier string) v.Date { return s.zones.today(ctx, supplier, now) })
	if err != nil {
		return nil, err
	}
	v.NoteSubject(ctx, r.ImportSupplier, r.ExternalAccountNumber)
	if hasErrorAt(errs, "import_supplier", "external_account_number") {
		return nil, errs.Err(CodeStatementsFailed, detailStatementsFailed)
	}
	refs := StatementDocumentRefs("statements", r.Statements)
	if err := s.preflight(ctx, r.ImportSupplier, r.ExternalAccountNumber, visible, refs, &errs); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errs.Err(CodeStatementsFailed, detailStatementsFailed)
	}
	if visible != nil && !visible(r.ImportSupplier) {
		return nil, accountNotFound(r.ImportSupplier, r.ExternalAccountNumber)
	}
	written, err := postStatements(ctx, s.db, r)
	if err != nil {
		return nil, err
	}
	if written == len(r.Statements) {
		return r, nil
	}
	if err := db.InTx(ctx, s.db, func(tx *db.Tx) error { return insertStatements(ctx, tx, r) }); err != nil {
		return nil, err
	}
	return r, nil
}

// postStatementsSQL calls post_statements (db/migrations), the one home of
// E8's insert: it locks the account as lockAccount does and writes the
// statements unless the account has one of their ids, all or none. Called
// outside a transaction it is one round trip and one implicit transaction;
// inside one, the lock it takes is held until that transaction ends.
const postStatementsSQL = `SELECT post_statements($1, $2, $3, $4, $5, $6, $7, $8, $9)`

// postStatements runs post_statements for r through q, the pool or a
// *db.Tx, and returns how many statements it wrote: all of them, or none
// when the account has one of their ids. It fails with account_not_found
// when there is no such account.
func postStatements(ctx context.Context, q rowQuerier, r *StatementsRequest) (int, error) {
	sts := r.Statements
	n := len(sts)
	ids, froms, tos := make([]string, n), make([]string, n), make([]string, n)
	numbers, issued, paths := make([]*string, n), make([]*string, n), make([]*string, n)
	amounts := make([]*int64, n)
	for i, st := range sts {
		ids[i], numbers[i] = st.StatementID, st.Number
		froms[i], tos[i] = string(st.BillPeriodFromDate), string(st.BillPeriodToDate)
		if st.IssuedDate != nil {
			d := string(*st.IssuedDate)
			issued[i] = &d
		}
		amounts[i], paths[i] = st.GrossAmount, st.StatementPath
	}
	var written sql.NullInt64
	err := q.QueryRowxContext(ctx, postStatementsSQL, r.ImportSupplier, r.ExternalAccountNumber, pq.Array(ids),
		pq.Array(numbers), pq.Array(froms), pq.Array(tos), pq.Array(issued), pq.Array(amounts), pq.Array(paths)).Scan(&written)
	switch {
	case db.IsUniqueViolation(err, "historical_statements_account_id_statement_id_key"):
		// Unreachable behind the account lock; kept as the constraint's word.
		return 0, problem.Invalidf(CodeStatementExists, "statements", "A statement of this request was created at the same time; re-send the request.")
	case err != nil:
		return 0, fmt.Errorf("create statements: insert: %w", err)
	case !written.Valid:
		return 0, accountNotFound(r.ImportSupplier, r.ExternalAccountNumber)
	}
	return int(written.Int64), nil
}

// insertStatements writes r's statements inside tx, or refuses each one
// that the account has already. It is the answer to a request that
// post_statements, called on its own, did not write: the call here takes
// the account's lock for the rest of tx, so the read of the statements
// that exist, in a statement of its own whose snapshot follows the lock,
// sees every import that held the account before.
func insertStatements(ctx context.Context, tx *db.Tx, r *StatementsRequest) error {
	written, err := postStatements(ctx, tx, r)
	if err != nil || written == len(r.Statements) {
		return err
	}
	ids := make([]string, len(r.Statements))
	for i, st := range r.Statements {
		ids[i] = st.StatementID
	}
	var existing pq.StringArray
	err = tx.GetContext(ctx, &existing, existingStatementsSQL, r.ImportSupplier, r.ExternalAccountNumber, pq.Array(ids))
	if err != nil {
		return fmt.Errorf("create statements: read existing: %w", err)
	}
	if len(existing) == 0 {
		return fmt.Errorf("create statements: insert wrote %d of %d statements", written, len(r.Statements))
	}
	var errs problem.List
	for i, id := range ids {
		if slices.Contains(existing, id) {
			errs.Add(v.Attr("statements", i, "statement_id"), CodeStatementExists,
				"The account already has historical statement %q.", id)
		}
	}
	return errs.Err(CodeStatementsFailed, detailStatementsFailed)
}

// existingStatementsSQL reads which of the statement ids $3 the account
// already has.
const existingStatementsSQL = `SELECT ARRAY(SELECT h.statement_id FROM historical_statements h
	JOIN accounts a ON a.id = h.account_id
	WHERE ` + accountByKey + ` AND h.statement_id = ANY($3::text[]))`
