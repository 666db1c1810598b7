package worker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/email"
	"github.com/bulkimport/bulkimport/jobs/process"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// accountHandler runs account:process tasks.
type accountHandler struct {
	creator *process.Creator
	rdb     redis.UniversalClient
}

func (h accountHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
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
