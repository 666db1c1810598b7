package process

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// limiter counts accounts queued or processing across every API replica and
// worker: a sorted set in Redis of task ids scored by the time their slot
// expires. Taking a slot and counting happen in one script, so two replicas
// cannot both take the last slot. Expiry frees the slot of a task whose
// worker died without releasing it.
type limiter struct {
	rdb   redis.UniversalClient
	key   string
	limit int
	ttl   time.Duration
}

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

// LimiterKey is the Redis key of the accounts-in-flight set.
const LimiterKey = "importd:accounts-in-flight"

// acquire takes a slot for taskID. A task that holds one already (another
// request for the same account) shares it.
func (l *limiter) acquire(ctx context.Context, taskID string) (bool, error) {
	now := time.Now()
	n, err := acquireScript.Run(ctx, l.rdb, []string{l.key},
		now.UnixMilli(), now.Add(l.ttl).UnixMilli(), l.limit, taskID).Int()
	return n == 1, err
}

// releaseRetryFor bounds the retries of a release that failed. A Redis
// restart refuses connections, then answers LOADING, for about a second;
// a failover takes longer. Without the retries the slot of a task that
// ended during either stayed taken until it expired (slotTTL), and with
// the limit set each such slot was an account fewer processed at once for
// ten minutes. The chaos test, which restarts Redis while accounts are
// being created, finds such releases.
const releaseRetryFor = 30 * time.Second

// releaseSlot frees the slot of taskID: an E5 that took it calls it when no
// task of its own will end and free it (the Announcer frees the slot of a
// task that ends, in the same round trip as its announcement). Releasing a
// slot not held is harmless. When Redis refuses, releaseSlot returns the
// error at once, so that no caller waits on it, and goes on trying in the
// background for releaseRetryFor.
//
// A background retry may free the slot of a later task of the same
// account, queued by a new E5 meanwhile: the limit is then one too high
// until that task ends, which is better than one too low for ten minutes.
func releaseSlot(ctx context.Context, rdb redis.UniversalClient, taskID string) error {
	err := releaseIn(ctx, rdb, taskID).Err()
	if err != nil {
		go retryRelease(context.WithoutCancel(ctx), rdb, taskID)
	}
	return err
}

// releaseIn adds the release of taskID's slot to c, a client or a pipeline.
func releaseIn(ctx context.Context, c redis.Cmdable, taskID string) *redis.IntCmd {
	return c.ZRem(ctx, LimiterKey, taskID)
}

func retryRelease(ctx context.Context, rdb redis.UniversalClient, taskID string) {
	deadline := time.Now().Add(releaseRetryFor)
	for d := 100 * time.Millisecond; time.Now().Before(deadline); d = min(2*d, 2*time.Second) {
		time.Sleep(d)
		if rdb.ZRem(ctx, LimiterKey, taskID).Err() == nil {
			return
		}
	}
}
