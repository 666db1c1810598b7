package process

import (
	"context"
	"fmt"

	"github.com/bulkimport/bulkimport/jobs/status"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// Taking over an account whose worker died.
//
// Asynq v0.26 gives a dead worker's task back to the queue only after its
// 30 s lease, a further 30 s allowance and a recoverer that runs once a
// minute, none of them settable: the account of a killed worker stalled
// for more than a minute, while its caller waited. The worker's handler
// keeps a heartbeat in Redis while it runs a task (taskwait.Beat: written
// 0.5 s after the task starts, so that most tasks end without one, then
// refreshed every second, gone 5 s after the last refresh). A waiting E5
// looks every second: when its task is active in
// Asynq without a heartbeat, or missing from Redis altogether, for longer
// than taskwait.DeadAfter, it queues a task of its own for the account, under a new
// id (the dead task keeps its id in Asynq's active list until the
// recoverer), and waits for that one. Every E5 waiting for the account,
// and one that joins later, follows the row's task_id to the task that
// owns the account now.
//
// Why this cannot create an account twice, even when the first worker is
// slow rather than dead (frozen, cut off from Redis, or blocked on a lock,
// while its heartbeat lapsed):
//   - Creation is one PostgreSQL transaction that starts by locking the
//     process row (SELECT ... FOR UPDATE in jobs/creation) and does nothing
//     but report the existing account when the row already has a service
//     account number. Two tasks for one account run their transactions one
//     after the other; the second finds the number and creates nothing.
//   - Should a task ever get past that check, accounts are unique on
//     (supplier_id, external_account_number) and on import_process_id, so
//     its insert fails and the transaction rolls back whole.
//   - E-mails are queued only by the task whose transaction created the
//     account, after its commit.
//
// So a takeover costs at worst some duplicate work. The row's task_id is a
// compare-and-swap among waiters, not a safety device: of several E5s that
// notice the same dead task, one queues the takeover and the others follow
// it; and the sweeps (worker/sweep.go) never record a failure for a task
// the row no longer names. The dead task, once Asynq's recoverer runs it
// again or archives it, finds the account created or owned by another
// task, and changes nothing.
//
// A worker of a version without heartbeats looks dead to this check: its
// tasks are taken over after taskwait.DeadAfter, which is safe for the same
// reasons.

// claim moves the row's task_id from the task current to next, only if it
// still names current: taskwait.ErrTakenOver when it does not (another E5
// took the account over, or its outcome is recorded). base is the
// account's own task id, which a row that names no task has.
func (s *Service) claim(ctx context.Context, processID int64, base, current, next string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE import_processes SET task_id = $4, updated_at = now()
		WHERE id = $1 AND status = $5 AND service_account_number IS NULL
		AND COALESCE(task_id, $2) = $3`, processID, base, current, next, status.InProgress)
	if err != nil {
		return fmt.Errorf("claim takeover: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return taskwait.ErrTakenOver
	}
	return nil
}
