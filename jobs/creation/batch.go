package creation

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/gather"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/imports"
	"github.com/bulkimport/bulkimport/jobs/metrics"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// Batching makes a Creator create the accounts of tasks that run at once in
// shared transactions (group commit). Each account is still all or nothing:
// its rows are written by one statement inside one transaction, and a
// transaction in which any account fails is rolled back whole, after which
// each of its accounts runs again in a transaction of its own. What the
// accounts share is the cost that PostgreSQL charges per transaction and
// per statement: the relation locks of some 20 tables and 40 indexes, the
// commit, and the lock of the staged rows, taken by one statement.
//
// Batches form by themselves (db/gather): a task that finds a writer free
// takes every account queued (up to Size) and creates them; the tasks that
// arrive while it does so queue for the next. A lone task waits for nobody.
// The transaction runs on a context of its own, so that one task that ends
// (a worker that stops hands its tasks back) does not roll back the others.
type Batching struct {
	// Writers is how many creation transactions one Creator runs at once
	// (ACCOUNT_WRITERS). One makes the fullest transactions, and so the
	// least work per account, while the migration's other requests keep
	// the database busy; beyond twice the database's cores, more only
	// contend for the same index pages (docs/performance.md, Inside
	// PostgreSQL).
	Writers int
	// Size is the most accounts one transaction creates (ACCOUNT_BATCH).
	Size int
}

// DefaultBatching is the batching of a worker that is not told otherwise:
// the defaults of ACCOUNT_WRITERS and ACCOUNT_BATCH.
var DefaultBatching = Batching{Writers: 1, Size: 16}

// WithBatching makes c create accounts in shared transactions as b says,
// recording each transaction's size and outcome in m (nil records
// nothing), and returns c. Without it every account has a transaction of its own. It
// must be called before c runs any task.
func (c *Creator) WithBatching(b Batching, m *metrics.Metrics) *Creator {
	if b.Writers < 1 || b.Size < 1 {
		panic(fmt.Sprintf("creation.WithBatching: %+v: Writers and Size must be positive", b))
	}
	c.batch = gather.NewQueue(b.Writers, b.Size, func(ctx context.Context, js []*createJob) {
		ctx, cancel := context.WithTimeout(ctx, jobs.AccountProcessTimeout)
		defer cancel()
		m.CreationTransaction(c.createTogether(ctx, js), len(js))
	})
	return c
}

// errSplit is the outcome of an account whose shared transaction was rolled
// back: it runs again alone.
var errSplit = errors.New("shared transaction rolled back; the account runs again alone")

// createJob is one account on its way through a creation transaction.
type createJob struct {
	p jobs.AccountProcessPayload
	// payload is the staged payload that acc was validated from; a locked
	// row that holds another was staged again meanwhile (errRestaged).
	payload []byte
	acc     *account.Account
	// invalid is the refusal decided before the transaction, if any.
	invalid *problem.Error

	// The outcome, set by createTogether.
	err    error          // nil, errRestaged, errDryRun, errSplit or a failure
	result *problem.Error // the refusal, when the account is refused
	number string         // the service account number, when it exists
	outbox []int64
}

// lockProcessesSQL locks the staged rows of a transaction's accounts, in
// one round trip and in id order, so that two transactions never wait for
// each other's rows in a circle.
//
// The ids come through a subquery so that PostgreSQL uses the prepared
// statement's generic plan. With id = ANY($1), a custom plan sees how few
// ids a transaction has (one to three, usually) and always looks cheaper
// than the generic plan's guess of ten, so every execution was planned
// anew, at more than the cost of running it. The plan is the same index
// scan either way.
const lockProcessesSQL = `SELECT id, payload, service_account_number FROM import_processes
	WHERE id = ANY(ARRAY(SELECT unnest($1::bigint[]))) ORDER BY id FOR UPDATE`

// createTogether creates the accounts of js in one transaction, sets each
// one's outcome, and returns the transaction's (a metrics.Tx* outcome).
// The accounts to write are written by one execution of the creation
// statement. An account alone has the outcome of its transaction: errDryRun
// rolls back a dry run or a refusal found while writing. Several accounts
// commit together unless one of them failed or was refused after rows of it
// were written; then the transaction is rolled back and every account's
// outcome is errSplit, for each to run again alone.
func (c *Creator) createTogether(ctx context.Context, js []*createJob) string {
	ids := make([]int64, len(js))
	for i, j := range js {
		ids[i] = j.p.ProcessID
	}
	alone := len(js) == 1
	err := db.InTx(ctx, c.db, func(tx *db.Tx) error {
		var rows []processRow
		if err := tx.SelectContext(ctx, &rows, lockProcessesSQL, pq.Int64Array(ids)); err != nil {
			return fmt.Errorf("lock processes: %w", err)
		}
		locked := make(map[int64]processRow, len(rows))
		for _, r := range rows {
			locked[r.ID] = r
		}
		var write []*createJob
		for _, j := range js {
			row, ok := locked[j.p.ProcessID]
			if !ok {
				return fmt.Errorf("lock process %d: no such process", j.p.ProcessID)
			}
			if j.err = c.decide(j, row); j.err == nil && j.result == nil && j.number == "" {
				write = append(write, j)
			}
		}
		if err := c.write(ctx, tx, write, alone); err != nil {
			return err
		}
		if alone {
			return js[0].err // errRestaged or errDryRun rolls back
		}
		return nil
	})
	switch {
	case err == nil:
		return metrics.TxCommitted
	case alone:
		js[0].err = err
		return metrics.TxRolledBack
	}
	for _, j := range js {
		j.err, j.result, j.number, j.outbox = fmt.Errorf("%w: %w", errSplit, err), nil, "", nil
	}
	return metrics.TxSplit
}

// decide sets the outcome of j that its locked staged row decides without
// writing: the account exists already, was refused before the transaction,
// or was staged again meanwhile (errRestaged). An account to write is left
// with no outcome.
func (c *Creator) decide(j *createJob, row processRow) error {
	j.result, j.number, j.outbox = j.invalid, "", nil
	if row.Number.Valid {
		j.number = row.Number.String
		j.result = nil // another run created it; its outcome stands
		if j.p.DryRun {
			// A real run created it after the API's check let the dry
			// run in: answer what that check answers now. Announced as
			// "created", it would leave the dry run's waiter, which
			// only ends on a dry run's outcome, waiting for nothing.
			j.result = imports.AlreadyImported(j.p.ExternalAccountNumber, j.number)
		}
		return nil
	}
	if j.result != nil {
		return nil
	}
	if !bytes.Equal(row.Payload, j.payload) || j.acc == nil {
		// Staged again between the read and the lock: validate what is
		// there now on the next attempt.
		return errRestaged
	}
	return nil
}

// write writes the accounts of js inside tx with one execution of the
// creation statement (more for numbers taken), and sets their outcomes. An
// account refused before anything of it was written (its business contract
// is missing) is refused alone. Another refusal wrote rows that must be
// rolled back: alone, the account's outcome is the refusal and its error
// errDryRun; with others, write returns errSplit. A dry run that would have
// succeeded (it is always alone) ends with errDryRun too.
func (c *Creator) write(ctx context.Context, tx *db.Tx, js []*createJob, alone bool) error {
	if len(js) == 0 {
		return nil
	}
	in := make([]toCreate, len(js))
	now := c.now()
	for i, j := range js {
		in[i] = toCreate{j.acc, options{ProcessID: j.p.ProcessID, OperationsTeamID: j.p.OperationsTeamID, Now: now}}
	}
	made, errs, err := createAccounts(ctx, tx, in, newServiceAccountNumber)
	if err != nil {
		return err
	}
	for i, j := range js {
		pe, refused := problem.As(errs[i])
		refused = refused && pe.Kind == problem.Invalid
		switch {
		case errs[i] == nil && j.p.DryRun:
			j.err = errDryRun
		case errs[i] == nil:
			j.number, j.outbox = made[i].ServiceAccountNumber, made[i].Outbox
		case refused && (alone || refusedBeforeWriting(errs[i])):
			j.result = pe
			if !refusedBeforeWriting(errs[i]) {
				j.err = errDryRun // roll back whatever was written
			}
		case refused:
			return errSplit
		default:
			return errs[i]
		}
	}
	return nil
}
