package worker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/payment"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// paymentHandler runs payment_instruction:verify tasks.
type paymentHandler struct {
	verifier *payment.Verifier
	rdb      redis.UniversalClient
}

func (h paymentHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	// The heartbeat tells a waiting E2 or E9 that this process is alive: one
	// that misses it takes the verification over within seconds instead of
	// waiting a minute or more for Asynq's recoverer (taskwait.Liveness).
	if id, ok := asynq.GetTaskID(ctx); ok {
		defer taskwait.Beat(ctx, h.rdb, id)()
	}
	var p jobs.PaymentInstructionVerifyPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return fmt.Errorf("decode %s payload: %v: %w", t.Type(), err, asynq.SkipRetry)
	}
	return h.verifier.Run(ctx, p)
}
