package worker

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/creation"
	"github.com/bulkimport/bulkimport/jobs/email"
	"github.com/bulkimport/bulkimport/jobs/payment"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// A running account task on its last attempt whose context is cancelled
// records a failure only when asynq will not run it again. A worker that
// stops hands the task back to its queue at ShutdownTimeout without
// counting an attempt, then cancels it: the row stays IN_PROGRESS with no
// failure and nothing is announced, so a waiting E5 waits for the next
// worker. Before, that cancellation was recorded and announced as a
// failure after retries, which the requeued task then overwrote. An
// operator's cancellation (CancelProcessing) of a last attempt archives the
// task, and is still recorded and announced at once.
func TestAccountTask_CancelledOnItsLastAttemptRecordsAFailureOnlyWhenItWillNotRunAgain(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// stop cancels the running task: by stopping the worker (cancel
		// ends its Run) or through the inspector.
		stop          func(t *testing.T, b *sweepBundle, id string, cancel context.CancelFunc, ran <-chan error)
		wantTask      string
		wantRow       row
		wantAnnounced bool
	}{
		{
			name: "handed back by a stopping worker",
			stop: func(t *testing.T, _ *sweepBundle, _ string, cancel context.CancelFunc, ran <-chan error) {
				cancel()
				select {
				case err := <-ran:
					if err != nil {
						t.Fatalf("worker: %v", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("the worker did not stop within 30s (ShutdownTimeout 300ms)")
				}
			},
			wantTask: "pending, retried 0 of 0",
			wantRow:  row{"IN_PROGRESS", ""},
		},
		{
			name: "cancelled by an operator",
			stop: func(t *testing.T, b *sweepBundle, id string, _ context.CancelFunc, _ <-chan error) {
				if err := b.inspector.CancelProcessing(id); err != nil {
					t.Fatal(err)
				}
				deadline := time.Now().Add(30 * time.Second)
				for b.state(t, id) != "archived" {
					if time.Now().After(deadline) {
						t.Fatalf("task %s, not archived 30s after its cancellation", b.state(t, id))
					}
					time.Sleep(20 * time.Millisecond)
				}
			},
			wantTask:      "archived, retried 0 of 0",
			wantRow:       row{"UNKNOWN", "internal_error"},
			wantAnnounced: true,
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupSweep(t)
			// Redis pub/sub is shared by every database number: an id of
			// its own keeps other tests' cancellations and announcements
			// away from this one.
			ean := fmt.Sprintf("ACC-HANDBACK-%d", i)
			id := jobs.AccountTaskID("DEMO", ean, false)
			p := b.process(t, ean, id, 0)
			// The task waits for this lock, and so does the failure it may
			// record, until the test lets go.
			hold, err := b.db.Beginx()
			if err != nil {
				t.Fatal(err)
			}
			defer hold.Rollback()
			if _, err := hold.Exec(`LOCK TABLE import_processes IN ACCESS EXCLUSIVE MODE`); err != nil {
				t.Fatal(err)
			}
			hub := taskwait.NewHub(b.rdb)
			defer hub.Close()
			waiter, err := hub.Subscribe(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			defer waiter.Close()

			o := b.rdb.Options()
			redisOpt := asynq.RedisClientOpt{Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB}
			w, err := New(Config{ShutdownTimeout: 300 * time.Millisecond, AccountConcurrency: 2, Concurrency: 1},
				workDeps(t, b.db, redisOpt, b.rdb, slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			stopped := make(chan struct{})
			go func() { ran <- w.Run(ctx); close(stopped) }()
			t.Cleanup(func() {
				cancel()
				<-stopped
			})
			task, err := jobs.NewAccountProcessTask(p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.client.Enqueue(task, asynq.MaxRetry(0)); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for !(b.state(t, id) == "active" && b.lockWaiters(t) >= 1) {
				if time.Now().After(deadline) {
					t.Fatalf("task %s with %d lock waiters, not blocked on the row within 30s", b.state(t, id), b.lockWaiters(t))
				}
				time.Sleep(20 * time.Millisecond)
			}

			tc.stop(t, b, id, cancel, ran)
			// Read before the lock is let go, which would let the sweep
			// delete an archived task.
			info, err := b.inspector.GetTaskInfo(jobs.QueueAccounts, id)
			if err != nil {
				t.Fatal(err)
			}
			if err := hold.Rollback(); err != nil {
				t.Fatal(err)
			}
			_, announced, err := waiter.Wait(t.Context(), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			got := struct {
				Task      string
				Row       row
				Announced bool
			}{fmt.Sprintf("%s, retried %d of %d", info.State, info.Retried, info.MaxRetry), b.rows(t)[ean], announced}
			want := struct {
				Task      string
				Row       row
				Announced bool
			}{tc.wantTask, tc.wantRow, tc.wantAnnounced}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("after the cancellation (-want +got):\n%s", diff)
			}
		})
	}
}

// lockWaiters counts the connections of the test's database waiting for a
// lock.
func (b *sweepBundle) lockWaiters(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.db.Get(&n, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`); err != nil {
		t.Fatal(err)
	}
	return n
}

// workDeps are the Deps of a worker on d and rdb, with the work each task
// type runs built as cmd builds it (no batching, no documents, e-mails
// recorded without being sent).
func workDeps(t testing.TB, d *db.DB, opt asynq.RedisConnOpt, rdb redis.UniversalClient, log *slog.Logger) Deps {
	t.Helper()
	sender, err := email.NewSender(d, "")
	if err != nil {
		t.Fatal(err)
	}
	ends := creation.NewAnnouncer(rdb, log)
	return Deps{DB: d, Redis: opt, RedisCli: rdb, Log: log,
		Creator:  creation.NewCreator(d, rdb, account.NewCatalog(d, nil), nil, ends, log),
		Sweeper:  creation.NewSweeper(d, asynq.NewInspectorFromRedisClient(rdb), ends),
		Verifier: payment.NewVerifier(d, rdb, log),
		Sender:   sender,
	}
}
