package taskwait

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Heartbeat timing. Asynq v0.26 notices a dead worker only after its 30 s
// lease, a 30 s allowance and a recoverer that runs once a minute, none of
// which it lets a caller set; a waiting request watches this heartbeat
// instead (jobs/process). A handler writes its key HeartbeatDelay after it
// starts, then refreshes it every HeartbeatEvery, and the key expires
// HeartbeatTTL after the last refresh. So a key missing while its task is
// active means that the handler started less than HeartbeatDelay ago, or
// has not run for HeartbeatTTL: its process died, froze or lost Redis. A
// waiter tells the two apart by looking twice, more than HeartbeatDelay
// apart (jobs/process/takeover.go, deadAfter).
//
// Most tasks end within HeartbeatDelay and never write a heartbeat: two
// Redis commands fewer per task (issue 14).
const (
	HeartbeatDelay = 500 * time.Millisecond
	HeartbeatEvery = time.Second
	HeartbeatTTL   = 5 * time.Second
)

func heartbeatKey(taskID string) string { return "importd:heartbeat:" + taskID }

// Beat keeps the heartbeat of the running task taskID, from HeartbeatDelay
// on, until stop is called or ctx ends; stop deletes a heartbeat that was
// written. Failures are ignored: a waiter that misses the heartbeat takes
// the task over, which is safe, only slower.
func Beat(ctx context.Context, rdb redis.UniversalClient, taskID string) (stop func()) {
	key := heartbeatKey(taskID)
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	var beaten bool
	go func() {
		defer close(done)
		t := time.NewTimer(HeartbeatDelay)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = rdb.Set(ctx, key, 1, HeartbeatTTL).Err()
				beaten = true
				t.Reset(HeartbeatEvery)
			}
		}
	}()
	return func() {
		cancel()
		<-done
		if beaten {
			_ = rdb.Del(context.Background(), key).Err()
		}
	}
}

// Alive reports whether the task taskID has a heartbeat.
func Alive(ctx context.Context, rdb redis.UniversalClient, taskID string) (bool, error) {
	n, err := rdb.Exists(ctx, heartbeatKey(taskID)).Result()
	return n == 1, err
}
