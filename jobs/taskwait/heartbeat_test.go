package taskwait_test

import (
	"context"
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

// A task that ends within HeartbeatDelay sends Redis nothing.
func TestBeat_TaskShorterThanTheDelayWritesNoHeartbeat(t *testing.T) {
	t.Parallel()
	rdb, _ := newRedis(t, 10)
	var c commandCounter
	rdb.AddHook(&c)
	taskwait.Beat(t.Context(), rdb, "short-task")()
	if n := c.n.Load(); n != 0 {
		t.Errorf("a short task sent %d Redis commands, want 0", n)
	}
}

// A task that runs longer has a heartbeat from HeartbeatDelay on, kept
// beyond HeartbeatTTL, and none once it stops.
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
	time.Sleep(taskwait.HeartbeatDelay + 300*time.Millisecond)
	if !alive() {
		t.Errorf("no heartbeat %v after the task started", taskwait.HeartbeatDelay+300*time.Millisecond)
	}
	if ttl, err := rdb.TTL(ctx, "importd:heartbeat:long-task").Result(); err != nil || ttl <= taskwait.HeartbeatTTL-2*time.Second {
		t.Errorf("heartbeat TTL %v (err %v), want close to %v", ttl, err, taskwait.HeartbeatTTL)
	}
	stop()
	if alive() {
		t.Error("heartbeat still there after the task stopped")
	}
}

// A handler that ends after another run of the same task id has started
// (its worker handed the task back while stopping) leaves the new run's
// heartbeat alone.
func TestBeat_StoppingRunKeepsTheHeartbeatOfANewerRun(t *testing.T) {
	t.Parallel()
	rdb, _ := newRedis(t, 10)
	ctx := t.Context()
	old := taskwait.Beat(ctx, rdb, "handed-back")
	time.Sleep(taskwait.HeartbeatDelay + 200*time.Millisecond)
	newer := taskwait.Beat(ctx, rdb, "handed-back")
	defer newer()
	time.Sleep(taskwait.HeartbeatDelay + 200*time.Millisecond)
	old()
	ok, err := taskwait.Alive(ctx, rdb, "handed-back")
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Error("the newer run's heartbeat is gone after the older run stopped")
	}
}
