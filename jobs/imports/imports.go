// Package imports holds the import process of spec 2.3 and 3.2: staging a
// validated account payload (E4) and reporting progress (E10 to E13). An
// import process is keyed by (import supplier, external account number).
package imports

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"bulkimport/jobs/account"
	"bulkimport/jobs/problem"
)

// Status values of an import process (spec 2.4).
const (
	StatusUnknown    = "UNKNOWN"
	StatusInProgress = "IN_PROGRESS"
	StatusCompleted  = "COMPLETED"
)

// Error codes of staging refusals. Each refusal has its own code so that a
// migration team's tooling can branch on it.
const (
	CodeAlreadyImported        = "account_import_process_already_imported"
	CodeSkipped                = "account_marked_to_be_skipped"
	CodeSupplierNotOngoing     = "import_supplier_migration_not_ongoing"
	CodeInProgress             = "account_import_in_progress"
	CodeProcessDoesNotExist    = "import_process_does_not_exist"
	CodeImportSupplierNotFound = "import_supplier_not_found"
)

// Service stages accounts and answers progress queries.
type Service struct {
	db  *sqlx.DB
	now func() time.Time
}

// New returns a Service.
func New(d *sqlx.DB) *Service {
	return &Service{db: d, now: time.Now}
}

// Validator returns the account validator for a caller who may see the
// suppliers for which visible returns true.
func (s *Service) Validator(visible func(code string) bool) account.Validator {
	return account.Validator{Catalog: account.NewCatalog(s.db, visible), Now: s.now}
}

// StageResult is the answer to a successful staging.
type StageResult struct {
	ImportSupplier        string `json:"import_supplier"`
	ExternalAccountNumber string `json:"external_account_number"`
	// Created is true for the first staging of the account (201), false
	// when earlier staged data was replaced (200).
	Created bool `json:"-"`
}

// AlreadyImported is the refusal for an account that exists already. It
// carries both numbers so that a client that lost a 201 can recover the
// service account number.
func AlreadyImported(externalAccountNumber, serviceAccountNumber string) *problem.Error {
	return problem.New(problem.Invalid, CodeAlreadyImported,
		"Account "+externalAccountNumber+" has already been imported as "+serviceAccountNumber+".").
		With("external_account_number", externalAccountNumber).
		With("service_account_number", serviceAccountNumber)
}

// Stage validates body with the rules of E3 and upserts it as the staged data
// of its account. visible limits the suppliers the caller may address.
//
// The supplier's status, the skip mark and the process's state are read in
// the same statement as the upsert, so that a supplier paused or an account
// imported a moment ago is never staged over.
func (s *Service) Stage(ctx context.Context, body []byte, visible func(string) bool) (StageResult, error) {
	acc, err := s.Validator(visible).Validate(ctx, body)
	if err != nil {
		return StageResult{}, err
	}
	payload, err := json.Marshal(acc)
	if err != nil {
		return StageResult{}, fmt.Errorf("stage: encode: %w", err)
	}
	ean := acc.ExternalAccountNumber
	var r struct {
		SupplierStatus string         `db:"supplier_status"`
		Skipped        bool           `db:"skipped"`
		Inserted       sql.NullBool   `db:"inserted"`
		PriorStatus    sql.NullString `db:"prior_status"`
		PriorNumber    sql.NullString `db:"prior_number"`
	}
	// The CTEs all see the snapshot taken before the upsert, so prior_*
	// describe the row as it was when the upsert declined to touch it.
	err = s.db.GetContext(ctx, &r, `
		WITH sup AS (SELECT status FROM import_suppliers WHERE id = $1),
		skip AS (SELECT 1 FROM skipped_accounts WHERE supplier_id = $1 AND external_account_number = $2),
		up AS (
			INSERT INTO import_processes AS p (supplier_id, external_account_number, payload)
			SELECT $1, $2, $3
			WHERE (SELECT status FROM sup) = 'Ongoing' AND NOT EXISTS (SELECT 1 FROM skip)
			ON CONFLICT (supplier_id, external_account_number) DO UPDATE
				SET payload = EXCLUDED.payload, updated_at = now()
				WHERE p.status = 'UNKNOWN' AND p.service_account_number IS NULL
			RETURNING (xmax = 0) AS inserted)
		SELECT (SELECT status FROM sup) AS supplier_status,
		       EXISTS (SELECT 1 FROM skip) AS skipped,
		       (SELECT inserted FROM up) AS inserted,
		       p.status AS prior_status, p.service_account_number AS prior_number
		FROM (SELECT 1) one
		LEFT JOIN import_processes p ON p.supplier_id = $1 AND p.external_account_number = $2`,
		acc.Supplier.ID, ean, payload)
	if err != nil {
		return StageResult{}, fmt.Errorf("stage: %w", err)
	}
	switch {
	case r.Inserted.Valid:
		return StageResult{ImportSupplier: acc.ImportSupplier, ExternalAccountNumber: ean, Created: r.Inserted.Bool}, nil
	case r.SupplierStatus != "Ongoing":
		return StageResult{}, problem.Invalidf(CodeSupplierNotOngoing, "import_supplier",
			"Import supplier %s is %s; it does not accept accounts.", acc.ImportSupplier, r.SupplierStatus)
	case r.Skipped:
		return StageResult{}, problem.Invalidf(CodeSkipped, "external_account_number",
			"Account %s is marked to be skipped by the migration.", ean)
	case r.PriorNumber.Valid:
		return StageResult{}, AlreadyImported(ean, r.PriorNumber.String)
	case r.PriorStatus.String == StatusInProgress:
		return StageResult{}, problem.Invalidf(CodeInProgress, "external_account_number",
			"Account %s is being created now; its staged data cannot change.", ean)
	}
	return StageResult{}, fmt.Errorf("stage: upsert of %s declined for no known reason", ean)
}

// ProcessStatus is the answer of E10. LastError is an addition to the spec:
// why the last attempt failed, so that a team can fix the data.
type ProcessStatus struct {
	Status               string          `json:"status"`
	ServiceAccountNumber string          `json:"service_account_number"`
	LastError            json.RawMessage `json:"last_error"`
}

// supplierID resolves a supplier code the caller may see. An invisible
// supplier is reported exactly like a missing one.
func (s *Service) supplierID(ctx context.Context, code string, visible func(string) bool) (int64, error) {
	sup, ok, err := account.NewCatalog(s.db, visible).Supplier(ctx, code)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, problem.New(problem.NotFound, CodeImportSupplierNotFound, "Import supplier "+code+" does not exist.")
	}
	return sup.ID, nil
}

// Status answers E10.
func (s *Service) Status(ctx context.Context, supplier, ean string, visible func(string) bool) (ProcessStatus, error) {
	id, err := s.supplierID(ctx, supplier, visible)
	if err != nil {
		return ProcessStatus{}, err
	}
	var r struct {
		Status    string         `db:"status"`
		Number    sql.NullString `db:"service_account_number"`
		LastError []byte         `db:"last_error"`
	}
	err = s.db.GetContext(ctx, &r, `SELECT status, service_account_number, last_error FROM import_processes WHERE supplier_id = $1 AND external_account_number = $2`, id, ean)
	if errors.Is(err, sql.ErrNoRows) {
		return ProcessStatus{}, problem.New(problem.NotFound, CodeProcessDoesNotExist,
			"No import process for account "+ean+" of supplier "+supplier+".")
	}
	if err != nil {
		return ProcessStatus{}, fmt.Errorf("status: %w", err)
	}
	out := ProcessStatus{Status: r.Status, ServiceAccountNumber: r.Number.String, LastError: json.RawMessage("null")}
	if len(r.LastError) > 0 && r.Status != StatusCompleted {
		out.LastError = r.LastError
	}
	return out, nil
}
