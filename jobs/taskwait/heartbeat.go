package taskwait

import (
	"context"
	"crypto/rand"
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
// apart (Liveness, DeadAfter).
//
// Most tasks end within HeartbeatDelay and never write a heartbeat: two
// Redis commands fewer per task, for most tasks.
const (
	HeartbeatDelay = 500 * time.Millisecond
	HeartbeatEvery = time.Second
	HeartbeatTTL   = 5 * time.Second
)

func heartbeatKey(taskID string) string { return "importd:heartbeat:" + taskID }

// Beat keeps the heartbeat of the running task taskID, from HeartbeatDelay
// on, until stop is called or ctx ends; stop deletes a heartbeat that was
// written, unless another run of the same task id has written its own
// since (a stopping worker hands its task back, and another worker starts
// it while the first handler is still ending): each run's heartbeat holds
// a token of its own. Failures are ignored: a waiter that misses the
// heartbeat takes the task over, which is safe, only slower.
func Beat(ctx context.Context, rdb redis.UniversalClient, taskID string) (stop func()) {
	key := heartbeatKey(taskID)
	token := rand.Text()
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
				_ = rdb.Set(ctx, key, token, HeartbeatTTL).Err()
				beaten = true
				t.Reset(HeartbeatEvery)
			}
		}
	}()
	return func() {
		cancel()
		<-done
		if beaten {
			_ = deleteOwnHeartbeat.Run(context.Background(), rdb, []string{key}, token).Err()
		}
	}
}

// deleteOwnHeartbeat deletes KEYS[1] only while it holds ARGV[1].
var deleteOwnHeartbeat = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// Alive reports whether the task taskID has a heartbeat.
func Alive(ctx context.Context, rdb redis.UniversalClient, taskID string) (bool, error) {
	n, err := rdb.Exists(ctx, heartbeatKey(taskID)).Result()
	return n == 1, err
}
