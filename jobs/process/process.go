// Package process is the API side of E5: it checks what is cheap to check,
// takes a slot of the concurrency limit (jobs/slots), has the account's
// account:process task run and waits for it through taskwait.Tasks, with
// what E5 adds (its row marked IN_PROGRESS, its outcome read from
// PostgreSQL, the claim of a takeover: takeover.go). The worker's side, the
// creation, its announcement and the sweep of tasks that ended without
// their handler, is jobs/creation's. PostgreSQL records every outcome;
// Redis only carries the task, the slots and the wake-up signal.
package process

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
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/imports"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/slots"
	"github.com/bulkimport/bulkimport/jobs/status"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// Error codes of E5 answers.
const (
	CodeTeamNotFound      = "operations_team_name_does_not_exist"
	CodeLimitExceeded     = "concurrency_limit_exceeded"
	CodeQueueUnavailable  = "queue_unavailable"
	CodeStillInProgress   = "account_processing_in_progress"
	CodeDryRunSucceeded   = "dry_run_rolled_back"
	DetailDryRunSucceeded = "Account would successfully import. Rolled back due to dry run."
	limitRetryAfter       = 5 * time.Second
	defaultWait           = 30 * time.Second
)

// Request is the body of E5.
type Request struct {
	ExternalAccountNumber string `json:"external_account_number"`
	ImportSupplierCode    string `json:"import_supplier_code"`
	OperationsTeamName    string `json:"operations_team_name"`
	DryRun                bool   `json:"dry_run"`
}

// Config tunes the API side.
type Config struct {
	// Limit is PROCESS_CONCURRENCY_LIMIT: accounts queued or processing at
	// once across all replicas; 0 disables it.
	Limit int
	// Wait is how long a request waits for its task before answering that
	// the account is still being processed.
	Wait time.Duration
	// Log reports outcome messages that do not decode; it must not be nil.
	Log *slog.Logger
}

// Service is the API side of E5.
type Service struct {
	db    *db.DB
	rdb   redis.UniversalClient
	tasks *taskwait.Tasks
	cfg   Config
	lim   *slots.Limiter
}

// New returns the API side of E5: it checks requests against d, holds the
// concurrency limit's slots in rdb, and has the accounts processed and
// waits for them through tasks.
func New(d *db.DB, rdb redis.UniversalClient, tasks *taskwait.Tasks, cfg Config) *Service {
	if cfg.Log == nil {
		panic("process.New: nil Config.Log")
	}
	if cfg.Wait <= 0 {
		cfg.Wait = defaultWait
	}
	s := &Service{db: d, rdb: rdb, tasks: tasks, cfg: cfg}
	if cfg.Limit > 0 {
		s.lim = slots.NewLimiter(rdb, cfg.Limit)
	}
	return s
}

// Result is the answer of a successful E5 call.
type Result struct {
	ServiceAccountNumber string `json:"service_account_number"`
}

type target struct {
	SupplierID     int64          `db:"supplier_id"`
	SupplierStatus string         `db:"supplier_status"`
	TeamID         sql.NullInt64  `db:"team_id"`
	ProcessID      sql.NullInt64  `db:"process_id"`
	Number         sql.NullString `db:"service_account_number"`
}

// check answers what is cheap to answer without the queue: the supplier, the
// staged data, the team, and whether the account exists already. The
// supplier's status is read fresh here, never from a cache.
func (s *Service) check(ctx context.Context, req Request, visible func(string) bool) (target, error) {
	var t target
	// One statement answers every question; an invisible supplier looks
	// exactly like a missing one, as in account.Catalog.
	if visible != nil && !visible(req.ImportSupplierCode) {
		return t, supplierNotFound(req)
	}
	err := s.db.GetContext(ctx, &t, checkSQL, req.ImportSupplierCode, req.OperationsTeamName, req.ExternalAccountNumber)
	if errors.Is(err, db.ErrNotFound) {
		return t, supplierNotFound(req)
	}
	if err != nil {
		return t, fmt.Errorf("process: check: %w", err)
	}
	switch {
	case t.Number.Valid:
		return t, imports.AlreadyImported(req.ExternalAccountNumber, t.Number.String)
	case !t.ProcessID.Valid:
		return t, problem.Invalidf(imports.CodeProcessDoesNotExist, "external_account_number",
			"No staged data for account %s of supplier %s; stage it first.", req.ExternalAccountNumber, req.ImportSupplierCode)
	case t.SupplierStatus != status.Ongoing:
		return t, problem.Invalidf(imports.CodeSupplierNotOngoing, "import_supplier_code",
			"Import supplier %s is %s; it does not accept accounts.", req.ImportSupplierCode, t.SupplierStatus)
	case !t.TeamID.Valid:
		return t, problem.Invalidf(CodeTeamNotFound, "operations_team_name", "Operations team %q does not exist.", req.OperationsTeamName)
	}
	return t, nil
}

const checkSQL = `
	SELECT s.id AS supplier_id, s.status AS supplier_status, t.id AS team_id,
	       p.id AS process_id, p.service_account_number
	FROM import_suppliers s
	LEFT JOIN operations_teams t ON t.name = $2
	LEFT JOIN import_processes p ON p.supplier_id = s.id AND p.external_account_number = $3
	WHERE s.code = $1`

func supplierNotFound(req Request) *problem.Error {
	return problem.Invalidf(imports.CodeImportSupplierNotFound, "import_supplier_code", "Import supplier %s does not exist.", req.ImportSupplierCode)
}

func unavailable(err error) *problem.Error {
	p := problem.New(problem.Unavailable, CodeQueueUnavailable,
		"The job queue is unavailable; nothing was changed. Retry later.")
	p.Cause = err
	return p
}

// ProcessBody is E5 for its body as the client sent it: it decodes it
// (ParseRequest), notes its account for the request's log, and runs
// Process.
func (s *Service) ProcessBody(ctx context.Context, body []byte, visible func(string) bool) (Result, error) {
	req, err := ParseRequest(ctx, body)
	if err != nil {
		return Result{}, err
	}
	validate.NoteSubject(ctx, req.ImportSupplierCode, req.ExternalAccountNumber)
	return s.Process(ctx, req, visible)
}

// Process runs E5: it has the account's task run (or joins the one under
// way) and answers with its outcome. What E5 adds to taskwait.Tasks is its
// row: marked IN_PROGRESS before a new task is queued, the outcome read
// from it, and its task_id the compare-and-swap of a takeover
// (takeover.go).
func (s *Service) Process(ctx context.Context, req Request, visible func(string) bool) (Result, error) {
	t, err := s.check(ctx, req, visible)
	if err != nil {
		return Result{}, err
	}
	taskID := jobs.AccountTaskID(req.ImportSupplierCode, req.ExternalAccountNumber, req.DryRun)
	if s.lim != nil {
		ok, err := s.lim.Acquire(ctx, taskID)
		if err != nil {
			return Result{}, unavailable(err)
		}
		if !ok {
			p := problem.New(problem.TooManyRequests, CodeLimitExceeded,
				fmt.Sprintf("%d accounts are already being processed; retry when others finish.", s.cfg.Limit))
			p.RetryAfter = limitRetryAfter
			return Result{}, p
		}
	}
	processID := t.ProcessID.Int64
	payload := jobs.AccountProcessPayload{
		ProcessID: processID, SupplierID: t.SupplierID, SupplierCode: req.ImportSupplierCode,
		ExternalAccountNumber: req.ExternalAccountNumber, OperationsTeamID: t.TeamID.Int64, DryRun: req.DryRun,
	}
	// The answer, once an announcement or the row gives it.
	var res Result
	var resErr error
	answer := func(r Result, err error) bool { res, resErr = r, err; return true }
	w := taskwait.Work{
		Queue: jobs.QueueAccounts, ID: taskID, Type: jobs.TypeAccountProcess, Wait: s.cfg.Wait,
		Task: func(id string) (*asynq.Task, error) { return jobs.NewAccountProcessTaskID(payload, id) },
		Prepare: func(ctx context.Context) (func(), error) {
			return s.markInProgress(ctx, req.DryRun, processID, taskID)
		},
		Heard: func(ctx context.Context, b []byte) bool {
			var o jobs.AccountOutcome
			if err := json.Unmarshal(b, &o); err != nil {
				s.cfg.Log.WarnContext(ctx, "bad outcome message", "error", err)
				return false
			}
			return s.heard(ctx, req, processID, o, answer)
		},
	}
	if !req.DryRun { // a dry run leaves no row to read or to claim
		w.Check = func(ctx context.Context) (bool, string, error) {
			o, err := s.readOutcome(ctx, processID)
			if err != nil || o.Status == status.InProgress {
				return false, o.TaskID.String, err
			}
			return answer(o.answer(req)), "", nil
		}
		w.Claim = func(ctx context.Context, current, next string) error {
			return s.claim(ctx, processID, taskID, current, next)
		}
	}
	out, err := s.tasks.Do(ctx, w)
	switch {
	case errors.Is(err, taskwait.ErrUnavailable):
		s.release(taskID)
		return Result{}, unavailable(err)
	case err != nil:
		s.release(taskID)
		return Result{}, err
	case out.TimedOut && req.DryRun:
		return Result{}, stillInProgress(req)
	case out.TimedOut: // PostgreSQL decides
		return s.fromDatabase(ctx, req, processID)
	case out.Payload == nil:
		// The row answered, with no announcement heard: a joined task
		// that ended just before this request subscribed, or a worker
		// that died after writing its outcome. The task's own release may
		// have come before this request's acquire re-took the slot.
		s.release(taskID)
	}
	return res, resErr
}

// heard reads the announcement o of the account's task: done when it gives
// the answer. A created account is final: whichever task announced it, the
// account exists with that number, which is what PostgreSQL would answer,
// and the usual request saves a read. Otherwise PostgreSQL is the truth,
// and the message only woke the request: a row still IN_PROGRESS heard an
// announcement that is not its task's outcome (a sweep's failure of the
// task an E5 has just replaced, or a task superseded by a takeover), and
// the request waits on. A dry run has no row: its announcement is its
// answer.
func (s *Service) heard(ctx context.Context, req Request, processID int64, o jobs.AccountOutcome, answer func(Result, error) bool) bool {
	if !req.DryRun {
		if o.Outcome == jobs.AccountOutcomeCreated && o.ServiceAccountNumber != "" {
			return answer(Result{ServiceAccountNumber: o.ServiceAccountNumber}, nil)
		}
		r, err := s.readOutcome(ctx, processID)
		if err != nil {
			return answer(Result{}, err)
		}
		if r.Status == status.InProgress {
			return false
		}
		return answer(r.answer(req))
	}
	switch o.Outcome {
	case jobs.AccountOutcomeDryRunSucceeded:
		return answer(Result{}, problem.New(problem.Invalid, CodeDryRunSucceeded, DetailDryRunSucceeded))
	case jobs.AccountOutcomeFailed:
		if o.Error != nil {
			return answer(Result{}, recordedError(*o.Error))
		}
	}
	return false
}

// markInProgress records that a new task is about to be queued for the
// account: IN_PROGRESS from that moment (E10), owned by that task (task_id;
// takeover.go). undo puts the status back when nothing was queued after
// all, so that E10 does not show IN_PROGRESS for work that will never run.
func (s *Service) markInProgress(ctx context.Context, dryRun bool, processID int64, taskID string) (undo func(), err error) {
	if dryRun {
		// A dry run must change nothing, E10's status included. It only
		// waits for a sweep that holds the row (Sweeper.Abandoned) to
		// finish, so that the sweep cannot remove the new task.
		if _, err := s.db.ExecContext(ctx, `SELECT 1 FROM import_processes WHERE id = $1 FOR SHARE`, processID); err != nil {
			return nil, fmt.Errorf("process: wait for sweep: %w", err)
		}
		return nil, nil
	}
	_, err = s.db.ExecContext(ctx, `UPDATE import_processes SET status = $3, task_id = $2, updated_at = now()
		WHERE id = $1 AND service_account_number IS NULL`, processID, taskID, status.InProgress)
	if err != nil {
		return nil, fmt.Errorf("process: mark in progress: %w", err)
	}
	return func() {
		_, _ = s.db.ExecContext(context.WithoutCancel(ctx), `UPDATE import_processes SET status = $2
			WHERE id = $1 AND status = $3 AND service_account_number IS NULL`, processID, status.Unknown, status.InProgress)
	}, nil
}

func (s *Service) release(taskID string) {
	if s.lim != nil {
		_ = slots.Release(context.Background(), s.rdb, taskID)
	}
}

// stillInProgress is the answer when no outcome came within the wait. It is
// an error status (500 with Retry-After), never a 2xx, so that no client
// mistakes it for a created account. Calling E5 again joins the same task.
func stillInProgress(req Request) *problem.Error {
	detail := fmt.Sprintf("Account %s is still being processed. Poll GET /v1/data-import/account-transfer-status/%s/%s/ for the outcome.",
		req.ExternalAccountNumber, req.ImportSupplierCode, req.ExternalAccountNumber)
	if req.DryRun {
		// A dry run leaves no trace in E10: the only way to its answer is to ask again.
		detail = fmt.Sprintf("The dry run of account %s is still running. Send the same request again later for its answer.", req.ExternalAccountNumber)
	}
	p := problem.New(problem.Timeout, CodeStillInProgress, detail)
	p.RetryAfter = limitRetryAfter
	return p
}

func (s *Service) fromDatabase(ctx context.Context, req Request, processID int64) (Result, error) {
	o, err := s.readOutcome(ctx, processID)
	if err != nil {
		return Result{}, err
	}
	return o.answer(req)
}

// recorded is the outcome of a process as PostgreSQL holds it, and the
// task its row names.
type recorded struct {
	Status    string         `db:"status"`
	Number    sql.NullString `db:"service_account_number"`
	LastError []byte         `db:"last_error"`
	TaskID    sql.NullString `db:"task_id"`
}

func (s *Service) readOutcome(ctx context.Context, processID int64) (recorded, error) {
	var r recorded
	if err := s.db.GetContext(ctx, &r, `SELECT status, service_account_number, last_error, task_id FROM import_processes WHERE id = $1`, processID); err != nil {
		return r, fmt.Errorf("process: read outcome: %w", err)
	}
	return r, nil
}

// answer is E5's answer for the recorded outcome: still in progress while
// the process has neither a number nor a recorded failure.
func (r recorded) answer(req Request) (Result, error) {
	switch {
	case r.Number.Valid:
		return Result{ServiceAccountNumber: r.Number.String}, nil
	case r.Status == status.Unknown && len(r.LastError) > 0:
		var rec problem.Record
		if err := json.Unmarshal(r.LastError, &rec); err == nil {
			return Result{}, recordedError(rec)
		}
	}
	return Result{}, stillInProgress(req)
}

// serviceFailures are the codes of recorded failures that are the service's,
// not the caller's data: a task that failed after its retries, and a document
// store that is missing or did not answer. They answer as Unavailable (500
// with Retry-After, spec 7.2 "unexpected error"), as the same codes do from
// every other endpoint; any other recorded failure is the data's (400).
var serviceFailures = map[string]bool{
	problem.CodeInternal:                true,
	documents.CodeStoreNotConfigured:    true,
	documents.CodeStoreUnavailable:      true,
	jobs.CodeAccountProcessingAbandoned: true,
	jobs.CodeAccountProcessingLost:      true,
}

// recordedError is the answer of E5 for a failure recorded by the worker
// (in the outcome message or in last_error).
func recordedError(rec problem.Record) *problem.Error {
	e := rec.Invalid()
	if serviceFailures[rec.Code] {
		e.Kind = problem.Unavailable
	}
	return e
}
