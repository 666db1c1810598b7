package creation

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/status"
)

// AbandonedRecord is the failure recorded for a task that Asynq archived
// without its handler finishing: its worker died on the task's last attempt.
func AbandonedRecord() problem.Record {
	return problem.Record{Code: jobs.CodeAccountProcessingAbandoned,
		Detail: "Account processing stopped when its worker died; nothing was created. Call E5 again to retry."}
}

// LostRecord is the failure recorded for a task that vanished from Redis
// (jobs.CodeAccountProcessingLost): Redis lost its data, or someone deleted
// the task, while its process row said IN_PROGRESS, with no request
// waiting to queue it again.
func LostRecord() problem.Record {
	return problem.Record{Code: jobs.CodeAccountProcessingLost,
		Detail: "Account processing stopped: its task was lost from the queue; nothing was created. Call E5 again to retry."}
}

// Sweeper records the outcome of account tasks that ended without their
// handler recording one; the worker's sweep runs it.
type Sweeper struct {
	db        *db.DB
	inspector *asynq.Inspector
	ann       *Announcer
}

// NewSweeper returns the Sweeper of pool d, which looks at the account
// tasks through inspector and announces through ann.
func NewSweeper(d *db.DB, inspector *asynq.Inspector, ann *Announcer) *Sweeper {
	return &Sweeper{db: d, inspector: inspector, ann: ann}
}

// Found is the state in which the sweep found an account's task, which
// Abandoned confirms with the process row locked.
type Found int

const (
	// Archived: Asynq archived the task. Confirmed, the task is deleted.
	Archived Found = iota + 1
	// Missing: the task is in no state of the queue: Redis lost it, or an
	// operator deleted it.
	Missing
)

// still reports whether the task taskID is still as the sweep found it,
// deleting it when it is still archived.
func (s *Sweeper) still(found Found, taskID string) (bool, error) {
	switch found {
	case Archived:
		// An E5 may have deleted the archived task to queue a new one of
		// the same id.
		info, err := s.inspector.GetTaskInfo(jobs.QueueAccounts, taskID)
		if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
			return false, nil
		}
		if err != nil || info.State != asynq.TaskStateArchived {
			return false, err
		}
		if err := s.inspector.DeleteTask(jobs.QueueAccounts, taskID); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
			return false, err
		}
		return true, nil
	case Missing:
		return s.Missing(taskID)
	}
	return false, fmt.Errorf("process: unknown task state %d", found)
}

// Missing reports whether the account task taskID is in no state of the
// queue: neither pending, active, scheduled, retrying, archived nor
// completed.
func (s *Sweeper) Missing(taskID string) (bool, error) {
	_, err := s.inspector.GetTaskInfo(jobs.QueueAccounts, taskID)
	if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
		return true, nil
	}
	return false, err
}

// Abandoned records rec as the outcome of the task taskID of p, which ended
// without its handler recording one, frees the account's slot and wakes the
// waiters, once it has confirmed, with the process row locked, that the
// task is still as the sweep found it (found).
//
// The lock is what makes the sweep safe against an E5 that queues the
// account again at the same moment: E5 marks the row (markInProgress)
// before it queues a task, so it waits for the lock, and no new task can
// appear between the second look and the write. The write is also
// conditional on the row still naming taskID (or naming none, as rows
// marked before migration 00018 do): a task that took the account over
// (takeover.go) is never failed for its dead predecessor. recorded is false
// when nothing was written; nothing is announced then.
func (s *Sweeper) Abandoned(ctx context.Context, p jobs.AccountProcessPayload, taskID string, rec problem.Record, found Found) (recorded bool, err error) {
	b, _ := json.Marshal(rec)
	err = db.InTx(ctx, s.db, func(tx *db.Tx) error {
		var row struct {
			Status string         `db:"status"`
			TaskID sql.NullString `db:"task_id"`
		}
		err := tx.GetContext(ctx, &row, `SELECT status, task_id FROM import_processes WHERE id = $1 FOR UPDATE`, p.ProcessID)
		if errors.Is(err, db.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock process %d: %w", p.ProcessID, err)
		}
		if ok, err := s.still(found, taskID); err != nil || !ok {
			return err
		}
		if p.DryRun {
			recorded = true // a dry run records nothing; its waiters hear the failure
			return nil
		}
		res, err := tx.ExecContext(ctx, `UPDATE import_processes SET status = '`+status.Unknown+`', last_error = $2, updated_at = now()
			WHERE id = $1 AND status = '`+status.InProgress+`' AND service_account_number IS NULL
			AND (task_id = $3 OR task_id IS NULL)`, p.ProcessID, b, taskID)
		if err != nil {
			return fmt.Errorf("record %s: %w", rec.Code, err)
		}
		n, _ := res.RowsAffected()
		recorded = n == 1
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("process: %w", err)
	}
	if recorded {
		s.ann.Failed(ctx, jobs.AccountTaskID(p.SupplierCode, p.ExternalAccountNumber, p.DryRun), rec)
	}
	return recorded, nil
}

// Stale is an IN_PROGRESS account and the task its row names.
type Stale struct {
	Payload jobs.AccountProcessPayload
	TaskID  string
}

// StaleInProgress lists up to limit IN_PROGRESS accounts with an id above
// after that nothing has marked for longer than grace, in id order: the
// candidates of the sweep of lost tasks. Dry runs leave no such rows.
func (s *Sweeper) StaleInProgress(ctx context.Context, grace time.Duration, after int64, limit int) ([]Stale, error) {
	var rows []struct {
		ID           int64          `db:"id"`
		SupplierID   int64          `db:"supplier_id"`
		SupplierCode string         `db:"code"`
		External     string         `db:"external_account_number"`
		TaskID       sql.NullString `db:"task_id"`
	}
	err := s.db.SelectContext(ctx, &rows, `SELECT p.id, p.supplier_id, s.code, p.external_account_number, p.task_id
		FROM import_processes p JOIN import_suppliers s ON s.id = p.supplier_id
		WHERE p.status = $1 AND p.id > $2 AND p.updated_at < now() - make_interval(secs => $3)
		ORDER BY p.id LIMIT $4`, status.InProgress, after, grace.Seconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("process: list stale: %w", err)
	}
	out := make([]Stale, len(rows))
	for i, r := range rows {
		p := jobs.AccountProcessPayload{ProcessID: r.ID, SupplierID: r.SupplierID, SupplierCode: r.SupplierCode, ExternalAccountNumber: r.External}
		id := r.TaskID.String
		if !r.TaskID.Valid {
			id = jobs.AccountTaskID(r.SupplierCode, r.External, false)
		}
		out[i] = Stale{Payload: p, TaskID: id}
	}
	return out, nil
}
