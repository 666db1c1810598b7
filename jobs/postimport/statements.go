package postimport

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

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
// whose PDF may be in the document store.
type Statement struct {
	StatementID        string  `json:"statement_id"`
	Number             string  `json:"number"`
	BillPeriodFromDate v.Date  `json:"bill_period_from_date"`
	BillPeriodToDate   v.Date  `json:"bill_period_to_date"`
	IssuedDate         v.Date  `json:"issued_date"`
	GrossAmount        Money   `json:"gross_amount"`
	StatementPath      *string `json:"statement_path,omitzero"`
}

var statementSchema = v.NewObject(
	v.Req("statement_id", v.StringValue, func(s *Statement) *string { return &s.StatementID }, v.MaxLength(maxCode),
		v.Codes(CodeDuplicateStatementIDs, CodeStatementExists), v.Note("Unique per account.")),
	v.Req("number", v.StringValue, func(s *Statement) *string { return &s.Number }, v.MaxLength(maxCode),
		v.Note("The statement's number as printed on it.")),
	v.Req("bill_period_from_date", v.DateValue, func(s *Statement) *v.Date { return &s.BillPeriodFromDate },
		v.Codes(CodeStartAfterEnd, CodeStatementPeriodsOverlap), v.Note("Inclusive.")),
	v.Req("bill_period_to_date", v.DateValue, func(s *Statement) *v.Date { return &s.BillPeriodToDate },
		v.Codes(CodeStatementInFuture), v.Note("Inclusive. The latest one ends the account's closed history.")),
	v.Req("issued_date", v.DateValue, func(s *Statement) *v.Date { return &s.IssuedDate }, v.Codes(CodeStatementInFuture)),
	moneyField("gross_amount", func(s *Statement) *Money { return &s.GrossAmount }),
	v.Opt("statement_path", v.StringValue, func(s *Statement) **string { return &s.StatementPath },
		v.MaxLength(documents.MaxPathLength), v.Codes(CodeInvalidDocumentPath, CodeDocumentNotFound),
		v.Note("Document path of the PDF, relative to the import supplier's document root.")),
)

var statementsSchema = v.NewObject(
	v.Req("import_supplier", v.StringValue, func(r *StatementsRequest) *string { return &r.ImportSupplier }, v.MaxLength(maxCode),
		v.Codes(CodeAccountNotFound)),
	v.Req("external_account_number", v.StringValue, func(r *StatementsRequest) *string { return &r.ExternalAccountNumber },
		v.MaxLength(maxAccountRef), v.Codes(CodeAccountNotFound)),
	v.List("statements", statementSchema, func(r *StatementsRequest) *[]Statement { return &r.Statements }, v.Required(),
		v.Codes(CodeTooManyItems), v.Note(fmt.Sprintf("At most %d statements; all are created, or none.", MaxStatements))),
)

const detailStatementsFailed = "Could not validate the historical statements; nothing was created."

// ParseStatements decodes and checks the body of E8 with every rule that
// needs neither the database nor the document store; today is the date no
// statement date may be after. It returns a *problem.Error of Kind Invalid
// with every problem: code parse_error for a body that is not a JSON
// object, else historical_statements_failed_validation.
func ParseStatements(body []byte, today time.Time) (*StatementsRequest, error) {
	r, errs, perr := parseStatements(body, v.DateOf(today.UTC()))
	if perr != nil {
		return nil, perr
	}
	if len(errs) > 0 {
		return nil, errs.Err(CodeStatementsFailed, detailStatementsFailed)
	}
	return r, nil
}

func parseStatements(body []byte, today v.Date) (*StatementsRequest, problem.List, *problem.Error) {
	root, perr := parseBody(body)
	if perr != nil {
		return nil, nil, perr
	}
	var r StatementsRequest
	var w v.Walker
	statementsSchema.Bind(&w, root, &r)
	checkCount(&w.Errors, "statements", len(r.Statements), MaxStatements)
	seen := make(map[string]bool, len(r.Statements))
	for i := range r.Statements {
		st := &r.Statements[i]
		if id := st.StatementID; id != "" {
			if seen[id] {
				w.AddAt(v.Attr("statements", i, "statement_id"), CodeDuplicateStatementIDs,
					"Statement id %q appears more than once in the request.", id)
			}
			seen[id] = true
		}
		if st.BillPeriodFromDate != "" && st.BillPeriodToDate != "" && st.BillPeriodFromDate > st.BillPeriodToDate {
			w.AddAt(v.Attr("statements", i, "bill_period_from_date"), CodeStartAfterEnd,
				"bill_period_from_date (%s) is later than bill_period_to_date (%s).", st.BillPeriodFromDate, st.BillPeriodToDate)
		}
		// A historical statement covers a closed period. One that ends in
		// the future would start the open period after today, where no
		// transaction could ever be dated.
		for _, d := range []struct {
			field string
			date  v.Date
		}{{"bill_period_to_date", st.BillPeriodToDate}, {"issued_date", st.IssuedDate}} {
			if d.date != "" && d.date > today {
				w.AddAt(v.Attr("statements", i, d.field), CodeStatementInFuture,
					"%s (%s) is after today (%s); a historical statement covers a past period.", d.field, d.date, today)
			}
		}
		if from, to := st.BillPeriodFromDate, st.BillPeriodToDate; from != "" && to != "" && from <= to {
			for j := range i {
				o := r.Statements[j]
				if o.BillPeriodFromDate != "" && o.BillPeriodToDate != "" && o.BillPeriodFromDate <= to && from <= o.BillPeriodToDate {
					w.AddAt(v.Attr("statements", i, "bill_period_from_date"), CodeStatementPeriodsOverlap,
						"The period %s to %s overlaps statement %d of the request (%s to %s); periods are inclusive.",
						from, to, j, o.BillPeriodFromDate, o.BillPeriodToDate)
					break
				}
			}
		}
		if p := st.StatementPath; p != nil && *p != "" {
			if msg := documents.PathProblem(*p); msg != "" {
				w.AddAt(v.Attr("statements", i, "statement_path"), CodeInvalidDocumentPath, "%s", msg)
			}
		}
	}
	return &r, w.Errors, nil
}

// CreateStatements is E8. It creates every posted statement, or none, and
// answers the validated statements. The latest bill_period_to_date of an
// account's statements ends its closed history, so statements move the open
// statement period of E7.
//
// Errors: *problem.Error of Kind Invalid (400) with every problem, NotFound
// (404, account_not_found) when the account is not an imported account the
// caller may see, Unavailable (503) when documents cannot be checked.
func (s *Service) CreateStatements(ctx context.Context, body []byte, visible func(string) bool) (*StatementsRequest, error) {
	r, errs, perr := parseStatements(body, v.DateOf(s.now().UTC()))
	if perr != nil {
		return nil, perr
	}
	if hasErrorAt(errs, "import_supplier", "external_account_number") {
		return nil, errs.Err(CodeStatementsFailed, detailStatementsFailed)
	}
	acc, err := s.findAccount(ctx, r.ImportSupplier, r.ExternalAccountNumber, visible)
	if err != nil {
		return nil, err
	}
	var refs []documents.Ref
	for i, st := range r.Statements {
		if st.StatementPath != nil && documents.ValidPath(*st.StatementPath) {
			refs = append(refs, documents.Ref{Attr: v.Attr("statements", i, "statement_path"), Path: *st.StatementPath})
		}
	}
	if err := s.checkDocuments(ctx, acc, refs, &errs); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errs.Err(CodeStatementsFailed, detailStatementsFailed)
	}
	err = db.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
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

// insertStatements refuses statements the account has already, then writes
// the others; the account is locked by the caller.
func insertStatements(ctx context.Context, tx *sqlx.Tx, accountID int64, sts []Statement) error {
	n := len(sts)
	ids, numbers, froms, tos, issued, amounts := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	paths := make([]*string, n)
	for i, st := range sts {
		ids[i], numbers[i] = st.StatementID, st.Number
		froms[i], tos[i], issued[i] = string(st.BillPeriodFromDate), string(st.BillPeriodToDate), string(st.IssuedDate)
		amounts[i], paths[i] = st.GrossAmount.String(), st.StatementPath
	}
	var existing pq.StringArray
	err := tx.GetContext(ctx, &existing, `SELECT ARRAY(SELECT statement_id FROM historical_statements
		WHERE account_id = $1 AND statement_id = ANY($2::text[]))`, accountID, pq.Array(ids))
	if err != nil {
		return fmt.Errorf("create statements: read existing: %w", err)
	}
	if len(existing) > 0 {
		var errs problem.List
		for i, id := range ids {
			for _, e := range existing {
				if id == e {
					errs.Add(v.Attr("statements", i, "statement_id"), CodeStatementExists,
						"The account already has historical statement %q.", id)
				}
			}
		}
		return errs.Err(CodeStatementsFailed, detailStatementsFailed)
	}
	if n == 0 {
		return nil
	}
	var overlapping []struct {
		I    int    `db:"i"`
		From string `db:"f"`
		To   string `db:"t"`
	}
	err = tx.SelectContext(ctx, &overlapping, `SELECT u.i - 1 AS i, to_char(h.bill_period_from_date, 'YYYY-MM-DD') AS f,
			to_char(h.bill_period_to_date, 'YYYY-MM-DD') AS t
		FROM unnest($2::date[], $3::date[]) WITH ORDINALITY AS u (f, t, i)
		CROSS JOIN LATERAL (SELECT bill_period_from_date, bill_period_to_date FROM historical_statements
			WHERE account_id = $1 AND bill_period_from_date <= u.t AND bill_period_to_date >= u.f
			ORDER BY bill_period_from_date LIMIT 1) h
		ORDER BY u.i`, accountID, pq.Array(froms), pq.Array(tos))
	if err != nil {
		return fmt.Errorf("create statements: read overlaps: %w", err)
	}
	if len(overlapping) > 0 {
		var errs problem.List
		for _, o := range overlapping {
			errs.Add(v.Attr("statements", o.I, "bill_period_from_date"), CodeStatementPeriodsOverlap,
				"The period overlaps the account's historical statement of %s to %s; periods are inclusive.", o.From, o.To)
		}
		return errs.Err(CodeStatementsFailed, detailStatementsFailed)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO historical_statements (account_id, statement_id, number, bill_period_from_date,
			bill_period_to_date, issued_date, gross_amount, statement_path)
		SELECT $1, u.* FROM unnest($2::text[], $3::text[], $4::date[], $5::date[], $6::date[], $7::numeric[], $8::text[])
			AS u (statement_id, number, bill_period_from_date, bill_period_to_date, issued_date, gross_amount, statement_path)`,
		accountID, pq.Array(ids), pq.Array(numbers), pq.Array(froms), pq.Array(tos), pq.Array(issued), pq.Array(amounts), pq.Array(paths))
	if db.IsUniqueViolation(err, "historical_statements_account_id_statement_id_key") {
		// Unreachable behind the account lock; kept as the constraint's word.
		return problem.Invalidf(CodeStatementExists, "statements", "A statement of this request was created at the same time; re-send the request.")
	}
	if err != nil {
		return fmt.Errorf("create statements: insert: %w", err)
	}
	return nil
}
