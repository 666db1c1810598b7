package postimport

import (
	"context"
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
// whose PDF may be in the document store. The period is half-open: it
// starts on BillPeriodFromDate and ends before BillPeriodToDate, so that
// consecutive statements share their boundary day, as in the reference's
// example (2019-06-01 to 2019-07-01, then 2019-07-01 to 2019-08-01).
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
		v.Codes(CodeStatementInFuture), v.Note("Exclusive: the day after the period, which the next statement may start on. The latest one is the first day of the account's open statement period, unless last_billed_to_date is later.")),
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
	root, perr := statementsSchema.ParseBody(body)
	if perr != nil {
		return nil, nil, perr
	}
	if err := v.Checkpoint(ctx, v.Parsed); err != nil {
		return nil, nil, fmt.Errorf("statements: %w", err)
	}
	var r StatementsRequest
	var w v.Walker
	statementsSchema.Bind(&w, root, &r)
	if err := v.Checkpoint(ctx, v.Bound); err != nil {
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
// statement period of E7.
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
	err = db.InTx(ctx, s.db, func(tx *db.Tx) error {
		acc, err := lockAccount(ctx, tx, r.ImportSupplier, r.ExternalAccountNumber, visible)
		if err != nil {
			return err
		}
		return insertStatements(ctx, tx, acc.ID, r.Statements)
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// insertStatements writes the statements unless the account, which the
// caller has locked, has one of them already; then it refuses those. The
// insert checks that itself, so that a request without such statements,
// the usual case, costs one statement; its snapshot follows the lock, so it
// sees every import that held the account before.
func insertStatements(ctx context.Context, tx *db.Tx, accountID int64, sts []Statement) error {
	n := len(sts)
	if n == 0 {
		return nil
	}
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
	res, err := tx.ExecContext(ctx, `INSERT INTO historical_statements (account_id, statement_id, number, bill_period_from_date,
			bill_period_to_date, issued_date, gross_amount, statement_path)
		SELECT $1, u.* FROM unnest($2::text[], $3::text[], $4::date[], $5::date[], $6::date[], $7::bigint[], $8::text[])
			AS u (statement_id, number, bill_period_from_date, bill_period_to_date, issued_date, gross_amount, statement_path)
		WHERE NOT EXISTS (SELECT 1 FROM historical_statements h WHERE h.account_id = $1 AND h.statement_id = ANY($2::text[]))`,
		accountID, pq.Array(ids), pq.Array(numbers), pq.Array(froms), pq.Array(tos), pq.Array(issued), pq.Array(amounts), pq.Array(paths))
	if db.IsUniqueViolation(err, "historical_statements_account_id_statement_id_key") {
		// Unreachable behind the account lock; kept as the constraint's word.
		return problem.Invalidf(CodeStatementExists, "statements", "A statement of this request was created at the same time; re-send the request.")
	}
	if err != nil {
		return fmt.Errorf("create statements: insert: %w", err)
	}
	if written, err := res.RowsAffected(); err != nil || written == int64(n) {
		return err
	}
	var existing pq.StringArray
	err = tx.GetContext(ctx, &existing, `SELECT ARRAY(SELECT statement_id FROM historical_statements
		WHERE account_id = $1 AND statement_id = ANY($2::text[]))`, accountID, pq.Array(ids))
	if err != nil {
		return fmt.Errorf("create statements: read existing: %w", err)
	}
	if len(existing) == 0 {
		return fmt.Errorf("create statements: insert wrote some of %d statements", n)
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
