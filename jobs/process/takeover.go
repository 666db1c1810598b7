package process

import (
	"context"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/jobs"
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

// errTakenOver stops a takeover whose row moved on: another E5 took the
// account over, or its outcome is recorded.
var errTakenOver = errors.New("process: task taken over already")

// watch follows, for one waiting E5, the task that processes its account.
type watch struct {
	s       *Service
	payload jobs.AccountProcessPayload
	base    string // the account's own task id, on whose channel every task announces
	live    *taskwait.Liveness
}

func (s *Service) newWatch(p jobs.AccountProcessPayload) *watch {
	id := jobs.AccountTaskID(p.SupplierCode, p.ExternalAccountNumber, p.DryRun)
	return &watch{s: s, payload: p, base: id, live: taskwait.NewLiveness(s.rdb, s.inspector, jobs.QueueAccounts, id)}
}

// follow makes w watch the task id, the one the process row names.
func (w *watch) follow(id string) { w.live.Follow(id) }

// check looks at the current task and takes it over when it has been dead
// or missing for long enough. Failures are logged: the next look tries
// again, and the sweeps and Asynq's recoverer remain behind it.
func (w *watch) check(ctx context.Context) {
	dead, err := w.live.Dead(ctx)
	if err == nil && dead {
		err = w.takeOver(ctx)
	}
	if err != nil && ctx.Err() == nil {
		w.s.cfg.Log.WarnContext(ctx, "watch account task", "task_id", w.live.Current(), "error", err)
	}
}

// takeOver queues the task that replaces the current one: under the next
// takeover id when the current task is active in a dead worker (its id is
// taken until the recoverer frees it), or under its own id when it is
// missing. For a real run the row's task_id moves from the current task to
// the new one first, only if it still names the current task; a waiter
// that loses that race follows the winner's task at its next look.
func (w *watch) takeOver(ctx context.Context) error {
	next := w.live.TakeoverID(w.base)
	task, err := jobs.NewAccountProcessTaskID(w.payload, next)
	if err != nil {
		return err
	}
	queued := false // by this waiter, rather than joined
	for attempt := 0; ; attempt++ {
		if attempt == enqueueAttempts {
			return fmt.Errorf("could not enqueue task %s", next)
		}
		joined, err := taskwait.Joinable(ctx, w.s.rdb, w.s.inspector, jobs.QueueAccounts, next)
		if err != nil {
			return err
		}
		if joined {
			break // another waiter queued it
		}
		if err := w.claim(ctx, next); errors.Is(err, errTakenOver) {
			return nil
		} else if err != nil {
			return err
		}
		// The dead task may have announced its end just before it died:
		// its stored announcement stays for the waiters to find.
		_, err = w.s.client.EnqueueContext(ctx, task)
		if err == nil {
			queued = true
			break
		}
		if !errors.Is(err, asynq.ErrTaskIDConflict) {
			return err
		}
	}
	if queued {
		w.s.cfg.Metrics.Takeover(jobs.TypeAccountProcess)
	}
	w.s.cfg.Log.InfoContext(ctx, "took over account task", "task_id", w.live.Current(), "takeover_task_id", next)
	w.follow(next)
	return nil
}

// claim moves the row's task_id from the current task to next, only if
// it still names the current task; errTakenOver when it does not. A dry
// run has no row: the task id alone keeps its waiters to one takeover.
func (w *watch) claim(ctx context.Context, next string) error {
	if w.payload.DryRun {
		return nil
	}
	res, err := w.s.db.ExecContext(ctx, `UPDATE import_processes SET task_id = $4, updated_at = now()
		WHERE id = $1 AND status = 'IN_PROGRESS' AND service_account_number IS NULL
		AND COALESCE(task_id, $2) = $3`, w.payload.ProcessID, w.base, w.live.Current(), next)
	if err != nil {
		return fmt.Errorf("claim takeover: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return errTakenOver
	}
	return nil
}
