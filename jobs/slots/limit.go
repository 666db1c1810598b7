// Package slots is the E5 concurrency limit (PROCESS_CONCURRENCY_LIMIT):
// one slot per account task queued or processing, across every API replica
// and worker, in a sorted set in Redis. The API takes a slot before it
// queues a task (Limiter); the worker frees it when the task ends
// (ReleaseIn, beside the task's announcement) and its sweep reclaims the
// slots whose release was lost (Reclaim).
package slots

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limiter counts accounts queued or processing across every API replica and
// worker: a sorted set in Redis of task ids scored by the time their slot
// expires. Taking a slot and counting happen in one script, so two replicas
// cannot both take the last slot. Expiry frees the slot of a task whose
// worker died without releasing it.
type Limiter struct {
	rdb   redis.UniversalClient
	limit int
}

// NewLimiter returns the limiter of limit slots in rdb.
func NewLimiter(rdb redis.UniversalClient, limit int) *Limiter {
	return &Limiter{rdb: rdb, limit: limit}
}

// TTL is how long a slot lives without being released or taken again: the
// slot of a task whose every release was lost frees itself then.
const TTL = 10 * time.Minute

// acquireScript: KEYS[1] set; ARGV: now (ms), expiry (ms), limit, member.
// Returns 1 when the member holds a slot (newly or already), 0 when full.
var acquireScript = redis.NewScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[4]) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
  return 1
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
return 1
`)

// Key is the Redis key of the accounts-in-flight set.
const Key = "importd:accounts-in-flight"

// Acquire takes a slot for taskID, or reports false when all are taken. A
// task that holds one already (another request for the same account)
// shares it.
func (l *Limiter) Acquire(ctx context.Context, taskID string) (bool, error) {
	now := time.Now()
	n, err := acquireScript.Run(ctx, l.rdb, []string{Key},
		now.UnixMilli(), now.Add(TTL).UnixMilli(), l.limit, taskID).Int()
	return n == 1, err
}

// releaseRetryFor bounds the retries of a release that failed. A Redis
// restart refuses connections, then answers LOADING, for about a second;
// a failover takes longer. Without the retries the slot of a task that
// ended during either stayed taken until it expired (TTL), and with
// the limit set each such slot was an account fewer processed at once for
// ten minutes. The chaos test, which restarts Redis while accounts are
// being created, finds such releases.
const releaseRetryFor = 30 * time.Second

// Release frees the slot of taskID: an E5 that took it calls it when no
// task of its own will end and free it (the worker frees the slot of a
// task that ends, in the same round trip as its announcement: ReleaseIn). Releasing a
// slot not held is harmless. When Redis refuses, Release returns the
// error at once, so that no caller waits on it, and goes on trying in the
// background for releaseRetryFor (RetryRelease).
//
// A background retry may free the slot of a later task of the same
// account, queued by a new E5 meanwhile: the limit is then one too high
// until that task ends, which is better than one too low for ten minutes.
func Release(ctx context.Context, rdb redis.UniversalClient, taskID string) error {
	err := ReleaseIn(ctx, rdb, taskID).Err()
	if err != nil {
		go RetryRelease(context.WithoutCancel(ctx), rdb, taskID)
	}
	return err
}

// ReleaseIn adds the release of taskID's slot to c, a client or a pipeline.
func ReleaseIn(ctx context.Context, c redis.Cmdable, taskID string) *redis.IntCmd {
	return c.ZRem(ctx, Key, taskID)
}

// RetryRelease tries the release of taskID's slot again, backing off, for
// releaseRetryFor; run it in a goroutine of its own after a release failed.
func RetryRelease(ctx context.Context, rdb redis.UniversalClient, taskID string) {
	deadline := time.Now().Add(releaseRetryFor)
	for d := 100 * time.Millisecond; time.Now().Before(deadline); d = min(2*d, 2*time.Second) {
		time.Sleep(d)
		if rdb.ZRem(ctx, Key, taskID).Err() == nil {
			return
		}
	}
}
