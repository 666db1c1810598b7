package worker

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/process"
)

// sweepInterval is how often the worker looks for account tasks that
// Asynq archived without running their handler to the end.
const sweepInterval = 5 * time.Second

// SweepAbandoned records a failure for every archived account:process task
// whose process row is still IN_PROGRESS, frees its slot, and deletes the
// archived task. Asynq's recoverer archives a task whose worker died on its
// last attempt without calling any handler, so without this sweep the row
// would stay IN_PROGRESS for ever. A task whose handler recorded its own
// failure leaves no IN_PROGRESS row, and is only deleted.
func SweepAbandoned(ctx context.Context, inspector *asynq.Inspector, creator *process.Creator) error {
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
		// Look again right before acting: an E5 may have deleted the
		// archived task to queue a new one.
		info, err := inspector.GetTaskInfo(jobs.QueueAccounts, t.ID)
		if err != nil || info.State != asynq.TaskStateArchived {
			continue
		}
		if err := creator.Abandoned(ctx, p); err != nil {
			return err
		}
		if err := inspector.DeleteTask(jobs.QueueAccounts, t.ID); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
			return err
		}
	}
	return nil
}

func (w *Worker) sweep(ctx context.Context) {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := SweepAbandoned(ctx, w.inspector, w.creator); err != nil {
				w.log.WarnContext(ctx, "sweep abandoned account tasks", "error", err)
			}
		}
	}
}
