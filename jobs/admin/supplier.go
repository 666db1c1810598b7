package admin

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/status"
)

var (
	supplierCodeRE = regexp.MustCompile(`^[A-Z0-9_]+$`)
	countryRE      = regexp.MustCompile(`^[A-Z]{2}$`)
)

// Supplier is an import supplier as the operator configures it.
type Supplier struct {
	ID     int64  `db:"id" json:"-"`
	Code   string `db:"code" json:"code"`
	Status string `db:"status" json:"status"`
	// DocumentRoot is the prefix of the supplier's documents in the store:
	// documents.DefaultRoot(Code) unless given, and never inside or around
	// another supplier's root.
	DocumentRoot    string    `db:"document_root" json:"document_root"`
	Country         string    `db:"country" json:"country"`
	MigrationEmails bool      `db:"migration_emails" json:"migration_emails"`
	CreatedAt       time.Time `db:"created_at" json:"created_at"`
	// RequireDocuments makes E5, E6 and E8 refuse a document path that
	// names nothing in the store (path_does_not_exist_in_file_store). Off
	// by default, as on the reference platform; the store is then not read.
	RequireDocuments bool `db:"require_documents" json:"require_documents"`
	// TimeZone is the IANA name of the zone in which the supplier's "today"
	// is dated (a transaction may not be after today; the open statement
	// period ends today): UTC unless the operator sets one.
	TimeZone string `db:"time_zone" json:"time_zone"`
}

// CanonicalStatus returns the status that s names in any case (ongoing,
// PAUSED), or s unchanged when it names none, for checkStatus to refuse.
func CanonicalStatus(s string) string {
	for _, st := range []string{status.Ongoing, status.Paused, status.Complete} {
		if strings.EqualFold(s, st) {
			return st
		}
	}
	return s
}

func checkStatus(s string) error {
	switch s {
	case status.Ongoing, status.Paused, status.Complete:
		return nil
	}
	return problem.Invalidf("invalid_choice", "status", "Status %q is not one of Ongoing, Paused, Complete.", s)
}

// CreateSupplier validates and stores a new supplier. Status defaults to
// Ongoing, country to GB and the document root to documents.DefaultRoot; a
// root that overlaps another supplier's is refused (document_root_overlap).
func CreateSupplier(ctx context.Context, d *db.DB, s Supplier) (Supplier, error) {
	if s.Status == "" {
		s.Status = status.Ongoing
	}
	if s.Country == "" {
		s.Country = "GB"
	}
	if !supplierCodeRE.MatchString(s.Code) {
		return s, problem.Invalidf("invalid_supplier_code", "code", "Supplier code %q must be upper-case letters, digits and underscores.", s.Code)
	}
	if err := checkStatus(s.Status); err != nil {
		return s, err
	}
	if s.TimeZone == "" {
		s.TimeZone = "UTC"
	}
	if err := checkTimeZone(ctx, d, s.TimeZone); err != nil {
		return s, err
	}
	if !countryRE.MatchString(s.Country) {
		return s, problem.Invalidf("invalid_country", "country", "Country %q must be an ISO 3166-1 alpha-2 code such as GB.", s.Country)
	}
	if strings.Trim(s.DocumentRoot, "/") == "" {
		s.DocumentRoot = documents.DefaultRoot(s.Code)
	}
	root, err := documents.CleanRoot(s.DocumentRoot)
	if err != nil {
		return s, err
	}
	s.DocumentRoot = root
	err = d.GetContext(ctx, &s, `
		INSERT INTO import_suppliers (code, status, document_root, country, migration_emails, require_documents, time_zone)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`, s.Code, s.Status, s.DocumentRoot, s.Country, s.MigrationEmails, s.RequireDocuments,
		s.TimeZone)
	if other, ok := db.UniqueViolationDetail(err, rootOverlapConstraint); ok {
		return s, rootOverlap(root, other)
	}
	if db.IsUniqueViolation(err, "") {
		return s, problem.Invalidf("already_exists", "code", "Supplier %s already exists.", s.Code)
	}
	if err != nil {
		return s, fmt.Errorf("create supplier: %w", err)
	}
	return s, nil
}

// SetSupplierStatus changes a supplier's status.
func SetSupplierStatus(ctx context.Context, d *db.DB, code, status string) error {
	if err := checkStatus(status); err != nil {
		return err
	}
	res, err := d.ExecContext(ctx, `UPDATE import_suppliers SET status = $2 WHERE code = $1`, code, status)
	if err != nil {
		return fmt.Errorf("set supplier status: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return problem.Invalidf("import_supplier_not_found", "code", "Supplier %s does not exist.", code)
	}
	return nil
}

// rootOverlapConstraint names the refusal of the database's trigger
// import_suppliers_document_root, the one home of the rule that a supplier's
// document root is neither inside nor around another's: it holds for every
// writer and for two writers at once. Its DETAIL names the other supplier.
const rootOverlapConstraint = "import_suppliers_document_root_overlap"

func rootOverlap(root, other string) error {
	if other == "" {
		return problem.Invalidf(documents.CodeRootOverlap, "document_root",
			"Document root %q overlaps another supplier's root; each supplier needs a root of its own.", root)
	}
	return problem.Invalidf(documents.CodeRootOverlap, "document_root",
		"Document root %q overlaps the root of supplier %s; each supplier needs a root of its own, neither inside nor around another.", root, other)
}

// SetDocumentRoot changes a supplier's document root, with the rules of
// CreateSupplier. The documents under the old root are not moved: the
// operator moves them, or the supplier's document paths stop naming them.
// It returns the root as stored.
func SetDocumentRoot(ctx context.Context, d *db.DB, code, root string) (string, error) {
	if strings.Trim(root, "/") == "" {
		root = documents.DefaultRoot(code)
	}
	root, err := documents.CleanRoot(root)
	if err != nil {
		return "", err
	}
	res, err := d.ExecContext(ctx, `UPDATE import_suppliers SET document_root = $2 WHERE code = $1`, code, root)
	if other, ok := db.UniqueViolationDetail(err, rootOverlapConstraint); ok {
		return "", rootOverlap(root, other)
	}
	if err != nil {
		return "", fmt.Errorf("set document root: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return "", problem.Invalidf("import_supplier_not_found", "code", "Supplier %s does not exist.", code)
	}
	return root, nil
}

// OptionRequireDocuments is the supplier option that SetSupplierOption sets
// for Supplier.RequireDocuments.
const OptionRequireDocuments = "require-documents"

// SetSupplierOption turns a supplier's option on or off. The only option is
// OptionRequireDocuments; it holds from the next request on (E5's worker
// reads the supplier without a cache; E3 and E4 do not use it).
func SetSupplierOption(ctx context.Context, d *db.DB, code, option string, on bool) error {
	if option != OptionRequireDocuments {
		return problem.Invalidf("invalid_choice", "option", "Option %q is not one of %s.", option, OptionRequireDocuments)
	}
	res, err := d.ExecContext(ctx, `UPDATE import_suppliers SET require_documents = $2 WHERE code = $1`, code, on)
	if err != nil {
		return fmt.Errorf("set supplier option: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return problem.Invalidf("import_supplier_not_found", "code", "Supplier %s does not exist.", code)
	}
	return nil
}

// ListSuppliers returns every supplier by code.
func ListSuppliers(ctx context.Context, d *db.DB) ([]Supplier, error) {
	out := []Supplier{}
	if err := d.SelectContext(ctx, &out, `SELECT * FROM import_suppliers ORDER BY code`); err != nil {
		return nil, fmt.Errorf("list suppliers: %w", err)
	}
	return out, nil
}

// CodeInvalidTimeZone refuses a time zone that is not an IANA name both
// this binary and PostgreSQL know.
const CodeInvalidTimeZone = "invalid_time_zone"

// checkTimeZone accepts an IANA zone name that Go's time zone database
// (embedded in the binaries) and PostgreSQL's both know: the service dates
// "today" in Go, and the first open day of a new account in PostgreSQL.
func checkTimeZone(ctx context.Context, q sqlx.QueryerContext, name string) error {
	refuse := problem.Invalidf(CodeInvalidTimeZone, "time_zone",
		"Time zone %q is not an IANA time zone name such as Europe/London or Australia/Sydney.", name)
	if strings.TrimSpace(name) == "" || strings.EqualFold(name, "local") {
		return refuse
	}
	if _, err := time.LoadLocation(name); err != nil {
		return refuse
	}
	var known bool
	if err := sqlx.GetContext(ctx, q, &known, `SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = $1)`, name); err != nil {
		return fmt.Errorf("check time zone: %w", err)
	}
	if !known {
		return refuse
	}
	return nil
}

// SetSupplierTimeZone sets the zone in which the supplier's "today" is
// dated. The API's replicas remember a supplier's zone for half a minute,
// so the change holds everywhere within that.
func SetSupplierTimeZone(ctx context.Context, d *db.DB, code, zone string) error {
	if err := checkTimeZone(ctx, d, zone); err != nil {
		return err
	}
	res, err := d.ExecContext(ctx, `UPDATE import_suppliers SET time_zone = $2 WHERE code = $1`, code, zone)
	if err != nil {
		return fmt.Errorf("set time zone: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return problem.Invalidf("import_supplier_not_found", "code", "Supplier %s does not exist.", code)
	}
	return nil
}
