// Package process runs E5 requests around the account's creation: the API
// side checks what is cheap to check, enqueues an account:process task (or
// joins the one under way) and waits for its outcome; a concurrency limit
// across replicas holds a slot per task (limit.go, slots.go); a waiting
// request takes over the task of a worker that died (takeover.go); the
// Announcer frees a task's slot and wakes its waiters when it ends, and the
// Sweeper records the outcome of tasks that ended without their handler
// (sweep.go). The creation itself, in the worker, is jobs/creation's.
// PostgreSQL records every outcome; Redis only carries the task, the slots
// and the wake-up signal.
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
	"github.com/bulkimport/bulkimport/jobs/metrics"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// Error codes of E5 answers.
const (
	CodeTeamNotFound       = "operations_team_name_does_not_exist"
	CodeLimitExceeded      = "concurrency_limit_exceeded"
	CodeQueueUnavailable   = "queue_unavailable"
	CodeStillInProgress    = "account_processing_in_progress"
	CodeDryRunSucceeded    = "dry_run_rolled_back"
	CodeAbandoned          = "account_processing_abandoned"
	DetailDryRunSucceeded  = "Account would successfully import. Rolled back due to dry run."
	limitRetryAfter        = 5 * time.Second
	slotTTL                = 10 * time.Minute
	defaultWait            = 30 * time.Second
	outcomeCreated         = "created"
	outcomeFailed          = "failed"
	outcomeDryRunSucceeded = "dry_run_succeeded"
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
	// Hub is the process's shared pub/sub connection for waits; nil gives
	// the Service one of its own.
	Hub *taskwait.Hub
	// Metrics counts the takeovers this process queues; nil counts nothing.
	Metrics *metrics.Metrics
}

// Service is the API side of E5.
type Service struct {
	db        *db.DB
	rdb       redis.UniversalClient
	client    *asynq.Client
	inspector *asynq.Inspector
	cfg       Config
	lim       *limiter
}

// New returns the API side of E5.
func New(d *db.DB, rdb redis.UniversalClient, cfg Config) *Service {
	if cfg.Log == nil {
		panic("process.New: nil Config.Log")
	}
	if cfg.Wait <= 0 {
		cfg.Wait = defaultWait
	}
	if cfg.Hub == nil {
		cfg.Hub = taskwait.NewHub(rdb)
	}
	s := &Service{
		db: d, rdb: rdb, cfg: cfg,
		client:    asynq.NewClientFromRedisClient(rdb),
		inspector: asynq.NewInspectorFromRedisClient(rdb),
	}
	if cfg.Limit > 0 {
		s.lim = &limiter{rdb: rdb, key: LimiterKey, limit: cfg.Limit, ttl: slotTTL}
	}
	return s
}

// Result is the answer of a successful E5 call.
type Result struct {
	ServiceAccountNumber string `json:"service_account_number"`
}

// outcome is what the worker publishes when a task ends for good.
type outcome struct {
	Outcome              string          `json:"outcome"`
	ServiceAccountNumber string          `json:"service_account_number,omitempty"`
	Error                *problem.Record `json:"error,omitempty"`
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
	if errors.Is(err, sql.ErrNoRows) {
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
	case t.SupplierStatus != "Ongoing":
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

// Process runs E5: it enqueues (or joins) the account's task and waits for
// its outcome.
func (s *Service) Process(ctx context.Context, req Request, visible func(string) bool) (Result, error) {
	t, err := s.check(ctx, req, visible)
	if err != nil {
		return Result{}, err
	}
	taskID := jobs.AccountTaskID(req.ImportSupplierCode, req.ExternalAccountNumber, req.DryRun)
	if s.lim != nil {
		ok, err := s.lim.acquire(ctx, taskID)
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
	// Subscribe before enqueueing, so that a task finishing at once cannot
	// announce its outcome before anyone listens.
	waiter, err := s.cfg.Hub.Subscribe(ctx, taskID)
	if err != nil {
		s.release(taskID)
		return Result{}, unavailable(err)
	}
	defer waiter.Close()
	payload := jobs.AccountProcessPayload{
		ProcessID: t.ProcessID.Int64, SupplierID: t.SupplierID, SupplierCode: req.ImportSupplierCode,
		ExternalAccountNumber: req.ExternalAccountNumber, OperationsTeamID: t.TeamID.Int64, DryRun: req.DryRun,
	}
	task, err := jobs.NewAccountProcessTask(payload)
	if err != nil {
		s.release(taskID)
		return Result{}, err
	}
	joined, marked, err := s.enqueueOrJoin(ctx, waiter, task, req.DryRun, t.ProcessID.Int64, taskID)
	if err != nil {
		s.release(taskID)
		if marked {
			// Nothing was queued: put the status back so that E10 does not
			// show IN_PROGRESS for work that will never run.
			_, _ = s.db.ExecContext(context.WithoutCancel(ctx), `UPDATE import_processes SET status = 'UNKNOWN'
				WHERE id = $1 AND status = 'IN_PROGRESS' AND service_account_number IS NULL`, t.ProcessID.Int64)
		}
		return Result{}, err
	}
	if joined && !req.DryRun {
		// The joined task may have ended, and announced it, just before we
		// subscribed; its outcome is then in PostgreSQL already. Anything it
		// announces from now on reaches the waiter.
		if r, done, err := s.finished(ctx, req, t.ProcessID.Int64); done {
			s.release(taskID) // our acquire may have re-taken the slot the task freed
			return r, err
		}
	}
	return s.wait(ctx, waiter, req, s.newWatch(payload), t.ProcessID.Int64)
}

// enqueueOrJoin joins the account's task when one is pending, scheduled,
// running or retrying, and otherwise marks the process (markInProgress)
// and queues task. Only a new task marks it: a joined one was marked by
// whoever queued it, and may be just finishing, with its outcome written
// already, which a mark would overwrite with nothing left to correct it.
// marked reports whether the row was marked, for the caller to put back
// when nothing was queued. A failure of Redis is answered as
// queue_unavailable.
func (s *Service) enqueueOrJoin(ctx context.Context, waiter *taskwait.Waiter, task *asynq.Task, dryRun bool, processID int64, taskID string) (joined, marked bool, err error) {
	for range enqueueAttempts {
		joined, err := waiter.Join(ctx, s.inspector, jobs.QueueAccounts)
		if err != nil {
			return false, marked, unavailable(err)
		}
		if joined {
			return true, marked, nil
		}
		if err := s.markInProgress(ctx, dryRun, processID, taskID); err != nil {
			return false, marked, err
		}
		marked = marked || !dryRun
		err = waiter.Enqueue(ctx, s.client, task)
		if err == nil {
			return false, marked, nil
		}
		if !errors.Is(err, asynq.ErrTaskIDConflict) {
			return false, marked, unavailable(err)
		}
		// Another request queued it between the look and the enqueue: look again.
	}
	return false, marked, unavailable(fmt.Errorf("could not enqueue task %s", taskID))
}

// enqueueAttempts bounds the looks of enqueueOrJoin and of a takeover:
// each conflict means that another request queued the task between a look
// and an enqueue.
const enqueueAttempts = 3

// markInProgress records that a new task is about to be queued for the
// account: IN_PROGRESS from that moment (E10), owned by that task (task_id;
// takeover.go).
func (s *Service) markInProgress(ctx context.Context, dryRun bool, processID int64, taskID string) error {
	if dryRun {
		// A dry run must change nothing, E10's status included. It only
		// waits for a sweep that holds the row (Sweeper.Abandoned) to
		// finish, so that the sweep cannot remove the new task.
		if _, err := s.db.ExecContext(ctx, `SELECT 1 FROM import_processes WHERE id = $1 FOR SHARE`, processID); err != nil {
			return fmt.Errorf("process: wait for sweep: %w", err)
		}
		return nil
	}
	_, err := s.db.ExecContext(ctx, `UPDATE import_processes SET status = 'IN_PROGRESS', task_id = $2, updated_at = now()
		WHERE id = $1 AND service_account_number IS NULL`, processID, taskID)
	if err != nil {
		return fmt.Errorf("process: mark in progress: %w", err)
	}
	return nil
}

func (s *Service) release(taskID string) {
	if s.lim != nil {
		_ = releaseSlot(context.Background(), s.rdb, taskID)
	}
}

func (s *Service) wait(ctx context.Context, waiter *taskwait.Waiter, req Request, w *watch, processID int64) (Result, error) {
	deadline := time.Now().Add(s.cfg.Wait)
	for {
		payload, ev, err := waiter.Next(ctx, time.Until(deadline), outcomePollInterval)
		if err != nil {
			return Result{}, err
		}
		if ev == taskwait.Poll {
			// Every poll interval: the wait ends when PostgreSQL has the
			// outcome (the worker may have died after writing it, before
			// announcing it), and otherwise the task is checked to be
			// alive, and taken over when its worker died (takeover.go). A
			// failed read is "not yet": the next poll, or the end of the
			// wait, reads PostgreSQL again.
			if !req.DryRun { // a dry run leaves no outcome in PostgreSQL to look at
				ended, err := s.processEnded(ctx, processID, w)
				if err == nil && ended {
					return s.fromDatabase(ctx, req, processID)
				}
				if err != nil {
					continue
				}
			}
			w.check(ctx)
			continue
		}
		if ev == taskwait.Ended { // timed out, or the subscription broke: PostgreSQL decides
			if req.DryRun {
				return Result{}, stillInProgress(req)
			}
			return s.fromDatabase(ctx, req, processID)
		}
		var o outcome
		if err := json.Unmarshal(payload, &o); err != nil {
			s.cfg.Log.WarnContext(ctx, "bad outcome message", "error", err)
			continue
		}
		if !req.DryRun {
			// A created account is final: whichever task announced it, the
			// account exists with that number, which is what PostgreSQL
			// would answer. That saves the usual request a read.
			if o.Outcome == outcomeCreated && o.ServiceAccountNumber != "" {
				return Result{ServiceAccountNumber: o.ServiceAccountNumber}, nil
			}
			// Otherwise PostgreSQL is the truth; the message only woke us.
			// A row still IN_PROGRESS heard an announcement that is not its
			// task's outcome (a sweep's failure of the task an E5 has just
			// replaced, or a task superseded by a takeover): wait on.
			if r, done, err := s.finished(ctx, req, processID); done {
				return r, err
			}
			continue
		}
		switch o.Outcome {
		case outcomeDryRunSucceeded:
			return Result{}, problem.New(problem.Invalid, CodeDryRunSucceeded, DetailDryRunSucceeded)
		case outcomeFailed:
			if o.Error != nil {
				return Result{}, recordedError(*o.Error)
			}
		}
	}
}

// outcomePollInterval is how often a waiting E5 looks at PostgreSQL for an
// outcome whose announcement it did not hear, and at its task's heartbeat.
const outcomePollInterval = time.Second

// processEnded reports whether the process row has left IN_PROGRESS, and
// points w at the task the row names.
func (s *Service) processEnded(ctx context.Context, processID int64, w *watch) (bool, error) {
	var row struct {
		Status string         `db:"status"`
		TaskID sql.NullString `db:"task_id"`
	}
	if err := s.db.GetContext(ctx, &row, `SELECT status, task_id FROM import_processes WHERE id = $1`, processID); err != nil {
		return false, err
	}
	if row.TaskID.Valid {
		w.follow(row.TaskID.String)
	}
	return row.Status != imports.StatusInProgress, nil
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

// finished answers from PostgreSQL when the account's last task has ended:
// done is false while the process is IN_PROGRESS.
func (s *Service) finished(ctx context.Context, req Request, processID int64) (r Result, done bool, err error) {
	o, err := s.readOutcome(ctx, processID)
	if err != nil {
		return Result{}, true, err
	}
	if o.Status == imports.StatusInProgress {
		return Result{}, false, nil
	}
	r, err = o.answer(req)
	return r, true, err
}

func (s *Service) fromDatabase(ctx context.Context, req Request, processID int64) (Result, error) {
	o, err := s.readOutcome(ctx, processID)
	if err != nil {
		return Result{}, err
	}
	return o.answer(req)
}

// recorded is the outcome of a process as PostgreSQL holds it.
type recorded struct {
	Status    string         `db:"status"`
	Number    sql.NullString `db:"service_account_number"`
	LastError []byte         `db:"last_error"`
}

func (s *Service) readOutcome(ctx context.Context, processID int64) (recorded, error) {
	var r recorded
	if err := s.db.GetContext(ctx, &r, `SELECT status, service_account_number, last_error FROM import_processes WHERE id = $1`, processID); err != nil {
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
	case r.Status == imports.StatusUnknown && len(r.LastError) > 0:
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
	problem.CodeInternal:             true,
	documents.CodeStoreNotConfigured: true,
	documents.CodeStoreUnavailable:   true,
	CodeAbandoned:                    true,
	CodeLost:                         true,
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
