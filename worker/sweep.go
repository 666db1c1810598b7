package worker

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/creation"
	"github.com/bulkimport/bulkimport/jobs/progress"
	"github.com/bulkimport/bulkimport/jobs/slots"
)

// sweepInterval is how often the worker looks for account tasks that
// ended without their handler recording an outcome.
const sweepInterval = 5 * time.Second

// LostGrace is how long an account stays IN_PROGRESS without its task in
// Redis before the sweep records it as lost. E5 marks the row just before
// it queues the task, and a waiting E5 queues a vanished task again within
// seconds (jobs/process/takeover.go); the sweep is for the accounts nobody
// waits for any more.
const LostGrace = 30 * time.Second

// lostBatch bounds the rows one sweep looks at; the next sweep goes on from
// where it stopped.
const lostBatch = 100

// SweepAbandoned records a failure for every archived account:process task
// whose process row is still IN_PROGRESS and names that task, frees its
// slot, and deletes the archived task. Asynq's recoverer archives a task
// whose worker died on its last attempt without calling any handler, so
// without this sweep the row would stay IN_PROGRESS for ever. A task whose
// handler recorded its own failure leaves no IN_PROGRESS row, and is only
// deleted. See creation.Sweeper.Abandoned for why a concurrent E5 that
// queues the account again is safe.
//
// A task archived with an error of its handler rather than asynq's lease
// expiry ran its last attempt and failed, but its handler could not record
// the failure (the database was out of reach for the whole attempt): it
// gets the failure after retries that the handler would have recorded, not
// the abandonment of a dead worker.
func SweepAbandoned(ctx context.Context, inspector *asynq.Inspector, sweeper *creation.Sweeper) error {
	tasks, err := inspector.ListArchivedTasks(jobs.QueueAccounts, asynq.PageSize(100))
	if errors.Is(err, asynq.ErrQueueNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if t.Type != jobs.TypeAccountProcess {
			continue
		}
		var p jobs.AccountProcessPayload
		if err := json.Unmarshal(t.Payload, &p); err != nil {
			continue
		}
		rec := creation.AbandonedRecord()
		if t.LastErr != "" && t.LastErr != asynq.ErrLeaseExpired.Error() {
			rec = creation.FailedAfterRetriesRecord()
		}
		if _, err := sweeper.Abandoned(ctx, p, t.ID, rec, creation.Archived); err != nil {
			return err
		}
	}
	return nil
}

// SweepLost records a failure (jobs.CodeAccountProcessingLost) for IN_PROGRESS accounts
// whose task is missing from Redis altogether, LostGrace after they were
// last marked: Redis lost its data, or an operator deleted the task. It
// records rather than queues the task again because the row does not hold
// everything the task needs (the operations team is E5's), and the caller
// who sent E5 is told to call it again. It looks at up to lostBatch rows
// with an id above after, and returns where the next sweep goes on (0
// after the last row).
func SweepLost(ctx context.Context, sweeper *creation.Sweeper, grace time.Duration, after int64) (next int64, err error) {
	stale, err := sweeper.StaleInProgress(ctx, grace, after, lostBatch)
	if err != nil {
		return after, err
	}
	for _, s := range stale {
		next = s.Payload.ProcessID
		if gone, err := sweeper.Missing(s.TaskID); err != nil || !gone {
			if err != nil {
				return next, err
			}
			continue
		}
		if _, err := sweeper.Abandoned(ctx, s.Payload, s.TaskID, creation.LostRecord(), creation.Missing); err != nil {
			return next, err
		}
	}
	if len(stale) < lostBatch {
		next = 0
	}
	return next, nil
}

func (w *Worker) sweep(ctx context.Context) {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	var after int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			after = w.sweepOnce(ctx, after)
		}
	}
}

// sweepOnce runs every sweep once; after is where SweepLost goes on from,
// and the result where the next sweep goes on.
func (w *Worker) sweepOnce(ctx context.Context, after int64) int64 {
	if err := SweepAbandoned(ctx, w.inspector, w.sweeper); err != nil {
		w.log.WarnContext(ctx, "sweep abandoned account tasks", "error", err)
	}
	next, err := SweepLost(ctx, w.sweeper, LostGrace, after)
	if err != nil {
		w.log.WarnContext(ctx, "sweep lost account tasks", "error", err)
	}
	// Folded here too, so that the counters' deltas stay few while nobody
	// reads the progress page.
	if _, err := progress.Compact(ctx, w.db); err != nil {
		w.log.WarnContext(ctx, "compact progress counters", "error", err)
	}
	if n, err := slots.Reclaim(ctx, w.rdb, w.inspector, slots.Grace); err != nil {
		w.log.WarnContext(ctx, "reclaim concurrency slots", "error", err)
	} else if n > 0 {
		w.log.InfoContext(ctx, "reclaimed concurrency slots of ended tasks", "slots", n)
	}
	return next
}
