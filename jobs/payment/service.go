package payment

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// Config tunes the API side.
type Config struct {
	// TaskMargin is what a verification task may take beyond the vendor's
	// Budget: reading the vendor, checking for a duplicate, storing. The
	// task's Asynq timeout is the two together. Zero means 10 s: generous,
	// because a task cut short by its timeout leaves the caller with a 500.
	TaskMargin time.Duration
	// QueueWait is how long a request waits, beyond the longest a task can
	// run, for the task to leave the queue. Zero means 10 s.
	QueueWait time.Duration
	// Log reports outcome messages that do not decode; it must not be nil.
	Log *slog.Logger
}

// Service is the API side of E2 and E9.
type Service struct {
	db    *db.DB
	tasks *taskwait.Tasks
	cfg   Config
}

// New returns the API side of E2 and E9: it checks requests against d and
// has the vendor's verification done, and waits for it, through tasks.
func New(d *db.DB, tasks *taskwait.Tasks, cfg Config) *Service {
	if cfg.Log == nil {
		panic("payment.New: nil Config.Log")
	}
	if cfg.TaskMargin <= 0 {
		cfg.TaskMargin = 10 * time.Second
	}
	if cfg.QueueWait <= 0 {
		cfg.QueueWait = 10 * time.Second
	}
	return &Service{db: d, tasks: tasks, cfg: cfg}
}

// outcome is what the worker publishes when a verification ends. Kind is
// set when it failed: one of the kind* values.
type outcome struct {
	Kind  string          `json:"kind,omitempty"`
	Error *problem.Record `json:"error,omitempty"`
}

// Outcome kinds: the problem.Kind of the caller's answer, by name, so that
// an API and a worker of different versions agree on them.
const (
	kindInvalid   = "invalid"   // 400: do not retry in this form
	kindRetryable = "retryable" // 500: an external system failed; retry as is
	kindInternal  = "internal"  // 500: the worker failed; its logs say why
)

func (o outcome) err() error {
	if o.Error == nil {
		return nil
	}
	switch o.Kind {
	case kindInvalid:
		return o.Error.Invalid()
	case kindRetryable:
		return &problem.Error{Kind: problem.RetryableUpstream, Code: o.Error.Code, Detail: o.Error.Detail, Errors: o.Error.Errors}
	}
	return problem.New(problem.Internal, problem.CodeInternal, "payment instruction verification failed in the worker")
}

// vendorCols are the vendor columns of a pre-check, NULL when the vendor
// does not exist.
type vendorCols struct {
	VendorID  sql.NullInt64 `db:"vendor_id"`
	TimeoutMS sql.NullInt64 `db:"timeout_ms"`
	Attempts  sql.NullInt64 `db:"attempts"`
	BackoffMS sql.NullInt64 `db:"backoff_ms"`
}

func (c vendorCols) vendor() Vendor {
	v := Vendor{ID: c.VendorID.Int64, TimeoutMS: c.TimeoutMS.Int64, Attempts: int(c.Attempts.Int64), BackoffMS: c.BackoffMS.Int64}
	v.fromDB()
	return v
}

// visibleCode is code, or the empty string (which no supplier has) when the caller may
// not see it, so that an invisible supplier looks exactly like a missing one.
func visibleCode(code string, visible func(string) bool) string {
	if visible != nil && !visible(code) {
		return ""
	}
	return code
}

func unavailable(err error) *problem.Error {
	p := problem.New(problem.Unavailable, CodeQueueUnavailable, "The job queue is unavailable; nothing was changed. Retry later.")
	p.Cause = err
	return p
}

// AccountAlreadyExists refuses a reference already stored for an account.
// It carries the account's service number and the reference.
func AccountAlreadyExists(reference, serviceAccountNumber string) *problem.Error {
	return problem.Invalidf(CodeAlreadyExists, "reference", "Payment instruction %s is already stored for account %s.", reference, serviceAccountNumber).
		With("service_account_number", serviceAccountNumber).With("reference", reference)
}

// BusinessAlreadyExists refuses a reference already stored for a business.
func BusinessAlreadyExists(reference, externalBusinessIdentifier string) *problem.Error {
	return problem.Invalidf(CodeAlreadyExists, "reference", "Payment instruction %s is already stored for business %s.", reference, externalBusinessIdentifier).
		With("external_business_identifier", externalBusinessIdentifier).With("reference", reference)
}

const accountCheckSQL = `SELECT s.id AS supplier_id, v.id AS vendor_id, v.timeout_ms, v.attempts, v.backoff_ms,
	a.id AS account_id, a.service_account_number,
	EXISTS (SELECT 1 FROM payment_instructions pi WHERE pi.account_id = a.id AND pi.reference = $4) AS duplicate
FROM (SELECT 1) AS one
LEFT JOIN import_suppliers s ON s.code = $1
LEFT JOIN payment_vendors v ON v.name = $2
LEFT JOIN accounts a ON a.supplier_id = s.id AND a.external_account_number = $3`

// CreateForAccount runs E9: it validates body, checks the supplier, account
// and vendor, then has a worker verify the instruction with the vendor and
// store it, and waits for the outcome. visible limits the suppliers the
// caller may address.
//
// Errors: a *problem.Error of Kind Invalid (400: parse_error,
// payment_instruction_failed_validation, payment_instruction_already_exists,
// payment_instruction_not_found_at_vendor,
// payment_instruction_type_mismatch), RetryableUpstream (500:
// payment_vendor_unavailable, payment_vendor_protocol_error,
// payment_verification_unfinished), Unavailable (queue_unavailable), or an
// infrastructure failure.
func (s *Service) CreateForAccount(ctx context.Context, body []byte, visible func(string) bool) (AccountResult, error) {
	req, errs, err := parseAccountRequest(ctx, body)
	if err != nil {
		return AccountResult{}, err
	}
	validate.NoteSubject(ctx, req.ImportSupplier, req.ExternalAccountNumber)
	var c struct {
		SupplierID sql.NullInt64 `db:"supplier_id"`
		vendorCols
		AccountID sql.NullInt64  `db:"account_id"`
		Number    sql.NullString `db:"service_account_number"`
		Duplicate bool           `db:"duplicate"`
	}
	if err := s.db.GetContext(ctx, &c, accountCheckSQL, visibleCode(req.ImportSupplier, visible), req.Vendor,
		req.ExternalAccountNumber, req.Reference); err != nil {
		return AccountResult{}, fmt.Errorf("payment: check account request: %w", err)
	}
	switch {
	case req.ImportSupplier == "":
	case !c.SupplierID.Valid:
		errs.Add("import_supplier", CodeSupplierNotFound, "Import supplier %q not found.", req.ImportSupplier)
	case req.ExternalAccountNumber != "" && !c.AccountID.Valid:
		errs.Add("external_account_number", CodeAccountNotFound,
			"Account %s of import supplier %s has not been imported (E5), or does not exist.", req.ExternalAccountNumber, req.ImportSupplier)
	}
	if req.Vendor != "" && !c.VendorID.Valid {
		errs.Add("vendor", CodeVendorNotFound, "Payment vendor %q is not configured.", req.Vendor)
	}
	if len(errs) > 0 {
		return AccountResult{}, errs.Err(CodeFailedValidation, detailFailed)
	}
	if c.Duplicate {
		return AccountResult{}, AccountAlreadyExists(req.Reference, c.Number.String)
	}
	p := jobs.PaymentInstructionVerifyPayload{SupplierID: c.SupplierID.Int64, VendorID: c.VendorID.Int64,
		Reference: req.Reference, Type: req.Type, AccountID: c.AccountID.Int64}
	if err := s.verify(ctx, p, c.vendor(), AccountAlreadyExists(req.Reference, c.Number.String)); err != nil {
		return AccountResult{}, err
	}
	return AccountResult{ServiceAccountNumber: c.Number.String, Reference: req.Reference}, nil
}

const businessCheckSQL = `SELECT s.id AS supplier_id, v.id AS vendor_id, v.timeout_ms, v.attempts, v.backoff_ms,
	ARRAY(SELECT b.id FROM businesses b WHERE b.supplier_id = s.id AND b.external_business_identifier = $3 ORDER BY b.id) AS business_ids
FROM (SELECT 1) AS one
LEFT JOIN import_suppliers s ON s.code = $1
LEFT JOIN payment_vendors v ON v.name = $2`

// accountsSQL returns one row per number asked for, in order: the account
// (NULL when not imported) and the business its contract belongs to.
const accountsSQL = `SELECT a.id AS account_id, c.business_id
FROM unnest($2::text[]) WITH ORDINALITY AS u(number, n)
LEFT JOIN accounts a ON a.supplier_id = $1 AND a.external_account_number = u.number
LEFT JOIN business_contracts c ON c.id = a.business_contract_id
ORDER BY u.n`

// CreateForBusiness runs E2, as CreateForAccount runs E9. Every listed
// account must be imported and belong, through its business contract, to a
// business of the supplier with the external business identifier. Should
// several businesses share the identifier (they differ in name, number or
// type), the first account decides which one is meant, and every other
// account must belong to the same one.
func (s *Service) CreateForBusiness(ctx context.Context, body []byte, visible func(string) bool) (BusinessResult, error) {
	// A supplier the caller cannot see (or that does not exist, which must
	// look the same) is answered before the accounts are parsed, so a large
	// body costs such a caller one scan.
	if code, ok := peekSupplierCode(body); ok && code != "" {
		var exists bool
		if err := s.db.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM import_suppliers WHERE code = $1)`,
			visibleCode(code, visible)); err != nil {
			return BusinessResult{}, fmt.Errorf("payment: check supplier: %w", err)
		}
		if !exists {
			var errs problem.List
			errs.Add("import_supplier_code", CodeSupplierNotFound, "Import supplier %q not found.", code)
			return BusinessResult{}, errs.Err(CodeFailedValidation, detailFailed)
		}
	}
	req, errs, err := parseBusinessRequest(ctx, body)
	if err != nil {
		return BusinessResult{}, err
	}
	validate.NoteSubject(ctx, req.ImportSupplierCode, "")
	var c struct {
		SupplierID sql.NullInt64 `db:"supplier_id"`
		vendorCols
		BusinessIDs pq.Int64Array `db:"business_ids"`
	}
	if err := s.db.GetContext(ctx, &c, businessCheckSQL, visibleCode(req.ImportSupplierCode, visible), req.Vendor,
		req.ExternalBusinessIdentifier); err != nil {
		return BusinessResult{}, fmt.Errorf("payment: check business request: %w", err)
	}
	var businessID int64
	var accountIDs []int64
	switch {
	case req.ImportSupplierCode == "":
	case !c.SupplierID.Valid:
		errs.Add("import_supplier_code", CodeSupplierNotFound, "Import supplier %q not found.", req.ImportSupplierCode)
	default:
		// A business that does not exist is 404, once the body itself is
		// valid: a body with problems of its own gets them first (400),
		// and its accounts, which have no business to belong to, are not
		// looked at.
		if req.ExternalBusinessIdentifier != "" && len(c.BusinessIDs) == 0 && len(errs) == 0 {
			return BusinessResult{}, businessNotFound(req.ExternalBusinessIdentifier, req.ImportSupplierCode)
		}
		var err error
		businessID, accountIDs, err = s.checkAccounts(ctx, &errs, c.SupplierID.Int64, c.BusinessIDs, req)
		if err != nil {
			return BusinessResult{}, err
		}
	}
	if req.Vendor != "" && !c.VendorID.Valid {
		errs.Add("vendor", CodeVendorNotFound, "Payment vendor %q is not configured.", req.Vendor)
	}
	if len(errs) > 0 {
		return BusinessResult{}, errs.Err(CodeFailedValidation, detailFailed)
	}
	var dup bool
	if err := s.db.GetContext(ctx, &dup, `SELECT EXISTS (SELECT 1 FROM payment_instructions WHERE business_id = $1 AND reference = $2)`,
		businessID, req.Reference); err != nil {
		return BusinessResult{}, fmt.Errorf("payment: check duplicate: %w", err)
	}
	if dup {
		return BusinessResult{}, BusinessAlreadyExists(req.Reference, req.ExternalBusinessIdentifier)
	}
	p := jobs.PaymentInstructionVerifyPayload{SupplierID: c.SupplierID.Int64, VendorID: c.VendorID.Int64,
		Reference: req.Reference, Type: req.Type, BusinessID: businessID, AccountIDs: accountIDs}
	if err := s.verify(ctx, p, c.vendor(), BusinessAlreadyExists(req.Reference, req.ExternalBusinessIdentifier)); err != nil {
		return BusinessResult{}, err
	}
	return BusinessResult{Reference: req.Reference, ExternalBusinessIdentifier: req.ExternalBusinessIdentifier}, nil
}

// businessNotFound answers E2 for a business the supplier does not have:
// 404, as the reference's E2 answers ("The business import process have
// not been found", reference-api.md 10), and as E7 and E8 answer for a
// missing account. It comes before the accounts' and the vendor's checks,
// which have nothing to check against, and after the body's own.
func businessNotFound(identifier, supplier string) *problem.Error {
	d := fmt.Sprintf("Business %s of import supplier %s does not exist; create it (E1) first, and check import_supplier_code and external_business_identifier.", identifier, supplier)
	return &problem.Error{Kind: problem.NotFound, Code: CodeBusinessNotFound, Detail: d,
		Errors: []problem.FieldError{{Detail: d, Code: CodeBusinessNotFound, Attr: "external_business_identifier"}}}
}

// checkAccounts adds a problem for every listed account that is not
// imported or not the business's, and returns the business and the
// accounts' ids.
func (s *Service) checkAccounts(ctx context.Context, errs *problem.List, supplierID int64, businessIDs []int64, req BusinessRequest) (int64, []int64, error) {
	if len(req.Accounts) == 0 {
		return 0, nil, nil
	}
	numbers := make([]string, len(req.Accounts))
	for i, a := range req.Accounts {
		numbers[i] = a.ExternalAccountNumber
	}
	var rows []struct {
		AccountID  sql.NullInt64 `db:"account_id"`
		BusinessID sql.NullInt64 `db:"business_id"`
	}
	if err := s.db.SelectContext(ctx, &rows, accountsSQL, supplierID, pq.Array(numbers)); err != nil {
		return 0, nil, fmt.Errorf("payment: check accounts: %w", err)
	}
	// reported holds the attrs with a problem of their own, so that the loop
	// below stays linear in accounts plus problems.
	reported := make(map[string]bool, len(*errs))
	for _, e := range *errs {
		reported[e.Attr] = true
	}
	var businessID int64
	ids := make([]int64, 0, len(rows))
	for i, r := range rows {
		if i%1024 == 0 && ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		n := numbers[i]
		attr := validate.Attr("accounts", i, "external_account_number")
		if n == "" || reported[attr] {
			continue // its own problem was reported already
		}
		switch {
		case !r.AccountID.Valid:
			errs.Add(attr, CodeAccountNotFound, "Account %s of import supplier %s has not been imported (E5), or does not exist.", n, req.ImportSupplierCode)
		case len(businessIDs) == 0:
			// business_not_found says it all.
		case !r.BusinessID.Valid || !slices.Contains(businessIDs, r.BusinessID.Int64):
			errs.Add(attr, CodeAccountNotInBusiness, "Account %s does not belong to business %s through a business contract.", n, req.ExternalBusinessIdentifier)
		case businessID != 0 && r.BusinessID.Int64 != businessID:
			errs.Add(attr, CodeAccountNotInBusiness,
				"Account %s belongs to another business with identifier %s (another name, number or type) than the accounts before it.", n, req.ExternalBusinessIdentifier)
		default:
			businessID = r.BusinessID.Int64
			ids = append(ids, r.AccountID.Int64)
		}
	}
	return businessID, ids, nil
}

// verify has the verification task of p run (or joins the one under way),
// waits for its outcome, and claims the stored instruction. It returns nil
// to the one request that claims it, and duplicate to every other request
// that waited for the same task. The wait lasts the task's timeout and the
// queue's wait, and a takeover gives the new task the whole wait again.
// At every poll it looks in PostgreSQL for the instruction, which ends the
// wait even when the announcement was lost. Running a verification twice
// (a takeover of a worker that was only slow) is safe: the vendor is only
// read, the unique indexes keep one instruction, and the dead task, should
// Asynq's recoverer run it again, finds the instruction stored and ends
// as done (Verifier.Run).
func (s *Service) verify(ctx context.Context, p jobs.PaymentInstructionVerifyPayload, vendor Vendor, duplicate *problem.Error) error {
	taskID := jobs.PaymentInstructionTaskID(p)
	timeout := vendor.Budget() + s.cfg.TaskMargin
	out, err := s.tasks.Do(ctx, taskwait.Work{
		Queue: jobs.QueueVendors, ID: taskID, Type: jobs.TypePaymentInstructionVerify,
		Task: func(id string) (*asynq.Task, error) { return jobs.NewPaymentInstructionVerifyTaskID(p, timeout, id) },
		Wait: timeout + s.cfg.QueueWait, RenewOnTakeover: true,
		Check: func(ctx context.Context) (bool, string, error) {
			stored, err := s.stored(ctx, p)
			return stored, "", err
		},
	})
	switch {
	case errors.Is(err, taskwait.ErrUnavailable):
		return unavailable(err)
	case err != nil:
		return err
	}
	if out.Payload != nil {
		var o outcome
		if err := json.Unmarshal(out.Payload, &o); err != nil {
			s.cfg.Log.WarnContext(ctx, "bad payment outcome message", "task_id", taskID, "error", err)
		} else if err := o.err(); err != nil {
			return err
		}
	}
	// PostgreSQL is the truth; the message only woke us.
	found, claimed, err := s.claim(ctx, p)
	switch {
	case err != nil:
		return fmt.Errorf("payment: read outcome: %w", err)
	case !found:
		if out.TimedOut {
			// Nobody will wait for this task any more: stop it if it can
			// be stopped, so that it does not store the instruction after
			// the caller was told to retry. Should it store anyway, the
			// retry hears payment_instruction_already_exists with the keys
			// it needs.
			taskwait.Abandon(s.tasks.Inspector(), jobs.QueueVendors, out.Current)
		}
		return &problem.Error{Kind: problem.RetryableUpstream, Code: CodeVerificationUnfinished,
			Detail: "The payment instruction could not be verified in time; nothing was stored. Retry as is."}
	case !claimed:
		return duplicate
	}
	return nil
}

// stored reports whether the instruction of p is in PostgreSQL. The request
// checked that it was not before it queued the task.
func (s *Service) stored(ctx context.Context, p jobs.PaymentInstructionVerifyPayload) (bool, error) {
	owner, id := "account_id", p.AccountID
	if p.BusinessID != 0 {
		owner, id = "business_id", p.BusinessID
	}
	var found bool
	err := s.db.GetContext(ctx, &found, fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM payment_instructions WHERE %s = $1 AND reference = $2)`, owner), id, p.Reference)
	return found, err
}

// claimSQL marks the stored instruction as answered, unless a request did
// already. Concurrent claims of one row queue on its row lock, and each
// after the first finds answered_at set and updates nothing, so exactly one
// request claims it (migration 00007).
const claimSQL = `WITH i AS (SELECT id FROM payment_instructions WHERE %s = $1 AND reference = $2),
	c AS (UPDATE payment_instructions SET answered_at = now() WHERE id IN (SELECT id FROM i) AND answered_at IS NULL RETURNING id)
SELECT EXISTS (SELECT 1 FROM i) AS found, EXISTS (SELECT 1 FROM c) AS claimed`

// claim reports whether the instruction of p is stored, and whether this
// request claimed it: identical concurrent requests share one task, which
// stores one row, and only the request that claims it may answer 201.
func (s *Service) claim(ctx context.Context, p jobs.PaymentInstructionVerifyPayload) (found, claimed bool, err error) {
	owner, id := "account_id", p.AccountID
	if p.BusinessID != 0 {
		owner, id = "business_id", p.BusinessID
	}
	var r struct {
		Found   bool `db:"found"`
		Claimed bool `db:"claimed"`
	}
	err = s.db.GetContext(ctx, &r, fmt.Sprintf(claimSQL, owner), id, p.Reference)
	return r.Found, r.Claimed, err
}
