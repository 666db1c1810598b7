package taskwait_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// newRedis returns a client on a Redis database of the test's own, with at
// most poolSize pooled connections, and its database number.
func newRedis(t *testing.T, poolSize int) (*redis.Client, int) {
	t.Helper()
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	opt.PoolSize = poolSize
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return rdb, opt.DB
}

func newHub(t *testing.T, rdb redis.UniversalClient) *taskwait.Hub {
	t.Helper()
	h := taskwait.NewHub(rdb)
	t.Cleanup(func() { h.Close() })
	return h
}

// clients lists the connections to the database db, each as its CLIENT
// LIST fields.
func clients(t *testing.T, rdb *redis.Client, db int) []map[string]string {
	t.Helper()
	list, err := rdb.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		if f["db"] == fmt.Sprint(db) {
			out = append(out, f)
		}
	}
	return out
}

// 400 requests waiting at once share one pub/sub connection, not one each,
// and each hears the announcement of its own task.
func TestHub_ConcurrentWaitsShareOneConnection(t *testing.T) {
	t.Parallel()
	const n, pool = 400, 10
	rdb, db := newRedis(t, pool)
	hub := newHub(t, rdb)
	ctx := t.Context()
	var subscribed, finished sync.WaitGroup
	subscribed.Add(n)
	finished.Add(n)
	got := make([]string, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			defer finished.Done()
			// Two requests per task: both hear it.
			w, err := hub.Subscribe(ctx, fmt.Sprintf("task-%d", i/2))
			subscribed.Done()
			if err != nil {
				errs <- err
				return
			}
			defer w.Close()
			b, ok, err := w.Wait(ctx, 20*time.Second)
			if err != nil || !ok {
				errs <- fmt.Errorf("wait %d: ok %v, err %v", i, ok, err)
				return
			}
			got[i] = string(b)
		}()
	}
	subscribed.Wait()
	var subs, total int
	for _, c := range clients(t, rdb, db) {
		total++
		if c["sub"] != "0" || c["psub"] != "0" {
			subs++
		}
	}
	if subs != 1 || total > pool+1 {
		t.Errorf("%d waits opened %d connections, %d of them subscribed; want 1 subscribed and at most %d in all", n, total, subs, pool+1)
	}
	for i := range n / 2 {
		if err := taskwait.Publish(ctx, rdb, fmt.Sprintf("task-%d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	finished.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, g := range got {
		if want := fmt.Sprint(i / 2); g != want {
			t.Errorf("waiter %d heard %q, want %q", i, g, want)
			break
		}
	}
}

// An announcement published while the hub's connection was away is found
// as soon as the subscription is renewed, although the wait has no poll
// interval.
func TestHub_AnnouncementLostDuringReconnectIsFound(t *testing.T) {
	t.Parallel()
	rdb, db := newRedis(t, 10)
	hub := newHub(t, rdb)
	ctx := t.Context()
	w, err := hub.Subscribe(ctx, "task-reconnect")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, c := range clients(t, rdb, db) {
		if c["psub"] != "0" {
			if err := rdb.ClientKillByFilter(ctx, "ID", c["id"]).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := taskwait.Publish(ctx, rdb, "task-reconnect", "done"); err != nil {
		t.Fatal(err)
	}
	// The wait has no poll interval, so only the renewed subscription's look
	// can find the announcement: without it the wait ends empty. Its length
	// is only a deadline, generous for a loaded machine.
	start := time.Now()
	b, ok, err := w.Wait(ctx, time.Minute)
	if err != nil || !ok || string(b) != `"done"` {
		t.Fatalf("Wait = %q, ok %v, err %v after %v; want the announcement", b, ok, err, time.Since(start))
	}
}

// A hub that is closed ends the waits on it and refuses new ones.
func TestHub_CloseEndsWaits(t *testing.T) {
	t.Parallel()
	rdb, _ := newRedis(t, 10)
	hub := taskwait.NewHub(rdb)
	w, err := hub.Subscribe(t.Context(), "task-close")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, func() { hub.Close() })
	if _, ok, err := w.Wait(t.Context(), 20*time.Second); ok || err != nil {
		t.Errorf("Wait on a closed hub = ok %v, err %v; want a wait that ended", ok, err)
	}
	w.Close()
	if _, err := hub.Subscribe(t.Context(), "task-after"); err == nil {
		t.Error("Subscribe on a closed hub succeeded")
	}
}

// Pub/sub channels are the whole Redis server's: a service in another
// database of the same server that announces a task of the same id must
// not wake this one's waiter (it once answered an E5 with the other
// service's account), while this one's own announcement does.
func TestHub_AnnouncementsOfAnotherDatabaseAreNotHeard(t *testing.T) {
	t.Parallel()
	mine, _ := newRedis(t, 4)
	other, _ := newRedis(t, 4)
	hub := newHub(t, mine)
	w, err := hub.Subscribe(t.Context(), "same-task")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := taskwait.Publish(t.Context(), other, "same-task", "the other service's"); err != nil {
		t.Fatal(err)
	}
	if b, ev, err := w.Next(t.Context(), 300*time.Millisecond, 0); ev != taskwait.Ended || err != nil {
		t.Fatalf("Next = %q, %v, %v; want nothing heard from the other database", b, ev, err)
	}
	if err := taskwait.Publish(t.Context(), mine, "same-task", "mine"); err != nil {
		t.Fatal(err)
	}
	b, ev, err := w.Next(t.Context(), 10*time.Second, 0)
	if ev != taskwait.Announced || err != nil || string(b) != `"mine"` {
		t.Errorf("Next = %q, %v, %v; want its own announcement", b, ev, err)
	}
}
