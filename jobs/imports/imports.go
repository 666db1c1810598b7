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
	"log/slog"
	"time"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/status"
	"github.com/bulkimport/bulkimport/jobs/validate"
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
	db      *db.DB
	catalog *account.CatalogCache
	// supplyTypes remembers the supply types it has found (never removed).
	supplyTypes account.SupplyTypeCatalog
	now         func() time.Time
	log         *slog.Logger
}

// catalogTTL is how long validation trusts that a supplier, tariff or
// business contract it has seen still exists. Without the cache, the
// catalogue query was one of the two database round trips of every E3 and
// one of three of every E4. Only positive answers are kept, and nothing the
// operator can do through importctl makes one false (suppliers, tariffs and
// contracts are never deleted; the supplier status that staging depends on
// is read again by the staging statement itself). A supplier's time zone
// is cached with it, and E3 and E4 date today in it, so the bound is the
// service's one bound for a supplier's zone: a minute here once kept a
// changed zone from E3 and E4 twice as long as the docs promise.
const catalogTTL = validate.ZoneTTL

// New returns a Service. It logs nothing until WithLog gives it a logger.
func New(d *db.DB) *Service {
	return &Service{db: d, catalog: account.NewCatalogCache(d, catalogTTL), supplyTypes: account.NewSupplyTypeCatalog(d), now: time.Now,
		log: slog.New(slog.DiscardHandler)}
}

// WithLog makes s log to log what it cannot tell a caller: a refusal it
// could not record for the migration progress page. It returns s.
func (s *Service) WithLog(log *slog.Logger) *Service {
	s.log = log
	return s
}

// Validator returns the account validator for a caller who may see the
// suppliers for which visible returns true.
func (s *Service) Validator(visible func(code string) bool) account.Validator {
	return account.Validator{Catalog: s.catalog.View(visible), SupplyTypes: s.supplyTypes, Now: s.now}
}

// StageResult is the answer to a successful staging.
type StageResult struct {
	ImportSupplier        string `json:"import_supplier"`
	ExternalAccountNumber string `json:"external_account_number"`
	// Created is true for the first staging of the account (201), false
	// when earlier staged data was replaced (200).
	Created bool `json:"-"`
}

// AlreadyImported is the refusal for an account that exists already, the
// same from E3, E4 and E5 as the reference's AccountAlreadyImportedResponse
// (reference-api.md 4.3): it carries both numbers, so that a client that
// lost a 201 can recover the service account number, and the reference's
// non_field_errors message as the one problem at attr non_field_errors (the
// path drf-standardized-errors gives it).
func AlreadyImported(externalAccountNumber, serviceAccountNumber string) *problem.Error {
	detail := "The account import process with the account number " + externalAccountNumber + " has already been imported."
	p := problem.New(problem.Invalid, CodeAlreadyImported, detail).
		With("external_account_number", externalAccountNumber).
		With("service_account_number", serviceAccountNumber)
	p.Errors = []problem.FieldError{{Detail: detail, Code: CodeAlreadyImported, Attr: "non_field_errors"}}
	return p
}

// Validate is E3: it validates body with the account rules and, when the
// payload is valid, refuses an account that is already imported as the
// reference's validate endpoint does (AlreadyImported). A payload with
// problems gets those first, as E4 does: the account's number is only
// trusted once the payload is valid. A refusal of an account it can name
// is kept for the migration progress page (recordRefusal, step validate).
func (s *Service) Validate(ctx context.Context, body []byte, visible func(string) bool) (*account.Account, error) {
	acc, subj, err := s.Validator(visible).ValidateSubject(ctx, body)
	if err != nil {
		s.recordRefusal(ctx, StepValidate, subj, err)
		return nil, err
	}
	var number sql.NullString
	err = s.db.GetContext(ctx, &number, `SELECT service_account_number FROM import_processes
		WHERE supplier_id = $1 AND external_account_number = $2`, acc.Supplier.ID, acc.ExternalAccountNumber)
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return nil, fmt.Errorf("validate: read import process: %w", err)
	}
	if number.Valid {
		return nil, AlreadyImported(acc.ExternalAccountNumber, number.String)
	}
	return acc, nil
}

// Stage validates body with the rules of E3 and upserts it as the staged data
// of its account. visible limits the suppliers the caller may address.
//
// The supplier's status, the skip mark and the process's state are read in
// the same statement as the upsert, so that a supplier paused or an account
// imported a moment ago is never staged over. A refusal of an account it
// can name is kept for the migration progress page (recordRefusal, step
// stage), and a staging that succeeds deletes the account's refusal in the
// same statement.
func (s *Service) Stage(ctx context.Context, body []byte, visible func(string) bool) (StageResult, error) {
	acc, subj, err := s.Validator(visible).ValidateSubject(ctx, body)
	if err != nil {
		s.recordRefusal(ctx, StepStage, subj, err)
		return StageResult{}, err
	}
	// The payload is stored as JSONB, which keeps the value and not the
	// text, so AppendJSON's encoding (E3's answer, which escapes <, > and &
	// in fewer places than json.Marshal) stores what json.Marshal's did, at
	// a sixth of the cost. Its buffer is sized by the body, about as long
	// as the normalised payload: grown from nothing, it was copied a dozen
	// times.
	payload, err := acc.AppendJSON(make([]byte, 0, len(body)+len(body)/8))
	if err != nil {
		return StageResult{}, fmt.Errorf("stage: encode: %w", err)
	}
	ean := acc.ExternalAccountNumber
	// The statement's CTEs and its final SELECT all read the snapshot taken
	// when it started, but the upsert's DO UPDATE ... WHERE is checked
	// against the newest version of the row, after waiting for any
	// transaction that holds it. So when the worker marks the row
	// IN_PROGRESS or COMPLETED while this statement waits for it, the upsert
	// declines and the snapshot still shows a stageable row. Running the
	// statement again gives it a snapshot that includes the worker's commit,
	// which names the reason (or stages, if the worker put the row back).
	for range stageAttempts {
		res, explained, err := s.upsert(ctx, acc, payload)
		if explained {
			if err != nil {
				s.recordRefusal(ctx, StepStage, subj, err)
			}
			return res, err
		}
	}
	return StageResult{}, fmt.Errorf("stage: upsert of %s declined %d times for no known reason", ean, stageAttempts)
}

// stageAttempts bounds how often Stage runs its statement when rows keep
// changing under it.
const stageAttempts = 3

// upsert runs the staging statement once. explained is false when the
// upsert declined although the statement's snapshot shows no reason to.
func (s *Service) upsert(ctx context.Context, acc *account.Account, payload []byte) (res StageResult, explained bool, err error) {
	ean := acc.ExternalAccountNumber
	var r struct {
		SupplierStatus string         `db:"supplier_status"`
		Skipped        bool           `db:"skipped"`
		Inserted       sql.NullBool   `db:"inserted"`
		PriorStatus    sql.NullString `db:"prior_status"`
		PriorNumber    sql.NullString `db:"prior_number"`
	}
	err = s.db.GetContext(ctx, &r, stageSQL, acc.Supplier.ID, ean, payload)
	if err != nil {
		return StageResult{}, true, fmt.Errorf("stage: %w", err)
	}
	switch {
	case r.Inserted.Valid:
		return StageResult{ImportSupplier: acc.ImportSupplier, ExternalAccountNumber: ean, Created: r.Inserted.Bool}, true, nil
	case r.SupplierStatus != status.Ongoing:
		return StageResult{}, true, problem.Invalidf(CodeSupplierNotOngoing, "import_supplier",
			"Import supplier %s is %s; it does not accept accounts.", acc.ImportSupplier, r.SupplierStatus)
	case r.Skipped:
		return StageResult{}, true, problem.Invalidf(CodeSkipped, "external_account_number",
			"Account %s is marked to be skipped by the migration.", ean)
	case r.PriorNumber.Valid:
		return StageResult{}, true, AlreadyImported(ean, r.PriorNumber.String)
	case r.PriorStatus.String == status.InProgress:
		return StageResult{}, true, problem.Invalidf(CodeInProgress, "external_account_number",
			"Account %s is being created now; its staged data cannot change.", ean)
	}
	return StageResult{}, false, nil
}

// stageSQL upserts the staged payload ($3) of account $2 of supplier $1
// unless the supplier is not Ongoing, the account is marked to be skipped or
// is being or has been created, and reports which of these held. When it
// stages, it also deletes the account's staging refusal (migration 00043):
// in the same statement, so that an account without one, the usual case,
// costs one probe of staging_refusals' unique index and no round trip.
const stageSQL = `
		WITH sup AS (SELECT status FROM import_suppliers WHERE id = $1),
		skip AS (SELECT 1 FROM skipped_accounts WHERE supplier_id = $1 AND external_account_number = $2),
		up AS (
			INSERT INTO import_processes AS p (supplier_id, external_account_number, payload)
			SELECT $1, $2, $3
			WHERE (SELECT status FROM sup) = '` + status.Ongoing + `' AND NOT EXISTS (SELECT 1 FROM skip)
			ON CONFLICT (supplier_id, external_account_number) DO UPDATE
				SET payload = EXCLUDED.payload, updated_at = now()
				WHERE p.status = '` + status.Unknown + `' AND p.service_account_number IS NULL
			RETURNING (xmax = 0) AS inserted),
		cleared AS (
			DELETE FROM staging_refusals
			WHERE supplier_id = $1 AND external_account_number = $2 AND EXISTS (SELECT 1 FROM up))
		SELECT (SELECT status FROM sup) AS supplier_status,
		       EXISTS (SELECT 1 FROM skip) AS skipped,
		       (SELECT inserted FROM up) AS inserted,
		       p.status AS prior_status, p.service_account_number AS prior_number
		FROM (SELECT 1) one
		LEFT JOIN import_processes p ON p.supplier_id = $1 AND p.external_account_number = $2`

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
	if errors.Is(err, db.ErrNotFound) {
		return ProcessStatus{}, problem.New(problem.NotFound, CodeProcessDoesNotExist,
			"No import process for account "+ean+" of supplier "+supplier+".")
	}
	if err != nil {
		return ProcessStatus{}, fmt.Errorf("status: %w", err)
	}
	out := ProcessStatus{Status: r.Status, ServiceAccountNumber: r.Number.String, LastError: json.RawMessage("null")}
	if len(r.LastError) > 0 && r.Status != status.Completed {
		out.LastError = r.LastError
	}
	return out, nil
}
