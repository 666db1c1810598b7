package taskwait_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// counter counts takeovers by task type.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) Takeover(typ string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[typ]++
}

func newTasks(t *testing.T, rdb redis.UniversalClient, c taskwait.TakeoverCounter) *taskwait.Tasks {
	t.Helper()
	return taskwait.NewTasks(rdb, newHub(t, rdb), slog.New(slog.DiscardHandler), c)
}

// work is a Work on queue of tasks of type "t" that carry their id.
func work(queue, id string, wait time.Duration) taskwait.Work {
	return taskwait.Work{Queue: queue, ID: id, Type: "t", Wait: wait,
		Task: func(id string) (*asynq.Task, error) {
			return asynq.NewTask("t", []byte(id), asynq.TaskID(id), asynq.Queue(queue), asynq.MaxRetry(0)), nil
		}}
}

// An outcome written where the caller keeps it, whose announcement never
// comes, is noticed at the first look after it was written, not at the end
// of the whole wait. The outcome is written by the first look itself, so
// that the test waits for that event rather than for a fixed delay.
func TestDo_NoticesAnUnannouncedOutcomeAtTheNextLook(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	rdb, _ := newRedis(t, 10)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE outcome (done boolean NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	// Check is called from Do's goroutine, so looks and found need no lock.
	looks, found := 0, false
	w := work("unannounced", "task-without-announcement", 10*time.Minute) // far longer than the test may take
	w.Check = func(ctx context.Context) (bool, string, error) {
		looks++
		var n int
		if err := db.GetContext(ctx, &n, `SELECT count(*) FROM outcome`); err != nil {
			return false, "", err
		}
		if looks == 1 {
			if _, err := db.ExecContext(ctx, `INSERT INTO outcome VALUES (true)`); err != nil {
				t.Error(err)
			}
		}
		found = n > 0
		return found, "", nil
	}
	start := time.Now()
	out, err := newTasks(t, rdb, nil).Do(ctx, w)
	if err != nil || out.TimedOut || out.Payload != nil || !found {
		t.Fatalf("Do = %+v, %v, outcome found %v after %v; want a wait ended by the check", out, err, found, time.Since(start))
	}
	if looks != 2 {
		t.Errorf("the outcome was noticed at look %d, want the first look after it was written (2)", looks)
	}
}

// Requests for the same work at once share one task: one is queued, and
// every request hears its announcement.
func TestDo_ConcurrentRequestsShareOneTask(t *testing.T) {
	t.Parallel()
	rdb, _ := newRedis(t, 40)
	tasks := newTasks(t, rdb, nil)
	const n, queue, id = 20, "shared", "shared-task"
	var prepared atomic.Int32
	var wg sync.WaitGroup
	outs := make([]taskwait.Outcome, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := work(queue, id, time.Minute)
			w.Prepare = func(context.Context) (func(), error) { prepared.Add(1); return nil, nil }
			outs[i], errs[i] = tasks.Do(t.Context(), w)
		}()
	}
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	waitUntil(t, "the task is queued", func() bool {
		info, err := inspector.GetTaskInfo(queue, id)
		return err == nil && info.State == asynq.TaskStatePending
	})
	// Every request subscribed before it queued or joined: once the task
	// is queued, an announcement reaches each, heard or stored.
	if err := taskwait.Publish(t.Context(), rdb, id, "done"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || string(outs[i].Payload) != `"done"` {
			t.Errorf("request %d: %+v, %v; want the announcement", i, outs[i], errs[i])
		}
	}
	tasksQueued, err := inspector.ListPendingTasks(queue)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasksQueued) != 1 || prepared.Load() < 1 {
		t.Errorf("%d tasks queued, Prepare ran %d times; want one task, prepared before it was queued", len(tasksQueued), prepared.Load())
	}
}

// A task active in a worker that keeps no heartbeat (it died, or froze) is
// taken over: the work is claimed for the takeover's id, a task of that id
// is queued and counted, and the wait follows it to its announcement. A
// claim lost to another request queues nothing.
func TestDo_TakesOverATaskWhoseWorkerDied(t *testing.T) {
	t.Parallel()
	rdb, _ := newRedis(t, 20)
	const queue, id = "takeover", "dying-task"
	// A worker that takes the task and never answers, nor beats.
	started := make(chan struct{}, 4)
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 1, Queues: map[string]int{queue: 1},
		Logger: quietLogger{}, ShutdownTimeout: time.Millisecond})
	mux := asynq.NewServeMux()
	mux.HandleFunc("t", func(ctx context.Context, _ *asynq.Task) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)

	var c counter
	tasks := newTasks(t, rdb, &c)
	var mu sync.Mutex
	var claims [][2]string
	w := work(queue, id, time.Minute)
	w.Claim = func(_ context.Context, current, next string) error {
		mu.Lock()
		defer mu.Unlock()
		claims = append(claims, [2]string{current, next})
		return nil
	}
	type result struct {
		out taskwait.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := tasks.Do(t.Context(), w)
		done <- result{out, err}
	}()
	<-started
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	takeover := id + "-takeover-1"
	waitUntil(t, "the takeover task is queued", func() bool {
		_, err := inspector.GetTaskInfo(queue, takeover)
		return err == nil
	})
	b, _ := json.Marshal("done by the takeover")
	if err := rdb.Publish(t.Context(), jobs.DoneChannel(rdb.Options().DB, id), b).Err(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.out.Current != takeover || string(r.out.Payload) != string(b) {
		t.Errorf("Do = %+v, %v; want the announcement, following %s", r.out, r.err, takeover)
	}
	mu.Lock()
	defer mu.Unlock()
	if d := cmp.Diff([][2]string{{id, takeover}}, claims); d != "" {
		t.Errorf("claims (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int{"t": 1}, c.n); d != "" {
		t.Errorf("takeovers counted (-want +got):\n%s", d)
	}

	t.Run("a claim lost to another request queues nothing", func(t *testing.T) {
		const lost = "lost-claim"
		w := work(queue, lost, 3*taskwait.DeadAfter+3*time.Second)
		var claimed atomic.Int32
		w.Claim = func(context.Context, string, string) error { claimed.Add(1); return taskwait.ErrTakenOver }
		// The first task is still held by the silent worker, so this one is
		// queued but never runs: pending tasks are not dead. Make it look
		// missing instead, which is taken over under its own id.
		out, err := tasks.Do(t.Context(), withDelete(w, inspector))
		if err != nil || !out.TimedOut {
			t.Fatalf("Do = %+v, %v; want a wait that times out", out, err)
		}
		if claimed.Load() == 0 {
			t.Fatal("the missing task was never claimed")
		}
		if _, err := inspector.GetTaskInfo(queue, lost); err == nil {
			t.Error("a task was queued after the claim was lost")
		}
	})
}

// withDelete is w whose task is deleted from the queue as soon as it is
// queued, so that it looks missing to the waiter.
func withDelete(w taskwait.Work, inspector *asynq.Inspector) taskwait.Work {
	task := w.Task
	first := true
	w.Task = func(id string) (*asynq.Task, error) {
		if first {
			first = false
			go func() {
				for range 200 {
					if inspector.DeleteTask(w.Queue, id) == nil {
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
		return task(id)
	}
	return w
}

// waitUntil polls cond until it holds, failing t after 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type quietLogger struct{}

func (quietLogger) Debug(...any) {}
func (quietLogger) Info(...any)  {}
func (quietLogger) Warn(...any)  {}
func (quietLogger) Error(...any) {}
func (quietLogger) Fatal(...any) {}

// A request whose client hung up while its task was being queued ends
// with its own cancellation, not as a Redis outage (ErrUnavailable, which
// E5, E2 and E9 answer as queue_unavailable, a 500 that pages an
// operator); under a live request, a Redis that does not answer is one.
func TestDo_AClientThatHungUpIsNoOutage(t *testing.T) {
	t.Parallel()
	// A Redis that refuses every connection.
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { down.Close() })
	tasks := newTasks(t, down, nil)
	w := work("down", "down-task", time.Second)
	live, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tasks.Do(live, w); !errors.Is(err, taskwait.ErrUnavailable) {
		t.Errorf("Redis down under a live request: %v, want ErrUnavailable", err)
	}
	gone, hangUp := context.WithCancel(context.Background())
	hangUp()
	if _, err := tasks.Do(gone, w); !errors.Is(err, context.Canceled) || errors.Is(err, taskwait.ErrUnavailable) {
		t.Errorf("a request whose client hung up: %v, want context.Canceled alone", err)
	}
}

// When the task cannot be queued after Prepare ran, Prepare's undo runs
// once, so that nothing stays marked for work that never started (E5's
// IN_PROGRESS mark goes back to UNKNOWN), and the request hears that the
// queue is unavailable.
func TestDo_UndoesPrepareWhenTheTaskCannotBeQueued(t *testing.T) {
	t.Parallel()
	rdb, _ := newRedis(t, 4)
	tasks := newTasks(t, rdb, nil)
	prepared, undone := 0, 0
	w := taskwait.Work{Queue: "undo", ID: "undo-1", Type: "t", Wait: time.Second,
		// Asynq refuses a task without a type name at enqueue, after the
		// look for one to join and after Prepare.
		Task: func(id string) (*asynq.Task, error) {
			return asynq.NewTask("", nil, asynq.TaskID(id), asynq.Queue("undo")), nil
		},
		Prepare: func(context.Context) (func(), error) {
			prepared++
			return func() { undone++ }, nil
		}}
	_, err := tasks.Do(t.Context(), w)
	if !errors.Is(err, taskwait.ErrUnavailable) {
		t.Errorf("Do = %v, want ErrUnavailable", err)
	}
	if prepared != 1 || undone != 1 {
		t.Errorf("prepared %d times, undone %d; want once each", prepared, undone)
	}
}
