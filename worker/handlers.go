package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/creation"
	"github.com/bulkimport/bulkimport/jobs/email"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// accountHandler runs account:process tasks.
type accountHandler struct {
	creator *creation.Creator
	rdb     redis.UniversalClient
	// stopping is closed when the worker begins to stop.
	stopping <-chan struct{}
}

func (h accountHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	ctx, cancel := handBackContext(ctx, h.stopping)
	defer cancel()
	// The heartbeat tells a waiting E5 that this process is alive: one that
	// misses it takes the account over within seconds instead of waiting a
	// minute or more for Asynq's recoverer (jobs/process/takeover.go).
	if id, ok := asynq.GetTaskID(ctx); ok {
		defer taskwait.Beat(ctx, h.rdb, id)()
	}
	var p jobs.AccountProcessPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return fmt.Errorf("decode %s payload: %v: %w", t.Type(), err, asynq.SkipRetry)
	}
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	return h.creator.Run(ctx, p, retried >= maxRetry)
}

// emailHandler runs email:send tasks.
type emailHandler struct {
	sender *email.Sender
}

func (h emailHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	var p jobs.EmailSendPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return fmt.Errorf("decode %s payload: %v: %w", t.Type(), err, asynq.SkipRetry)
	}
	return h.sender.Send(ctx, p.OutboxID)
}

// handBackContext returns a context that ends when ctx does, with the same
// deadline and cause, except that a cancellation once the worker is
// stopping has the cause creation.ErrHandedBack. At ShutdownTimeout asynq
// v0.26 hands every task still running back to its queue, without counting
// an attempt, and then cancels the task's context (processor.go: the abort
// case requeues, then the deferred cancel runs); a handler cannot tell that
// cancellation from others by the context asynq gives it.
//
// Other cancellations in the same window are rare (an operator's
// CancelProcessing, or a lease lost to a Redis outage) and are taken for a
// hand-back too. Nothing is lost by that: asynq then retries the task, which
// runs again, or archives it, which the sweep records (SweepAbandoned). A
// task past its deadline keeps context.DeadlineExceeded and fails as before.
func handBackContext(ctx context.Context, stopping <-chan struct{}) (context.Context, context.CancelFunc) {
	base, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	hctx, cancelDeadline := context.Context(base), context.CancelFunc(func() {})
	if d, ok := ctx.Deadline(); ok {
		hctx, cancelDeadline = context.WithDeadline(base, d)
	}
	stop := context.AfterFunc(ctx, func() {
		cause := context.Cause(ctx)
		select {
		case <-stopping:
			if errors.Is(ctx.Err(), context.Canceled) {
				cause = creation.ErrHandedBack
			}
		default:
		}
		cancel(cause)
	})
	return hctx, func() {
		stop()
		cancelDeadline()
		cancel(context.Canceled)
	}
}
