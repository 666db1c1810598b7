// Package creation creates accounts, the worker side of E5: Creator.Run
// re-validates an account:process task's staged payload, writes the account
// and everything in it with one statement (create.go, rendered from
// sql/create.sql) inside one PostgreSQL transaction shared with the
// accounts of other tasks that run at once (batch.go), records the outcome,
// and ends the task for its waiters through an Announcer. The request, the
// queue and the wait around it are jobs/process's.
package creation

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/gather"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/status"
)

// Creator creates the accounts of account:process tasks: the worker side
// of E5.
type Creator struct {
	db      *db.DB
	client  *asynq.Client
	catalog account.Catalog
	docs    *documents.Store
	ends    *Announcer
	batch   *gather.Queue[*createJob] // nil: every account in a transaction of its own
	now     func() time.Time
	log     *slog.Logger
}

// NewCreator returns the worker side of E5, which queues e-mails on rdb.
// catalog is unscoped: the API already checked what the caller may see. docs
// is the document store that the payload's notes refer to; nil (no
// DOCUMENTS_URL) fails every account of a supplier that requires documents
// whose notes name a document (document_store_not_configured), because they
// cannot be checked. ends ends each task for its waiters once its outcome is
// recorded. log reports what fails after the outcome is decided (recording
// it, enqueueing e-mails); neither may be nil.
func NewCreator(d *db.DB, rdb redis.UniversalClient, catalog account.Catalog, docs *documents.Store, ends *Announcer, log *slog.Logger) *Creator {
	if ends == nil || log == nil {
		panic("creation.NewCreator: nil Announcer or *slog.Logger")
	}
	return &Creator{db: d, client: asynq.NewClientFromRedisClient(rdb), catalog: catalog, docs: docs, ends: ends,
		now: time.Now, log: log}
}

// errRestaged makes the task retry when its staged data changed under it.
var errRestaged = errors.New("staged data changed during processing")

// errDryRun rolls back the transaction of a dry run that would have succeeded.
var errDryRun = errors.New("dry run")

// ErrHandedBack is the cause (context.Cause) of the cancelled context of a
// task that a stopping worker handed back to its queue. Asynq v0.26 requeues
// a task still running at the server's ShutdownTimeout as pending, without
// counting an attempt (processor.go, requeue), and only then cancels the
// handler's context: the task runs again on another worker, so the
// cancellation is no outcome, even on the task's last attempt.
var ErrHandedBack = errors.New("task handed back to its queue by a stopping worker")

// Run creates (or dry-runs) the account of one task. final is true on the
// task's last attempt, when an infrastructure failure must be recorded
// because no retry will record a better outcome.
//
// It is safe to run twice for one account: the process row is locked, an
// account that exists already is reported as created, and the unique
// constraints on accounts make a second creation impossible.
func (c *Creator) Run(ctx context.Context, p jobs.AccountProcessPayload, final bool) error {
	taskID := jobs.AccountTaskID(p.SupplierCode, p.ExternalAccountNumber, p.DryRun)
	var invalid *problem.Error
	// Prepared before the transaction: see db.DB.Prepare.
	if err := c.db.Prepare(ctx, readProcessSQL, lockProcessesSQL, createSQL, createManySQL); err != nil {
		return c.failed(ctx, p, taskID, final, err)
	}
	var before processRow
	if err := c.readProcess(ctx, &before, p.ProcessID); err != nil {
		return c.failed(ctx, p, taskID, final, fmt.Errorf("read process %d: %w", p.ProcessID, err))
	}
	// Validation runs before the transaction: its catalogue lookups take a
	// pool connection of their own, and a transaction that waited for one
	// while holding another would deadlock the pool once more tasks run at
	// once than it has connections.
	var acc *account.Account
	if !before.Number.Valid {
		var err error
		acc, err = account.Validator{Catalog: c.catalog, Now: c.now}.Validate(ctx, before.Payload)
		if pe, ok := problem.As(err); ok && pe.Kind == problem.Invalid {
			invalid = pe
		} else if err != nil {
			return c.failed(ctx, p, taskID, final, err)
		}
	}
	if acc != nil && invalid == nil && acc.Supplier.RequireDocuments {
		// For a supplier that requires documents, the documents the notes
		// and the statements name must exist, as for E6 and E8. The check reads the store, so it runs
		// before the transaction, like validation; a document deleted in
		// between is not caught, as it would not be after the commit either.
		var errs problem.List
		refs := append(note.DocumentRefs("notes", acc.Notes), postimport.StatementDocumentRefs("statements", acc.Statements)...)
		err := documents.Check(ctx, c.docs, acc.Supplier.DocumentRoot, refs, &errs)
		if pe, ok := problem.As(err); ok && pe.Code == documents.CodeStoreNotConfigured {
			// A worker's configuration does not change between retries:
			// the account fails at once (500, like the same code from E6),
			// and E5 and E10 say why.
			invalid = pe
		} else if err != nil {
			return c.failed(ctx, p, taskID, final, err)
		} else {
			invalid = account.Failed(errs)
		}
	}
	j := &createJob{p: p, payload: before.Payload, acc: acc, invalid: invalid}
	switch {
	case p.DryRun || c.batch == nil:
		// A dry run rolls back whatever it wrote, so it never shares a
		// transaction with accounts that are to stay.
		c.createTogether(ctx, []*createJob{j})
	default:
		if err := c.batch.Do(ctx, j); err != nil {
			j.err = err // the task ended before its turn
		}
		if errors.Is(j.err, errSplit) { // its shared transaction was rolled back
			c.createTogether(ctx, []*createJob{j})
		}
	}
	err, number, invalid, outbox := j.err, j.number, j.result, j.outbox
	switch {
	case errors.Is(err, errDryRun) && invalid == nil:
		c.ends.DryRunSucceeded(ctx, taskID)
		return nil
	case invalid != nil:
		// Not retried: the same data would fail the same way. The team fixes
		// the payload, stages it again and calls E5 again.
		rec := invalid.ToRecord()
		if !p.DryRun {
			c.recordFailure(ctx, p.ProcessID, rec)
		}
		c.ends.Failed(ctx, taskID, rec)
		return &jobs.Refused{Code: rec.Code, Err: fmt.Errorf("account %s refused (%s)", p.ExternalAccountNumber, rec.Code)}
	case err != nil:
		return c.failed(ctx, p, taskID, final, err)
	}
	for _, id := range outbox {
		c.enqueueEmail(ctx, id)
	}
	c.ends.Created(ctx, taskID, number)
	return nil
}

// readProcessSQL reads what Run validates, outside the transaction;
// prepared once per connection since every task runs it.
const readProcessSQL = `SELECT payload, service_account_number FROM import_processes WHERE id = $1`

// processRow is what readProcessSQL and lockProcessesSQL read of a process.
type processRow struct {
	ID      int64          `db:"id"`
	Payload []byte         `db:"payload"`
	Number  sql.NullString `db:"service_account_number"`
}

// readProcess reads the staged payload and the service account number of
// a process into dst, from the pool.
func (c *Creator) readProcess(ctx context.Context, dst *processRow, processID int64) error {
	return c.db.GetContext(ctx, dst, readProcessSQL, processID)
}

// failed handles an infrastructure failure: the task is retried, and on its
// last attempt the failure is recorded so that E10 and the waiters see it.
// A task handed back by a stopping worker (ErrHandedBack) records and
// announces nothing: it has not failed, and keeps its slot and its waiters
// until it runs again.
func (c *Creator) failed(ctx context.Context, p jobs.AccountProcessPayload, taskID string, final bool, err error) error {
	if errors.Is(context.Cause(ctx), ErrHandedBack) {
		return fmt.Errorf("%w: %w", ErrHandedBack, err)
	}
	if final {
		rec := FailedAfterRetriesRecord()
		if !p.DryRun {
			c.recordFailure(ctx, p.ProcessID, rec)
		}
		c.ends.Failed(ctx, taskID, rec)
	}
	return err
}

// FailedAfterRetriesRecord is the failure recorded for a task whose last
// attempt failed for an infrastructure reason (the database or the document
// store out of reach): the service's failure, for which calling E5 again is
// the remedy.
func FailedAfterRetriesRecord() problem.Record {
	return problem.Record{Code: problem.CodeInternal, Errors: []problem.FieldError{},
		Detail: "Account creation failed after retries; see the service logs. Call E5 again to retry."}
}

func (c *Creator) recordFailure(ctx context.Context, processID int64, rec problem.Record) {
	b, _ := json.Marshal(rec)
	if _, err := c.db.ExecContext(context.WithoutCancel(ctx), `UPDATE import_processes SET status = '`+status.Unknown+`', last_error = $2, updated_at = now()
		WHERE id = $1 AND service_account_number IS NULL`, processID, b); err != nil {
		c.log.ErrorContext(ctx, "record failure", "process_id", processID, "error", err)
	}
}

// enqueueEmail queues one migration e-mail after the account committed. The
// outbox row exists whatever happens here; an e-mail whose task was lost is
// found by its empty sent_at.
func (c *Creator) enqueueEmail(ctx context.Context, outboxID int64) {
	task, err := jobs.NewEmailSendTask(outboxID)
	if err == nil {
		_, err = c.client.EnqueueContext(context.WithoutCancel(ctx), task)
	}
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		c.log.ErrorContext(ctx, "enqueue e-mail", "outbox_id", outboxID, "error", err)
	}
}
