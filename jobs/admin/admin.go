// Package admin holds the operator's catalogue: import suppliers, operations
// teams, products with their tariffs, and accounts marked to be skipped. These
// are set up by the service operator (importctl), not through the REST API.
package admin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// Supplier statuses (spec 3.1).
const (
	StatusOngoing  = "Ongoing"
	StatusPaused   = "Paused"
	StatusComplete = "Complete"
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
}

// CanonicalStatus returns the status that s names in any case (ongoing,
// PAUSED), or s unchanged when it names none, for checkStatus to refuse.
func CanonicalStatus(s string) string {
	for _, st := range []string{StatusOngoing, StatusPaused, StatusComplete} {
		if strings.EqualFold(s, st) {
			return st
		}
	}
	return s
}

func checkStatus(s string) error {
	switch s {
	case StatusOngoing, StatusPaused, StatusComplete:
		return nil
	}
	return problem.Invalidf("invalid_choice", "status", "Status %q is not one of Ongoing, Paused, Complete.", s)
}

// CreateSupplier validates and stores a new supplier. Status defaults to
// Ongoing, country to GB and the document root to documents.DefaultRoot; a
// root that overlaps another supplier's is refused (document_root_overlap).
func CreateSupplier(ctx context.Context, d *sqlx.DB, s Supplier) (Supplier, error) {
	if s.Status == "" {
		s.Status = StatusOngoing
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
		INSERT INTO import_suppliers (code, status, document_root, country, migration_emails, require_documents)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING *`, s.Code, s.Status, s.DocumentRoot, s.Country, s.MigrationEmails, s.RequireDocuments)
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
func SetSupplierStatus(ctx context.Context, d *sqlx.DB, code, status string) error {
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
func SetDocumentRoot(ctx context.Context, d *sqlx.DB, code, root string) (string, error) {
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
func SetSupplierOption(ctx context.Context, d *sqlx.DB, code, option string, on bool) error {
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
func ListSuppliers(ctx context.Context, d *sqlx.DB) ([]Supplier, error) {
	out := []Supplier{}
	if err := d.SelectContext(ctx, &out, `SELECT * FROM import_suppliers ORDER BY code`); err != nil {
		return nil, fmt.Errorf("list suppliers: %w", err)
	}
	return out, nil
}

// Team is an operations team that created accounts are linked to.
type Team struct {
	ID        int64     `db:"id" json:"-"`
	Name      string    `db:"name" json:"name"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
}

// CreateTeam stores a new operations team.
func CreateTeam(ctx context.Context, d *sqlx.DB, name string) (Team, error) {
	var t Team
	if strings.TrimSpace(name) == "" {
		return t, problem.Invalidf("blank", "name", "The team name may not be blank.")
	}
	err := d.GetContext(ctx, &t, `INSERT INTO operations_teams (name) VALUES ($1) RETURNING *`, name)
	if db.IsUniqueViolation(err, "") {
		return t, problem.Invalidf("already_exists", "name", "Team %q already exists.", name)
	}
	if err != nil {
		return t, fmt.Errorf("create team: %w", err)
	}
	return t, nil
}

// ListTeams returns every team by name.
func ListTeams(ctx context.Context, d *sqlx.DB) ([]Team, error) {
	out := []Team{}
	if err := d.SelectContext(ctx, &out, `SELECT * FROM operations_teams ORDER BY name`); err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	return out, nil
}

// Product is a catalogue product with its tariffs. Agreements' tariff_code
// and transactions' product_code must match this catalogue.
type Product struct {
	Code    string         `db:"code" json:"code"`
	Tariffs pq.StringArray `db:"tariffs" json:"tariffs"`
}

// CreateProduct stores a product and its tariffs in one transaction.
func CreateProduct(ctx context.Context, d *sqlx.DB, code string, tariffs []string) (Product, error) {
	p := Product{Code: code, Tariffs: tariffs}
	if strings.TrimSpace(code) == "" {
		return p, problem.Invalidf("blank", "code", "The product code may not be blank.")
	}
	if len(tariffs) == 0 {
		return p, problem.Invalidf("required", "tariff", "A product needs at least one tariff.")
	}
	err := db.InTx(ctx, d, func(tx *sqlx.Tx) error {
		var id int64
		err := tx.GetContext(ctx, &id, `INSERT INTO products (code) VALUES ($1) RETURNING id`, code)
		if db.IsUniqueViolation(err, "") {
			return problem.Invalidf("already_exists", "code", "Product %s already exists.", code)
		}
		if err != nil {
			return fmt.Errorf("create product: %w", err)
		}
		for _, t := range tariffs {
			if strings.TrimSpace(t) == "" {
				return problem.Invalidf("blank", "tariff", "A tariff code may not be blank.")
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO tariffs (product_id, code) VALUES ($1, $2)`, id, t)
			if db.IsUniqueViolation(err, "") {
				return problem.Invalidf("already_exists", "tariff", "Tariff %s already exists.", t)
			}
			if err != nil {
				return fmt.Errorf("create tariff: %w", err)
			}
		}
		return nil
	})
	return p, err
}

// ListProducts returns every product with its tariffs.
func ListProducts(ctx context.Context, d *sqlx.DB) ([]Product, error) {
	out := []Product{}
	err := d.SelectContext(ctx, &out, `
		SELECT p.code, coalesce(array_agg(t.code ORDER BY t.code) FILTER (WHERE t.code IS NOT NULL), '{}') AS tariffs
		FROM products p LEFT JOIN tariffs t ON t.product_id = p.id
		GROUP BY p.id ORDER BY p.code`)
	if err != nil {
		return nil, fmt.Errorf("list products: %w", err)
	}
	return out, nil
}

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
func SkipAccount(ctx context.Context, d *sqlx.DB, supplier, externalAccountNumber string) error {
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
func UnskipAccount(ctx context.Context, d *sqlx.DB, supplier, externalAccountNumber string) error {
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
func ListSkipped(ctx context.Context, d *sqlx.DB, supplier string) ([]Skipped, error) {
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
func PurgeStaged(ctx context.Context, d *sqlx.DB, code string, force bool) (int64, error) {
	var status string
	err := d.GetContext(ctx, &status, `SELECT status FROM import_suppliers WHERE code = $1`, code)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, problem.Invalidf("import_supplier_not_found", "code", "Supplier %s does not exist.", code)
	}
	if err != nil {
		return 0, fmt.Errorf("purge staged: %w", err)
	}
	if status == StatusOngoing && !force {
		return 0, problem.Invalidf("import_supplier_migration_ongoing", "code",
			"Supplier %s is Ongoing: set it Complete (or Paused) when its migration is closed, or force the purge.", code)
	}
	res, err := d.ExecContext(ctx, `
		UPDATE import_processes p SET payload = '{}'::jsonb, updated_at = now()
		FROM import_suppliers s
		WHERE s.code = $1 AND p.supplier_id = s.id
		  AND p.status = 'COMPLETED' AND p.service_account_number IS NOT NULL AND p.payload <> '{}'::jsonb`, code)
	if err != nil {
		return 0, fmt.Errorf("purge staged: %w", err)
	}
	return res.RowsAffected()
}
