package account

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/db"
)

// Supplier is an import supplier as validation and staging need it.
type Supplier struct {
	ID              int64
	Code            string
	Status          string // Ongoing, Paused or Complete (spec 3.1)
	Country         string // ISO 3166-1 alpha-2; national phone numbers and supply postcodes are read in it
	DocumentRoot    string
	MigrationEmails bool
	// RequireDocuments: the documents that notes name must be in the store
	// (checked by E5's worker, never by E3 or E4).
	RequireDocuments bool
	// TimeZone is the IANA zone in which the supplier's "today" is dated
	// (a statement may not end after it); "" reads as UTC.
	TimeZone string
}

// Catalog answers what validation needs to know from outside the payload.
// Errors are infrastructure failures; "not found" is a result, not an error.
type Catalog interface {
	// Supplier returns the import supplier with this code, or ok=false when
	// it does not exist or the caller may not see it.
	Supplier(ctx context.Context, code string) (s Supplier, ok bool, err error)
	// MissingTariffs returns those of codes that are not in the product
	// catalogue.
	MissingTariffs(ctx context.Context, codes []string) ([]string, error)
	// ContractExists reports whether a business contract with this
	// identifier was created (E1) for the supplier.
	ContractExists(ctx context.Context, supplierID int64, identifier string) (bool, error)
}

// Lookup is the answer to all of a payload's catalogue questions at once.
type Lookup struct {
	Supplier      Supplier
	SupplierFound bool
	// MissingTariffs is nil when every tariff exists.
	MissingTariffs []string
	// ContractExists is false when no contract identifier was asked for or
	// the supplier was not found.
	ContractExists bool
}

// BatchCatalog is a Catalog that can answer a whole payload's questions in
// one round trip. The Validator uses it when its Catalog has it: on a local
// PostgreSQL a round trip costs more than validating the rest of the payload,
// so three sequential queries would dominate E3's latency.
type BatchCatalog interface {
	Catalog
	// Lookup resolves the supplier code, the tariff codes, and (when
	// contractIdentifier is not empty and the supplier is found) the
	// business contract.
	Lookup(ctx context.Context, supplierCode string, tariffCodes []string, contractIdentifier string) (Lookup, error)
}

// NewCatalog returns a Catalog backed by PostgreSQL (tables
// import_suppliers, tariffs, business_contracts); it also implements
// BatchCatalog. visible, when non-nil, limits which supplier codes exist for
// this caller (an API key may be limited to some suppliers; an invisible
// supplier must look exactly like a missing one).
func NewCatalog(d *db.DB, visible func(code string) bool) Catalog {
	return &pgCatalog{db: d, visible: visible}
}

type pgCatalog struct {
	db      *db.DB
	visible func(string) bool
}

type supplierRow struct {
	ID              sql.NullInt64  `db:"id"`
	Code            sql.NullString `db:"code"`
	Status          sql.NullString `db:"status"`
	Country         sql.NullString `db:"country"`
	DocumentRoot    sql.NullString `db:"document_root"`
	MigrationEmails sql.NullBool   `db:"migration_emails"`
	RequireDocs     sql.NullBool   `db:"require_documents"`
	TimeZone        sql.NullString `db:"time_zone"`
}

func (r supplierRow) toSupplier() (Supplier, bool) {
	if !r.ID.Valid {
		return Supplier{}, false
	}
	return Supplier{ID: r.ID.Int64, Code: r.Code.String, Status: r.Status.String, Country: r.Country.String,
		DocumentRoot: r.DocumentRoot.String, MigrationEmails: r.MigrationEmails.Bool, RequireDocuments: r.RequireDocs.Bool,
		TimeZone: r.TimeZone.String}, true
}

func (c *pgCatalog) isVisible(code string) bool { return c.visible == nil || c.visible(code) }

func (c *pgCatalog) Supplier(ctx context.Context, code string) (Supplier, bool, error) {
	if !c.isVisible(code) {
		return Supplier{}, false, nil
	}
	var r supplierRow
	err := c.db.GetContext(ctx, &r, `SELECT id, code, status, country, document_root, migration_emails, require_documents,
		time_zone FROM import_suppliers WHERE code = $1`, code)
	if errors.Is(err, db.ErrNotFound) {
		return Supplier{}, false, nil
	}
	if err != nil {
		return Supplier{}, false, fmt.Errorf("query supplier %q: %w", code, err)
	}
	s, ok := r.toSupplier()
	return s, ok, nil
}

// missingTariffsSQL keeps the order of the codes asked for, so that results
// are deterministic.
const missingTariffsSQL = `SELECT c FROM unnest($1::text[]) WITH ORDINALITY AS u(c, n)
	WHERE NOT EXISTS (SELECT 1 FROM tariffs t WHERE t.code = u.c) ORDER BY n`

func (c *pgCatalog) MissingTariffs(ctx context.Context, codes []string) ([]string, error) {
	if len(codes) == 0 {
		return nil, nil
	}
	var missing []string
	if err := c.db.SelectContext(ctx, &missing, missingTariffsSQL, pq.Array(codes)); err != nil {
		return nil, fmt.Errorf("query tariffs: %w", err)
	}
	if len(missing) == 0 {
		return nil, nil
	}
	return missing, nil
}

func (c *pgCatalog) ContractExists(ctx context.Context, supplierID int64, identifier string) (bool, error) {
	var ok bool
	err := c.db.GetContext(ctx, &ok, `SELECT EXISTS (SELECT 1 FROM business_contracts
		WHERE supplier_id = $1 AND identifier = $2)`, supplierID, identifier)
	if err != nil {
		return false, fmt.Errorf("query business contract: %w", err)
	}
	return ok, nil
}

// lookupSQL answers the three questions in one statement. The outer
// one-row select makes sure a row comes back even when the supplier does not
// exist; an invisible supplier is asked for as ”, which no code matches
// (the table's CHECK allows only [A-Z0-9_]+).
//
// Every validation runs it, so it is written to run on PostgreSQL's cached
// generic plan rather than being planned again each time: the tariff codes
// come as a jsonb array, whose length the planner does not estimate from the
// value (it does for a text[] given to unnest, and then always prefers a
// plan for the value at hand), and the contract is looked up even for an
// empty identifier (no contract has one, and Lookup's callers ignore the
// answer then) instead of behind a test of $3 that each plan would fold
// away. TestLookup_RunsOnTheCachedPlan holds this.
const lookupSQL = `SELECT s.id, s.code, s.status, s.country, s.document_root, s.migration_emails, s.require_documents,
	s.time_zone, ARRAY(SELECT c FROM jsonb_array_elements_text($2::jsonb) WITH ORDINALITY AS u(c, n)
		WHERE NOT EXISTS (SELECT 1 FROM tariffs t WHERE t.code = u.c) ORDER BY n) AS missing,
	EXISTS (SELECT 1 FROM business_contracts b WHERE b.supplier_id = s.id AND b.identifier = $3) AS contract
FROM (SELECT 1) AS one
LEFT JOIN import_suppliers s ON s.code = $1`

func (c *pgCatalog) Lookup(ctx context.Context, supplierCode string, tariffCodes []string, contractIdentifier string) (Lookup, error) {
	if !c.isVisible(supplierCode) {
		supplierCode = ""
	}
	var r supplierRow
	var missing pq.StringArray
	var contract bool
	if tariffCodes == nil {
		tariffCodes = []string{}
	}
	codes, _ := json.Marshal(tariffCodes) // a []string always encodes
	// A string, not []byte: lib/pq sends []byte as bytea.
	err := c.db.QueryRowxContext(ctx, lookupSQL, supplierCode, string(codes), contractIdentifier).Scan(
		&r.ID, &r.Code, &r.Status, &r.Country, &r.DocumentRoot, &r.MigrationEmails, &r.RequireDocs, &r.TimeZone, &missing, &contract)
	if err != nil {
		return Lookup{}, fmt.Errorf("catalogue lookup: %w", err)
	}
	l := Lookup{ContractExists: contract}
	if len(missing) > 0 {
		l.MissingTariffs = missing
	}
	l.Supplier, l.SupplierFound = r.toSupplier()
	return l, nil
}
