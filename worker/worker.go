// Package worker is the Asynq server: it registers one handler per task type
// and runs them. Handlers are thin shells around the work defined in jobs.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/creation"
	"github.com/bulkimport/bulkimport/jobs/email"
	"github.com/bulkimport/bulkimport/jobs/metrics"
	"github.com/bulkimport/bulkimport/jobs/payment"
)

// Config holds the worker's settings; cmd fills it from the environment.
type Config struct {
	// AccountConcurrency is how many accounts one worker creates at once:
	// PROCESS_CONCURRENCY_LIMIT when set, else WORKER_CONCURRENCY.
	AccountConcurrency int
	// Concurrency is how many other tasks (e-mails, vendor checks) run at once.
	Concurrency int
	// ShutdownTimeout is how long in-flight tasks may run after a stop signal
	// before they are handed back to the queue.
	ShutdownTimeout time.Duration
}

// Deps are the worker's collaborators: the work each task type runs, built
// by cmd, and the connections its servers and sweep use.
type Deps struct {
	DB       *db.DB
	Redis    asynq.RedisConnOpt
	RedisCli redis.UniversalClient
	// Creator runs account:process tasks; Sweeper records the outcome of
	// those that ended without their handler (the sweep).
	Creator *creation.Creator
	Sweeper *creation.Sweeper
	// Verifier runs payment:verify tasks.
	Verifier *payment.Verifier
	// Sender runs email:send tasks.
	Sender *email.Sender
	// Metrics counts tasks; nil counts nothing.
	Metrics *metrics.Metrics
	// Log receives the handlers' logs and asynq's own; it must not be nil.
	Log *slog.Logger
}

// Worker processes queued tasks with two Asynq servers: one for the accounts
// queue alone, so that its concurrency is exactly the E5 limit, and one for
// everything else.
type Worker struct {
	accounts, other       *asynq.Server
	accountsMux, otherMux *asynq.ServeMux
	inspector             *asynq.Inspector
	creator               *creation.Creator
	sweeper               *creation.Sweeper
	rdb                   redis.UniversalClient
	db                    *db.DB
	log                   *slog.Logger
	// stopping is closed when Run's context ends and the servers begin to
	// stop (see handBackContext).
	stopping chan struct{}
}

// accountsCheckInterval replaces asynq's 1 s idle sleep on the accounts
// queue, which would add 0.5 to 1.5 s to every E5 request that finds the
// worker idle; 5 ms adds 2.5 ms on average at the cost of about 200 cheap
// Redis calls a second from an idle worker. The other queues have no caller
// waiting on a latency budget as tight.
const (
	accountsCheckInterval = 5 * time.Millisecond
	otherCheckInterval    = 50 * time.Millisecond
)

// retryDelay backs off 1 s, 4 s, 9 s: infrastructure hiccups pass quickly,
// and a caller may still be waiting. A payment verification has few
// retries (jobs.PaymentInstructionVerifyMaxRetry), so it waits paymentRetryDelay:
// long enough for a restart of PostgreSQL or Redis to be over, which a
// retry after 1 s often is not, and after 5 s was not once in the chaos
// runs (a fast restart of PostgreSQL on a loaded 2-core machine took 6 s
// until the first request succeeded, and each worker's pool still held
// connections that the restart had closed).
func retryDelay(n int, _ error, t *asynq.Task) time.Duration {
	if t != nil && t.Type() == jobs.TypePaymentInstructionVerify {
		return paymentRetryDelay
	}
	return time.Duration((n+1)*(n+1)) * time.Second
}

// paymentRetryDelay is the wait before a payment verification's retry.
const paymentRetryDelay = 10 * time.Second

// New returns a worker with every task handler registered.
func New(cfg Config, deps Deps) (*Worker, error) {
	if deps.Log == nil {
		panic("worker.New: nil Deps.Log")
	}
	if deps.Creator == nil || deps.Sweeper == nil || deps.Verifier == nil || deps.Sender == nil {
		return nil, errors.New("worker.New: Deps needs a Creator, a Sweeper, a Verifier and a Sender")
	}
	if cfg.AccountConcurrency <= 0 {
		cfg.AccountConcurrency = 10
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 10
	}
	common := serverConfig(deps.Log)
	common.ShutdownTimeout = cfg.ShutdownTimeout
	ac := common
	ac.Concurrency = cfg.AccountConcurrency
	ac.TaskCheckInterval = accountsCheckInterval
	ac.Queues = map[string]int{jobs.QueueAccounts: 1}
	oc := common
	oc.Concurrency = cfg.Concurrency
	oc.TaskCheckInterval = otherCheckInterval
	oc.Queues = map[string]int{jobs.QueueVendors: 6, jobs.QueueEmails: 1}

	w := &Worker{
		accounts: asynq.NewServer(deps.Redis, ac), accountsMux: asynq.NewServeMux(),
		other: asynq.NewServer(deps.Redis, oc), otherMux: asynq.NewServeMux(),
		// On the process's shared client, as the sweeper's is: no pool of
		// its own, and nothing to close.
		inspector: asynq.NewInspectorFromRedisClient(deps.RedisCli),
		creator:   deps.Creator,
		sweeper:   deps.Sweeper,
		rdb:       deps.RedisCli,
		db:        deps.DB,
		log:       deps.Log,
		stopping:  make(chan struct{}),
	}
	w.accountsMux.Use(observeJobs(deps.Metrics))
	w.otherMux.Use(observeJobs(deps.Metrics))
	w.accountsMux.Handle(jobs.TypeAccountProcess, accountHandler{w.creator, deps.RedisCli, w.stopping})
	w.otherMux.Handle(jobs.TypeEmailSend, emailHandler{deps.Sender})
	w.otherMux.Handle(jobs.TypePaymentInstructionVerify, paymentHandler{deps.Verifier, deps.RedisCli})
	return w, nil
}

// Run processes tasks until ctx is done, then lets in-flight tasks finish
// within the shutdown timeout.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.accounts.Start(w.accountsMux); err != nil {
		return fmt.Errorf("start accounts worker: %w", err)
	}
	if err := w.other.Start(w.otherMux); err != nil {
		w.accounts.Shutdown()
		return fmt.Errorf("start worker: %w", err)
	}
	swept := make(chan struct{})
	go func() { defer close(swept); w.sweep(ctx) }()
	<-ctx.Done()
	close(w.stopping)
	<-swept
	var g errgroup.Group
	g.Go(func() error { w.accounts.Shutdown(); return nil })
	g.Go(func() error { w.other.Shutdown(); return nil })
	return g.Wait()
}

// serverConfig is the part of the Asynq configuration both servers share:
// retries, and logs through log with refusals at info.
func serverConfig(log *slog.Logger) asynq.Config {
	refused := &refusals{}
	return asynq.Config{
		RetryDelayFunc: retryDelay,
		Logger:         slogAdapter{log: log, refused: refused},
		LogLevel:       asynq.WarnLevel,
		ErrorHandler:   refused.handler(log),
	}
}

// refusals are the ids of tasks refused for good (jobs.Refused) whose
// archiving asynq is about to log. Asynq logs every archived task as
// "Retry exhausted" at warn, right after calling the ErrorHandler; for a
// refusal that line would make a data problem look like an outage, so the
// ErrorHandler logs the refusal at info with its code and the adapter drops
// asynq's line for that task.
type refusals struct{ ids sync.Map }

const retryExhausted = "Retry exhausted for task id="

func (r *refusals) handler(log *slog.Logger) asynq.ErrorHandlerFunc {
	return func(ctx context.Context, t *asynq.Task, err error) {
		var ref *jobs.Refused
		if !errors.As(err, &ref) {
			return
		}
		id, _ := asynq.GetTaskID(ctx)
		r.ids.Store(id, struct{}{})
		log.InfoContext(ctx, "task refused", "type", t.Type(), "task_id", id, "code", ref.Code, "error", err.Error())
	}
}

// slogAdapter routes asynq's own logs through log/slog.
type slogAdapter struct {
	log     *slog.Logger
	refused *refusals
}

func (a slogAdapter) Debug(args ...any) { a.log.Debug(fmt.Sprint(args...), "component", "asynq") }
func (a slogAdapter) Info(args ...any)  { a.log.Info(fmt.Sprint(args...), "component", "asynq") }
func (a slogAdapter) Warn(args ...any) {
	msg := fmt.Sprint(args...)
	if id, ok := strings.CutPrefix(msg, retryExhausted); ok && a.refused != nil {
		if _, found := a.refused.ids.LoadAndDelete(id); found {
			return // logged at info by the ErrorHandler
		}
	}
	a.log.Warn(msg, "component", "asynq")
}
func (a slogAdapter) Error(args ...any) { a.log.Error(fmt.Sprint(args...), "component", "asynq") }
func (a slogAdapter) Fatal(args ...any) { a.log.Error(fmt.Sprint(args...), "component", "asynq") }
