package worker

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/creation"
	"github.com/bulkimport/bulkimport/jobs/slots"
)

type sweepBundle struct {
	db        *db.DB
	rdb       *redis.Client
	client    *asynq.Client
	inspector *asynq.Inspector
	sweeper   *creation.Sweeper
	supplier  int64
}

func setupSweep(t *testing.T) *sweepBundle {
	t.Helper()
	d := dbtest.New(t)
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	b := &sweepBundle{db: d, rdb: rdb, client: asynq.NewClientFromRedisClient(rdb), inspector: inspector,
		sweeper: creation.NewSweeper(d, inspector, creation.NewAnnouncer(rdb, slog.New(slog.DiscardHandler)))}
	if err := d.Get(&b.supplier, `INSERT INTO import_suppliers (code) VALUES ('DEMO') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	return b
}

// process inserts an IN_PROGRESS row for ean owned by taskID, last marked
// age ago, and returns its task payload.
func (b *sweepBundle) process(t *testing.T, ean, taskID string, age time.Duration) jobs.AccountProcessPayload {
	t.Helper()
	var id int64
	if err := b.db.Get(&id, `INSERT INTO import_processes (supplier_id, external_account_number, payload, status, task_id, updated_at)
		VALUES ($1, $2, '{}', 'IN_PROGRESS', $3, now() - make_interval(secs => $4)) RETURNING id`, b.supplier, ean, taskID, age.Seconds()); err != nil {
		t.Fatal(err)
	}
	return jobs.AccountProcessPayload{ProcessID: id, SupplierID: b.supplier, SupplierCode: "DEMO", ExternalAccountNumber: ean}
}

func (b *sweepBundle) enqueue(t *testing.T, p jobs.AccountProcessPayload, id string) {
	t.Helper()
	task, err := jobs.NewAccountProcessTaskID(p, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Enqueue(task); err != nil {
		t.Fatal(err)
	}
}

func (b *sweepBundle) archived(t *testing.T, p jobs.AccountProcessPayload, id string) {
	t.Helper()
	b.enqueue(t, p, id)
	if err := b.inspector.ArchiveTask(jobs.QueueAccounts, id); err != nil {
		t.Fatal(err)
	}
}

// row is what a test compares of a process row: its status and the code
// of its recorded failure.
type row struct{ Status, Code string }

func (b *sweepBundle) rows(t *testing.T) map[string]row {
	t.Helper()
	var rs []struct {
		EAN    string         `db:"external_account_number"`
		Status string         `db:"status"`
		Code   sql.NullString `db:"code"`
	}
	if err := b.db.Select(&rs, `SELECT external_account_number, status, last_error->>'code' AS code FROM import_processes`); err != nil {
		t.Fatal(err)
	}
	out := map[string]row{}
	for _, r := range rs {
		out[r.EAN] = row{r.Status, r.Code.String}
	}
	return out
}

func (b *sweepBundle) state(t *testing.T, id string) string {
	t.Helper()
	info, err := b.inspector.GetTaskInfo(jobs.QueueAccounts, id)
	if err != nil {
		return "none"
	}
	return info.State.String()
}

// An E5 that queues an account again while the sweep is about to record its
// archived task as abandoned (it deletes the archived task, marks the row,
// queues a new task of the same id) keeps its new task and its
// IN_PROGRESS row: the sweep looks at the task again under the row's lock
// and leaves them alone. Before, the sweep recorded the failure on the new
// run's row and deleted its task.
func TestSweepAbandoned_AccountQueuedAgainMeanwhileKeepsItsNewTask(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := t.Context()
	id := jobs.AccountTaskID("DEMO", "ACC-1", false)
	p := b.process(t, "ACC-1", id, 0)
	b.archived(t, p, id)

	e5, err := b.db.Beginx() // the E5, holding the row as its mark does
	if err != nil {
		t.Fatal(err)
	}
	defer e5.Rollback()
	if _, err := e5.Exec(`SELECT 1 FROM import_processes WHERE id = $1 FOR UPDATE`, p.ProcessID); err != nil {
		t.Fatal(err)
	}
	swept := make(chan error, 1)
	go func() { swept <- SweepAbandoned(ctx, b.inspector, b.sweeper) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := b.db.Get(&waiting, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`); err != nil {
			t.Fatal(err)
		}
		if waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweep never waited for the row")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := b.inspector.DeleteTask(jobs.QueueAccounts, id); err != nil {
		t.Fatal(err)
	}
	if _, err := e5.Exec(`UPDATE import_processes SET status = 'IN_PROGRESS', task_id = $2, updated_at = now() WHERE id = $1`, p.ProcessID, id); err != nil {
		t.Fatal(err)
	}
	b.enqueue(t, p, id)
	if err := e5.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-swept; err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]row{"ACC-1": {"IN_PROGRESS", ""}}, b.rows(t)); diff != "" {
		t.Errorf("row after the sweep (-want +got):\n%s", diff)
	}
	if got := b.state(t, id); got != "pending" {
		t.Errorf("the new task is %s, want pending", got)
	}
	if n, _ := b.rdb.Exists(ctx, "importd:outcome:"+id).Result(); n != 0 {
		t.Error("the sweep announced a failure to the new run's waiters")
	}
}

// The sweep records a failure only for the task the row names: an archived
// task that another task took over from (jobs/process/takeover.go) is only
// deleted, and a row that names it (or, marked before migration 00018,
// none) gets account_processing_abandoned.
func TestSweepAbandoned_RecordsOnlyForTheTaskTheRowNames(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	owned := jobs.AccountTaskID("DEMO", "ACC-OWNED", false)
	b.archived(t, b.process(t, "ACC-OWNED", owned, 0), owned)
	legacy := jobs.AccountTaskID("DEMO", "ACC-LEGACY", false)
	pl := b.process(t, "ACC-LEGACY", legacy, 0)
	if _, err := b.db.Exec(`UPDATE import_processes SET task_id = NULL WHERE id = $1`, pl.ProcessID); err != nil {
		t.Fatal(err)
	}
	b.archived(t, pl, legacy)
	dead := jobs.AccountTaskID("DEMO", "ACC-TAKEN", false)
	pt := b.process(t, "ACC-TAKEN", dead+"-takeover-1", 0)
	b.archived(t, pt, dead)
	b.enqueue(t, pt, dead+"-takeover-1")

	if err := SweepAbandoned(t.Context(), b.inspector, b.sweeper); err != nil {
		t.Fatal(err)
	}
	want := map[string]row{
		"ACC-OWNED":  {"UNKNOWN", jobs.CodeAccountProcessingAbandoned},
		"ACC-LEGACY": {"UNKNOWN", jobs.CodeAccountProcessingAbandoned},
		"ACC-TAKEN":  {"IN_PROGRESS", ""},
	}
	if diff := cmp.Diff(want, b.rows(t)); diff != "" {
		t.Errorf("rows after the sweep (-want +got):\n%s", diff)
	}
	for _, id := range []string{owned, legacy, dead} {
		if got := b.state(t, id); got != "none" {
			t.Errorf("archived task %s is %s after the sweep, want deleted", id, got)
		}
	}
}

// An IN_PROGRESS account whose task vanished from Redis is recorded as
// account_processing_lost once LostGrace has passed, and its waiters hear
// it; an account whose task is still queued, one marked moments ago, and
// one whose takeover task is queued are left alone.
func TestSweepLost_RecordsAccountsWhoseTaskVanished(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := t.Context()
	old := 2 * LostGrace
	lost := jobs.AccountTaskID("DEMO", "ACC-LOST", false)
	b.process(t, "ACC-LOST", lost, old)
	queued := jobs.AccountTaskID("DEMO", "ACC-QUEUED", false)
	b.enqueue(t, b.process(t, "ACC-QUEUED", queued, old), queued)
	b.process(t, "ACC-FRESH", jobs.AccountTaskID("DEMO", "ACC-FRESH", false), 0)
	taken := jobs.AccountTaskID("DEMO", "ACC-TAKEN", false) + "-takeover-1"
	b.enqueue(t, b.process(t, "ACC-TAKEN", taken, old), taken)

	next, err := SweepLost(ctx, b.sweeper, LostGrace, 0)
	if err != nil {
		t.Fatal(err)
	}
	if next != 0 {
		t.Errorf("SweepLost went on from %d after the last row, want 0", next)
	}
	want := map[string]row{
		"ACC-LOST":   {"UNKNOWN", jobs.CodeAccountProcessingLost},
		"ACC-QUEUED": {"IN_PROGRESS", ""},
		"ACC-FRESH":  {"IN_PROGRESS", ""},
		"ACC-TAKEN":  {"IN_PROGRESS", ""},
	}
	if diff := cmp.Diff(want, b.rows(t)); diff != "" {
		t.Errorf("rows after the sweep (-want +got):\n%s", diff)
	}
	if n, _ := b.rdb.Exists(ctx, "importd:outcome:"+lost).Result(); n != 1 {
		t.Error("the lost account's failure was not announced")
	}
}

// Recording is idempotent: a second sweep of a task already recorded (a
// second worker that listed it before the first deleted it) writes and
// announces nothing.
func TestAbandoned_SecondRecordingChangesNothing(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	id := jobs.AccountTaskID("DEMO", "ACC-1", false)
	p := b.process(t, "ACC-1", id, 0) // and no task: Missing holds at each look
	ctx := context.Background()
	var got []bool
	for range 2 {
		recorded, err := b.sweeper.Abandoned(ctx, p, id, creation.AbandonedRecord(), creation.Missing)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, recorded)
	}
	if diff := cmp.Diff([]bool{true, false}, got); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]row{"ACC-1": {"UNKNOWN", jobs.CodeAccountProcessingAbandoned}}, b.rows(t)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

// A slot whose release was lost (its worker was killed while retrying it)
// is freed by the next sweep; the slot of a task still queued is kept.
func TestSweep_FreesTheSlotOfAnEndedTask(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	queued := b.process(t, "A-QUEUED", "task-queued", 0)
	b.enqueue(t, queued, "task-queued")
	// Taken nine minutes ago: it expires in one.
	expires := float64(time.Now().Add(time.Minute).UnixMilli())
	for _, id := range []string{"task-queued", "task-lost-its-release"} {
		if err := b.rdb.ZAdd(ctx, slots.Key, redis.Z{Score: expires, Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	w := &Worker{inspector: b.inspector, sweeper: b.sweeper, rdb: b.rdb, db: b.db, log: slog.New(slog.DiscardHandler)}
	w.sweepOnce(ctx, 0)
	held, err := b.rdb.ZRange(ctx, slots.Key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"task-queued"}, held); diff != "" {
		t.Errorf("slots held after a sweep (-want +got):\n%s", diff)
	}
}

// The sweep folds the progress counters' deltas, so that they stay few
// while nobody reads the progress page.
func TestSweep_FoldsTheProgressCounters(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	for _, ean := range []string{"A-1", "A-2", "A-3"} { // three inserts: three delta rows of one key
		b.process(t, ean, "task-"+ean, 0)
	}
	w := &Worker{inspector: b.inspector, sweeper: b.sweeper, rdb: b.rdb, db: b.db, log: slog.New(slog.DiscardHandler)}
	w.sweepOnce(ctx, 0)
	var rows []struct {
		State string `db:"state"`
		N     int    `db:"n"`
	}
	if err := b.db.Select(&rows, `SELECT state, n FROM progress_counts ORDER BY state`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].State != "in_progress" || rows[0].N != 3 {
		t.Errorf("counter rows after a sweep: %+v, want one row: in_progress 3", rows)
	}
}
