package payment

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/metrics"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// Verifier is the worker side of E2 and E9: it runs
// payment_instruction:verify tasks.
type Verifier struct {
	db     *db.DB
	rdb    redis.UniversalClient
	client *http.Client
	// metrics counts vendor calls (metrics.go); nil counts nothing.
	metrics *metrics.Metrics
	log     *slog.Logger
}

// NewVerifier returns the worker side of E2 and E9. log reports failed
// verifications and vendor attempts; it must not be nil.
func NewVerifier(d *db.DB, rdb redis.UniversalClient, log *slog.Logger) *Verifier {
	if log == nil {
		panic("payment.NewVerifier: nil *slog.Logger")
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Every verification of a busy migration goes to the same few vendors.
	t.MaxIdleConnsPerHost = 32
	// No client timeout: each attempt's context carries the vendor's.
	return &Verifier{db: d, rdb: rdb, client: newVendorClient(t), log: log}
}

// Run verifies and stores the instruction of one task, and announces the
// outcome to the waiting API request. It returns nil when the instruction
// was stored, and an error wrapping asynq.SkipRetry when it was refused:
// the bounded retry against the vendor happens in here, while the caller
// waits, and the refused task stays archived for the operator to see.
// Asynq's retries (jobs.PaymentInstructionVerifyMaxRetry) are for a task
// whose worker died and for an infrastructure failure, whose error does
// not wrap asynq.SkipRetry and is not announced while a retry is left.
//
// It is safe to run twice: a stored instruction is found, and the unique
// indexes refuse a second one.
func (v *Verifier) Run(ctx context.Context, p jobs.PaymentInstructionVerifyPayload) error {
	taskID := jobs.PaymentInstructionTaskID(p)
	o, err := v.run(ctx, p)
	if ctx.Err() != nil {
		// Cancelled (the waiter gave up) or shutting down: nobody hears an
		// announcement, or the task runs again.
		return fmt.Errorf("verify payment instruction %s: %w", p.Reference, ctx.Err())
	}
	if err != nil {
		v.log.ErrorContext(ctx, "verify payment instruction", "task_id", taskID, "error", err)
		rec := problem.Wrap(err, "verify").ToRecord()
		o = outcome{Kind: kindInternal, Error: &rec}
		if retryLeft(ctx) {
			// An infrastructure failure (PostgreSQL or Redis out of reach,
			// as in a restart) is the one failure a retry cures: the task
			// is left to Asynq's retries (jobs.PaymentInstructionVerifyMaxRetry),
			// which stores the instruction or finds it stored by the
			// caller's own retry. Archived at once, it stayed on the
			// dashboard as failed after the caller's retry had stored the
			// instruction. Nothing is announced: the waiting requests wait
			// for the retry's outcome, and a request that joins the task
			// meanwhile does not hear this failure as its answer.
			return fmt.Errorf("payment instruction %s: %s: %w", p.Reference, o.Error.Code, err)
		}
	}
	if perr := taskwait.Publish(ctx, v.rdb, taskID, o); perr != nil {
		v.log.WarnContext(ctx, "publish payment outcome", "task_id", taskID, "error", perr)
	}
	if o.Error != nil && o.Kind != kindInternal {
		return &jobs.Refused{Code: o.Error.Code, Err: fmt.Errorf("payment instruction %s: %s: %s", p.Reference, o.Error.Code, o.Error.Detail)}
	}
	if o.Error != nil {
		return fmt.Errorf("payment instruction %s: %s: %s: %w", p.Reference, o.Error.Code, o.Error.Detail, asynq.SkipRetry)
	}
	return nil
}

// retryLeft reports whether Asynq will run the task of ctx again after a
// failure: it has a retry left. Outside an Asynq handler (a direct call)
// it reports true.
func retryLeft(ctx context.Context) bool {
	retried, ok1 := asynq.GetRetryCount(ctx)
	maxRetry, ok2 := asynq.GetMaxRetry(ctx)
	return !ok1 || !ok2 || retried < maxRetry
}

// refused is the outcome of a failure the caller hears about.
func refused(kind string, p *problem.Error) outcome {
	rec := p.ToRecord()
	return outcome{Kind: kind, Error: &rec}
}

// run returns the outcome to announce, or an error for an infrastructure
// failure.
func (v *Verifier) run(ctx context.Context, p jobs.PaymentInstructionVerifyPayload) (outcome, error) {
	vendor, err := vendorByID(ctx, v.db, p.VendorID)
	if err != nil {
		return outcome{}, err
	}
	if dup, ours, err := v.duplicate(ctx, v.db, p); err != nil || dup != nil || ours {
		return refusedOrNil(dup), err
	}
	adapter, err := newAdapter(vendor, v.client)
	if err != nil {
		return outcome{}, err
	}
	adapter = counted{adapter, vendor.Name, v.metrics}
	in, err := v.fetch(ctx, adapter, vendor, p.Reference)
	var ie *IntermittentError
	var pe *ProtocolError
	var re *RefusedError
	switch {
	case ctx.Err() != nil:
		return outcome{}, ctx.Err()
	case errors.Is(err, ErrNotFound):
		return refused(kindInvalid, problem.Invalidf(CodeNotFoundAtVendor, "reference",
			"Payment vendor %s has no payment instruction %q.", vendor.Name, p.Reference)), nil
	case errors.As(err, &re):
		v.log.WarnContext(ctx, "payment vendor refused the request", "vendor", vendor.Name, "status", re.Status)
		return refused(kindInvalid, problem.Invalidf(CodeVendorRefused, "reference",
			"Payment vendor %s refused to look up payment instruction %q (it answered %s) and will refuse it the same way again. Nothing was stored; do not retry in this form.",
			vendor.Name, p.Reference, re.Status)), nil
	case errors.As(err, &ie):
		v.log.WarnContext(ctx, "payment vendor unavailable", "vendor", vendor.Name, "attempts", vendor.Attempts, "error", err)
		return refused(kindRetryable, problem.New(problem.RetryableUpstream, CodeVendorUnavailable, fmt.Sprintf(
			"Payment vendor %s could not verify the instruction: it %s, after %d attempt(s). Nothing was stored; retry as is.",
			vendor.Name, ie.Reason, vendor.Attempts))), nil
	case errors.As(err, &pe):
		v.log.ErrorContext(ctx, "payment vendor broke the protocol", "vendor", vendor.Name, "reference", p.Reference, "error", err)
		// A protocol violation (a redirect, an answer that is not JSON or
		// too large, a vendor configured with a URL the service will not
		// call) repeats on every try: it is the persistent vendor failure
		// of spec E2 and E9, 400, not the intermittent one a retry cures.
		return refused(kindInvalid, problem.Invalidf(CodeVendorProtocolError, "reference",
			"Payment vendor %s gave an answer the service does not understand, and will give it again; the operator can see it in the logs. Nothing was stored; do not retry in this form.",
			vendor.Name)), nil
	case err != nil:
		return outcome{}, err
	}
	if in.Type != p.Type {
		return refused(kindInvalid, problem.Invalidf(CodeTypeMismatch, "type",
			"Payment vendor %s stores instruction %q as %s, not %s.", vendor.Name, p.Reference, in.Type, p.Type)), nil
	}

	err = db.InTx(ctx, v.db, func(tx *db.Tx) error { return store(ctx, tx, p, in) })
	if db.IsUniqueViolation(err, "") {
		// Stored by a concurrent task (another vendor or type for the same
		// reference) between the check and now. The failed statement
		// aborted the transaction, so the check runs outside it.
		dup, ours, derr := v.duplicate(ctx, v.db, p)
		if derr != nil || (dup == nil && !ours) {
			return outcome{}, errors.Join(err, derr)
		}
		return refusedOrNil(dup), nil
	}
	if err != nil {
		return outcome{}, err
	}
	return outcome{}, nil
}

func refusedOrNil(p *problem.Error) outcome {
	if p == nil {
		return outcome{}
	}
	return refused(kindInvalid, p)
}

// duplicate returns the refusal of an instruction stored already under p's
// reference, or nil. ours reports an instruction of the same vendor and
// type instead: this verification's own work, done by another run of it (a
// takeover of a task whose worker died, or the dead task itself once
// Asynq's recoverer runs it again). That is no refusal: the task ends as
// done rather than archived as failed, and whether a request answers 201
// or already_exists is for the requests to settle (Service.claim).
func (v *Verifier) duplicate(ctx context.Context, q sqlx.QueryerContext, p jobs.PaymentInstructionVerifyPayload) (dup *problem.Error, ours bool, err error) {
	var r struct {
		Key      string         `db:"key"`
		VendorID sql.NullInt64  `db:"vendor_id"`
		Type     sql.NullString `db:"type"`
	}
	owner, id, key := "account_id", p.AccountID, "SELECT a.service_account_number FROM accounts a WHERE a.id = $1"
	if p.BusinessID != 0 {
		owner, id, key = "business_id", p.BusinessID, "SELECT b.external_business_identifier FROM businesses b WHERE b.id = $1"
	}
	err = sqlx.GetContext(ctx, q, &r, fmt.Sprintf(`SELECT (%s) AS key, pi.vendor_id, pi.type
		FROM (SELECT 1) one LEFT JOIN payment_instructions pi ON pi.%s = $1 AND pi.reference = $2`, key, owner), id, p.Reference)
	switch {
	case err != nil:
		return nil, false, wrapErr(err, "check duplicate")
	case !r.VendorID.Valid:
		return nil, false, nil
	case r.VendorID.Int64 == p.VendorID && r.Type.String == p.Type:
		return nil, true, nil
	case p.BusinessID != 0:
		return BusinessAlreadyExists(p.Reference, r.Key), false, nil
	}
	return AccountAlreadyExists(p.Reference, r.Key), false, nil
}

func wrapErr(err error, op string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}

// store writes the instruction, and for a business its accounts.
func store(ctx context.Context, tx *db.Tx, p jobs.PaymentInstructionVerifyPayload, in VendorInstruction) error {
	var accountID, businessID *int64
	if p.BusinessID != 0 {
		businessID = &p.BusinessID
	} else {
		accountID = &p.AccountID
	}
	var id int64
	if err := tx.GetContext(ctx, &id, `INSERT INTO payment_instructions (supplier_id, account_id, business_id, vendor_id,
		reference, type, vendor_status, vendor_details, verified_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now()) RETURNING id`,
		p.SupplierID, accountID, businessID, p.VendorID, p.Reference, p.Type, in.Status, string(in.Details)); err != nil {
		return fmt.Errorf("insert payment instruction: %w", err)
	}
	if len(p.AccountIDs) > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO payment_instruction_accounts (instruction_id, account_id, position)
			SELECT $1, u.a, u.n - 1 FROM unnest($2::bigint[]) WITH ORDINALITY AS u(a, n)`, id, pq.Array(p.AccountIDs)); err != nil {
			return fmt.Errorf("insert payment instruction accounts: %w", err)
		}
	}
	return nil
}

// fetch asks the vendor, each attempt bounded by the vendor's timeout,
// retrying intermittent failures up to the vendor's attempts with
// exponential backoff between them.
func (v *Verifier) fetch(ctx context.Context, a Adapter, vendor Vendor, reference string) (VendorInstruction, error) {
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(ctx, vendor.Timeout)
		in, err := a.Fetch(actx, reference)
		timedOut := errors.Is(actx.Err(), context.DeadlineExceeded)
		cancel()
		if err == nil {
			return in, nil
		}
		if ctx.Err() != nil {
			return in, ctx.Err()
		}
		if timedOut && (IsIntermittent(err) || errors.Is(err, context.DeadlineExceeded)) {
			cause := err
			var ie *IntermittentError
			if errors.As(err, &ie) {
				cause = ie.Cause
			}
			err = &IntermittentError{Reason: "did not answer within " + vendor.Timeout.String(), Cause: cause}
		}
		if !IsIntermittent(err) || n >= vendor.Attempts {
			return in, err
		}
		v.log.InfoContext(ctx, "payment vendor attempt failed; retrying", "vendor", vendor.Name, "attempt", n, "error", err)
		t := time.NewTimer(vendor.BackoffBefore(n + 1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return in, ctx.Err()
		}
	}
}
