package taskwait

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Heartbeat timing. Asynq v0.26 notices a dead worker only after its 30 s
// lease, a 30 s allowance and a recoverer that runs once a minute, none of
// which it lets a caller set; a waiting request watches this heartbeat
// instead (jobs/process). A handler refreshes its key every HeartbeatEvery,
// and the key expires HeartbeatTTL after the last refresh, so a key missing
// while its task is active means the handler has not run for HeartbeatTTL:
// its process died, froze or lost Redis.
const (
	HeartbeatEvery = time.Second
	HeartbeatTTL   = 5 * time.Second
)

func heartbeatKey(taskID string) string { return "importd:heartbeat:" + taskID }

// Beat keeps the heartbeat of the running task taskID until stop is called
// or ctx ends. The first beat is written before Beat returns, so that the
// task never runs without one. Failures are ignored: a waiter that misses
// the heartbeat takes the task over, which is safe, only slower.
func Beat(ctx context.Context, rdb redis.UniversalClient, taskID string) (stop func()) {
	key := heartbeatKey(taskID)
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	_ = rdb.Set(ctx, key, 1, HeartbeatTTL).Err()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(HeartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = rdb.Set(ctx, key, 1, HeartbeatTTL).Err()
			}
		}
	}()
	return func() {
		cancel()
		<-done
		_ = rdb.Del(context.Background(), key).Err()
	}
}

// Alive reports whether the task taskID has a heartbeat.
func Alive(ctx context.Context, rdb redis.UniversalClient, taskID string) (bool, error) {
	n, err := rdb.Exists(ctx, heartbeatKey(taskID)).Result()
	return n == 1, err
}
