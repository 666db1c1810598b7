package worker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/payment"
)

// paymentHandler runs payment_instruction:verify tasks.
type paymentHandler struct {
	verifier *payment.Verifier
}

func newPaymentHandler(deps Deps) paymentHandler {
	return paymentHandler{payment.NewVerifier(deps.DB, deps.RedisCli, deps.Log).WithMetrics(deps.Metrics)}
}

func (h paymentHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	var p jobs.PaymentInstructionVerifyPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return fmt.Errorf("decode %s payload: %v: %w", t.Type(), err, asynq.SkipRetry)
	}
	return h.verifier.Run(ctx, p)
}
