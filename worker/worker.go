// Package worker is the Asynq server: it registers one handler per task type
// and runs them. Handlers are thin shells around the work defined in jobs.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jmoiron/sqlx"
)

// Config holds the worker's settings; cmd fills it from the environment.
type Config struct {
	// Concurrency is how many tasks run at once.
	Concurrency int
	// ShutdownTimeout is how long in-flight tasks may run after a stop signal
	// before they are handed back to the queue.
	ShutdownTimeout time.Duration
}

// Deps are the worker's collaborators.
type Deps struct {
	DB    *sqlx.DB
	Redis asynq.RedisConnOpt
}

// Worker processes queued tasks.
type Worker struct {
	srv *asynq.Server
	mux *asynq.ServeMux
}

// New returns a worker with every task handler registered.
func New(cfg Config, deps Deps) *Worker {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 10
	}
	srv := asynq.NewServer(deps.Redis, asynq.Config{
		Concurrency:     cfg.Concurrency,
		ShutdownTimeout: cfg.ShutdownTimeout,
		Logger:          slogAdapter{},
		LogLevel:        asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	return &Worker{srv: srv, mux: mux}
}

// Run processes tasks until ctx is done, then lets in-flight tasks finish
// within the shutdown timeout.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.srv.Start(w.mux); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	<-ctx.Done()
	w.srv.Shutdown()
	return nil
}

// slogAdapter routes asynq's own logs through log/slog.
type slogAdapter struct{}

func (slogAdapter) Debug(args ...any) { slog.Debug(fmt.Sprint(args...), "component", "asynq") }
func (slogAdapter) Info(args ...any)  { slog.Info(fmt.Sprint(args...), "component", "asynq") }
func (slogAdapter) Warn(args ...any)  { slog.Warn(fmt.Sprint(args...), "component", "asynq") }
func (slogAdapter) Error(args ...any) { slog.Error(fmt.Sprint(args...), "component", "asynq") }
func (slogAdapter) Fatal(args ...any) { slog.Error(fmt.Sprint(args...), "component", "asynq") }
