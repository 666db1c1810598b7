package worker

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/creation"
	"github.com/bulkimport/bulkimport/jobs/metrics"
)

// observeJobs is Asynq middleware that counts and times every task by type
// and outcome, and counts the accounts created.
//
// An account counts as created when an account:process task that is not a
// dry run returns nil. That is read from the task rather than from
// jobs/creation so that the domain code stays free of metrics; it counts
// one account twice only if a worker dies between committing an account
// and acknowledging its task, and the re-run finds the account created.
func observeJobs(m *metrics.Metrics) asynq.MiddlewareFunc {
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			typ := t.Type()
			if !slices.Contains(jobs.TaskTypes, typ) { // a type this version does not handle (left in Redis by another): "unknown"
				typ = "unknown"
			}
			start := time.Now()
			outcome := metrics.JobFailure // a panic, which asynq recovers, counts as a failure
			defer func() { m.ObserveJob(typ, outcome, time.Since(start)) }()
			err := next.ProcessTask(ctx, t)
			switch {
			case err == nil:
				outcome = metrics.JobSuccess
				if typ == jobs.TypeAccountProcess && !isDryRun(t) {
					m.AccountCreated()
				}
			case errors.Is(err, asynq.SkipRetry):
				outcome = metrics.JobSkipped
			case errors.Is(err, creation.ErrHandedBack):
				outcome = metrics.JobHandedBack
			}
			return err
		})
	}
}

func isDryRun(t *asynq.Task) bool {
	var p jobs.AccountProcessPayload
	_ = json.Unmarshal(t.Payload(), &p) // the handler decoded it already
	return p.DryRun
}
