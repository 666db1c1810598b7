package business

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// detailFailed is the top-level detail of a refused request.
const detailFailed = "Could not validate business data."

// Service creates businesses (E1).
type Service struct {
	db *db.DB
}

// New returns the E1 service. now is not read: no rule of E1 depends on
// the date since signed_at_date may be any date (no source refuses a
// future one); the parameter stays so that callers need not change.
func New(d *db.DB, now func() time.Time) *Service {
	return &Service{db: d}
}

// Parse decodes body and checks every rule that needs nothing outside the
// request. It returns the bound request (as far as it could be bound) and
// every problem found. It fails only for a body that is not JSON or not an
// object, with a parse_error *problem.Error, or for a request whose client
// hung up: it stops between its phases (validate.Checkpoint) with an error
// that wraps ctx's.
func Parse(ctx context.Context, body []byte) (Request, problem.List, error) {
	var r Request
	var w validate.Walker
	if _, err := requestSchema.Decode(ctx, body, &w, &r); err != nil {
		return r, nil, fmt.Errorf("business: %w", err)
	}
	checkRequest(&w, &r)
	return r, w.Errors, nil
}

// checkRequest runs the rules the schema cannot express. A field that had a
// problem of its own is at its zero value, so every rule skips zero values.
func checkRequest(w *validate.Walker, r *Request) {
	b := r.Business
	if b == nil {
		return
	}
	for _, i := range validate.Repeats(b.Details, func(d *Detail) string { return d.Key }) {
		w.AddAt(validate.Attr("business", "details", i, "key"), CodeDetailsDuplicateKeys,
			"Detail key %q appears more than once.", b.Details[i].Key)
	}
	// Repeats keeps this check linear: a pairwise comparison let one
	// request with many items hold a CPU for minutes.
	for _, i := range validate.Repeats(b.BusinessContracts, func(c *Contract) string { return c.Identifier }) {
		w.AddAt(validate.Attr("business", "business_contracts", i, "identifier"), CodeContractAlreadyExists,
			"Business contract identifier %q appears more than once in this request.", b.BusinessContracts[i].Identifier)
	}
}

// lookup is what E1 needs to know from the database.
type lookup struct {
	SupplierID sql.NullInt64  `db:"supplier_id"`
	BusinessID sql.NullInt64  `db:"business_id"`
	Existing   pq.StringArray `db:"existing"`
}

// lookupSQL answers everything in one round trip. The outer one-row select
// makes sure a row comes back when the supplier does not exist; a supplier
// the caller may not see is asked for as ”, which no code matches.
const lookupSQL = `SELECT s.id AS supplier_id,
	(SELECT b.id FROM businesses b WHERE b.supplier_id = s.id AND b.external_business_identifier = $2
		AND b.company_name = $3 AND b.company_number = $4 AND b.business_type = $5) AS business_id,
	ARRAY(SELECT c.identifier FROM business_contracts c WHERE c.supplier_id = s.id AND c.identifier = ANY($6::text[])
		ORDER BY c.identifier) AS existing
FROM (SELECT 1) AS one
LEFT JOIN import_suppliers s ON s.code = $1`

func (s *Service) lookup(ctx context.Context, q sqlx.QueryerContext, r Request, visible func(string) bool) (lookup, error) {
	code := r.ImportSupplierCode
	if visible != nil && !visible(code) {
		code = ""
	}
	var typ, name, number string
	if b := r.Business; b != nil {
		typ, name, number = b.key()
	}
	var ids []string
	if r.Business != nil {
		for _, c := range r.Business.BusinessContracts {
			if c.Identifier != "" {
				ids = append(ids, c.Identifier)
			}
		}
	}
	var l lookup
	if err := sqlx.GetContext(ctx, q, &l, lookupSQL, code, r.ExternalBusinessIdentifier, name, number, typ, pq.Array(ids)); err != nil {
		return l, fmt.Errorf("business: lookup: %w", err)
	}
	return l, nil
}

// AlreadyExists is the refusal of a business created before. It carries
// the service business id, so that a client that lost its 201 can recover it.
func AlreadyExists(externalBusinessIdentifier string, id int64) *problem.Error {
	d := fmt.Sprintf("Business %s with this name, number and type already exists as %d.", externalBusinessIdentifier, id)
	p := problem.Invalidf(CodeAlreadyExists, "external_business_identifier", "%s", d)
	return p.With("service_business_id", id).With("external_business_identifier", externalBusinessIdentifier)
}

// Create runs E1: it validates body, reporting every problem at once, and
// stores the business with its details, contracts, versions and terms in
// one transaction. visible limits the suppliers the caller may address.
//
// Errors: a *problem.Error of Kind Invalid with code parse_error,
// business_failed_validation (problems in Errors) or business_already_exists;
// anything else is an infrastructure failure.
func (s *Service) Create(ctx context.Context, body []byte, visible func(string) bool) (Result, error) {
	r, errs, err := Parse(ctx, body)
	if err != nil {
		return Result{}, err
	}
	validate.NoteSubject(ctx, r.ImportSupplierCode, "")
	l, err := s.lookup(ctx, s.db, r, visible)
	if err != nil {
		return Result{}, err
	}
	if l.BusinessID.Valid && !hasErrorIn(errs, "external_business_identifier", "business.business_type",
		"business.company_name", "business.company_number") {
		// The request as a whole is a repeat; its other problems would not
		// matter even if fixed.
		return Result{}, AlreadyExists(r.ExternalBusinessIdentifier, l.BusinessID.Int64)
	}
	errs = append(errs, s.dbProblems(r, l)...)
	if len(errs) > 0 {
		return Result{}, errs.Err(CodeFailedValidation, detailFailed)
	}

	var id int64
	err = db.InTx(ctx, s.db, func(tx *db.Tx) error {
		var err error
		id, err = insert(ctx, tx, l.SupplierID.Int64, r)
		return err
	})
	if err == nil {
		return Result{ServiceBusinessID: id, ExternalBusinessIdentifier: r.ExternalBusinessIdentifier}, nil
	}
	if !db.IsUniqueViolation(err, "") {
		return Result{}, fmt.Errorf("business: create: %w", err)
	}
	// A concurrent request created the business or a contract between the
	// lookup and the insert: answer as if it had come first.
	l, lerr := s.lookup(ctx, s.db, r, visible)
	if lerr != nil {
		return Result{}, lerr
	}
	if l.BusinessID.Valid {
		return Result{}, AlreadyExists(r.ExternalBusinessIdentifier, l.BusinessID.Int64)
	}
	if errs := s.dbProblems(r, l); len(errs) > 0 {
		return Result{}, errs.Err(CodeFailedValidation, detailFailed)
	}
	return Result{}, fmt.Errorf("business: create: %w", err)
}

// dbProblems reports what the lookup found wrong.
func (s *Service) dbProblems(r Request, l lookup) problem.List {
	var errs problem.List
	switch {
	case r.ImportSupplierCode == "":
	case !l.SupplierID.Valid:
		errs.Add("import_supplier_code", CodeSupplierNotFound, "Import supplier %q not found.", r.ImportSupplierCode)
	}
	if r.Business == nil {
		return errs
	}
	for i, c := range r.Business.BusinessContracts {
		if c.Identifier != "" && slices.Contains(l.Existing, c.Identifier) {
			errs.Add(validate.Attr("business", "business_contracts", i, "identifier"), CodeContractAlreadyExists,
				"A business contract %q already exists for import supplier %s.", c.Identifier, r.ImportSupplierCode)
		}
	}
	return errs
}

func hasErrorIn(errs problem.List, attrs ...string) bool {
	for _, e := range errs {
		if slices.Contains(attrs, e.Attr) {
			return true
		}
	}
	return false
}

// insert writes the business and everything under it.
func insert(ctx context.Context, tx *db.Tx, supplierID int64, r Request) (int64, error) {
	b := r.Business
	typ, name, number := b.key()
	var id int64
	if err := tx.GetContext(ctx, &id, `INSERT INTO businesses (supplier_id, external_business_identifier, business_type,
		company_number, company_name) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
		supplierID, r.ExternalBusinessIdentifier, typ, number, name); err != nil {
		return 0, fmt.Errorf("insert business: %w", err)
	}
	if len(b.Details) > 0 {
		keys := make([]string, len(b.Details))
		values := make([]string, len(b.Details))
		for i, d := range b.Details {
			keys[i], values[i] = d.Key, d.Value
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO business_details (business_id, position, key, value)
			SELECT $1, u.n - 1, u.k, u.v FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS u(k, v, n)`,
			id, pq.Array(keys), pq.Array(values)); err != nil {
			return 0, fmt.Errorf("insert business details: %w", err)
		}
	}
	for _, c := range b.BusinessContracts {
		var cid int64
		if err := tx.GetContext(ctx, &cid, `INSERT INTO business_contracts (business_id, supplier_id, identifier,
			valid_from_date, signed_at_date) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
			id, supplierID, c.Identifier, c.ValidFromDate, c.SignedAtDate); err != nil {
			return 0, fmt.Errorf("insert business contract: %w", err)
		}
		// A version's date and terms are optional: NULL elements where
		// they were not sent.
		dates := make([]sql.NullString, len(c.Versions))
		terms := make([]sql.NullString, len(c.Versions))
		for j, v := range c.Versions {
			if v.ApplicableAtDate != nil {
				dates[j] = sql.NullString{String: string(*v.ApplicableAtDate), Valid: true}
			}
			if v.Terms != nil {
				terms[j] = sql.NullString{String: string(v.Terms), Valid: true}
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO business_contract_versions (contract_id, position, applicable_at_date, terms)
			SELECT $1, u.n - 1, u.d::date, u.t::jsonb FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS u(d, t, n)`,
			cid, pq.Array(dates), pq.Array(terms)); err != nil {
			return 0, fmt.Errorf("insert business contract versions: %w", err)
		}
	}
	return id, nil
}

// key returns the business type, company name and company number as stored
// and compared for uniqueness (spec 2.6): "" for each one omitted.
func (b *Business) key() (typ, name, number string) {
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	return deref(b.BusinessType), deref(b.CompanyName), deref(b.CompanyNumber)
}
