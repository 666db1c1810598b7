package taskwait_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// commandCounter is a go-redis hook that counts commands.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// eventually polls cond every 10 ms until it holds, and fails the test with
// what it waited for once within has passed. Tests wait for the event they
// expect this way, with a deadline generous enough for a loaded machine,
// never for a fixed delay.
func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// heartbeatKey is the key Beat writes for taskID.
func heartbeatKey(taskID string) string { return "importd:heartbeat:" + taskID }

// setCounter is a go-redis hook that counts, per value, the SET commands
// that have completed.
type setCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *setCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *setCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); len(args) >= 3 && strings.EqualFold(fmt.Sprint(args[0]), "set") {
			c.mu.Lock()
			if c.n == nil {
				c.n = map[string]int{}
			}
			c.n[fmt.Sprint(args[2])]++
			c.mu.Unlock()
		}
		return err
	}
}
func (c *setCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// sets is how many SETs of value have completed.
func (c *setCounter) sets(value string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[value]
}

// A task that ends within HeartbeatDelay sends Redis nothing. Only a run
// that provably ended within HeartbeatDelay (measured around Beat and stop,
// which bounds the timer's life from above) says so; a machine too loaded
// for that gets another try.
func TestBeat_TaskShorterThanTheDelayWritesNoHeartbeat(t *testing.T) {
	t.Parallel()
	rdb, _ := newRedis(t, 10)
	var c commandCounter
	rdb.AddHook(&c)
	for try := 0; ; try++ {
		start := time.Now()
		taskwait.Beat(t.Context(), rdb, "short-task")()
		if time.Since(start) < taskwait.HeartbeatDelay {
			break
		}
		if try == 100 {
			t.Fatalf("no run of Beat and stop took less than %v in %d tries", taskwait.HeartbeatDelay, try+1)
		}
	}
	if n := c.n.Load(); n != 0 {
		t.Errorf("a short task sent %d Redis commands, want 0", n)
	}
}

// A task that runs longer has a heartbeat from HeartbeatDelay on, which
// expires HeartbeatTTL after its last refresh, and none once it stops.
func TestBeat_LongTaskHasAHeartbeatUntilItStops(t *testing.T) {
	t.Parallel()
	rdb, _ := newRedis(t, 10)
	ctx := t.Context()
	alive := func() bool {
		ok, err := taskwait.Alive(ctx, rdb, "long-task")
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	stop := taskwait.Beat(ctx, rdb, "long-task")
	eventually(t, "the heartbeat of a running task", 30*time.Second, alive)
	// The TTL is HeartbeatTTL at each refresh and runs down between them;
	// wait for a reading taken soon after one.
	eventually(t, "a heartbeat TTL close to HeartbeatTTL", 30*time.Second, func() bool {
		ttl, err := rdb.TTL(ctx, heartbeatKey("long-task")).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl > taskwait.HeartbeatTTL {
			t.Fatalf("heartbeat TTL %v, more than HeartbeatTTL %v", ttl, taskwait.HeartbeatTTL)
		}
		return ttl > taskwait.HeartbeatTTL-2*time.Second
	})
	stop()
	if alive() {
		t.Error("heartbeat still there after the task stopped")
	}
}

// A handler that ends after another run of the same task id has started
// (its worker handed the task back while stopping) leaves the new run's
// heartbeat alone.
//
// The older run refreshes its own heartbeat every HeartbeatEvery, so it may
// write over the newer run's just before it stops; then deleting it is
// right, and the newer run writes its own again at its next refresh. A try
// proves the rule only when the older run wrote nothing after the newer
// run's heartbeat was seen, which a SET counter tells; a try that cannot
// prove it is made again with a new task id.
func TestBeat_StoppingRunKeepsTheHeartbeatOfANewerRun(t *testing.T) {
	t.Parallel()
	rdb, _ := newRedis(t, 10)
	var c setCounter
	rdb.AddHook(&c)
	ctx := t.Context()
	value := func(key string) string {
		v, err := rdb.Get(ctx, key).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		return v
	}
	for try := 0; try < 20; try++ {
		id := fmt.Sprintf("handed-back-%d", try)
		key := heartbeatKey(id)
		old := taskwait.Beat(ctx, rdb, id)
		var oldToken string
		eventually(t, "the older run's heartbeat", 30*time.Second, func() bool {
			oldToken = value(key)
			return oldToken != ""
		})
		newer := taskwait.Beat(ctx, rdb, id)
		var before int
		eventually(t, "the newer run's heartbeat", 30*time.Second, func() bool {
			// Counted before the read: a SET of the older run counted here
			// completed before the read saw the newer run's value.
			before = c.sets(oldToken)
			v := value(key)
			return v != "" && v != oldToken
		})
		old()
		ok, err := taskwait.Alive(ctx, rdb, id)
		newer()
		if err != nil {
			t.Fatal(err)
		}
		if c.sets(oldToken) != before {
			continue // the older run wrote again before it stopped: no proof either way
		}
		if !ok {
			t.Fatal("the newer run's heartbeat is gone after the older run stopped")
		}
		return
	}
	t.Fatal("in every try the older run refreshed its heartbeat between the newer run's and its stop")
}
