package slots

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// Grace is how long a slot is left alone after it was taken before
// Reclaim may free it: E5 takes the slot first and queues the task
// after it has marked the process row, so for a moment a held slot has no
// task. A new E5 for the same account takes the slot afresh and restarts
// the grace.
const Grace = time.Minute

// reclaimScript frees a slot only if its expiry is still the one read:
// an E5 that took it again meanwhile moved the expiry, and keeps it.
// KEYS[1] set; ARGV: member, expiry read (ms).
var reclaimScript = redis.NewScript(`
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) == tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
`)

// Reclaim frees the concurrency slots held for tasks that have ended,
// taken more than grace ago, and returns how many it freed. The worker's
// sweep calls it.
//
// A task frees its slot when it ends (ReleaseIn), and a release that
// fails is retried in the background; but that retry dies with its
// process. A worker killed within seconds of a Redis restart therefore
// left its tasks' slots taken until they expired (TTL, ten minutes),
// each an account fewer processed at once (the chaos test finds it). Slots
// of an API killed between taking a slot and queueing the task are freed
// the same way.
//
// A slot is kept while its task, or a takeover of it (taskwait.Tasks), is
// pending, scheduled, retrying or active in Asynq: a task active in a dead
// worker counts too, until Asynq's recoverer or a takeover ends it.
func Reclaim(ctx context.Context, rdb redis.UniversalClient, inspector *asynq.Inspector, grace time.Duration) (int, error) {
	// A slot's score is its expiry, TTL after it was (last) taken.
	takenBefore := time.Now().Add(TTL - grace).UnixMilli()
	held, err := rdb.ZRangeByScoreWithScores(ctx, Key, &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(takenBefore, 10),
	}).Result()
	if err != nil {
		return 0, err
	}
	freed := 0
	for _, z := range held {
		id, ok := z.Member.(string)
		if !ok {
			continue
		}
		live, err := taskLive(inspector, id)
		if err != nil {
			return freed, err
		}
		if live {
			continue
		}
		n, err := reclaimScript.Run(ctx, rdb, []string{Key}, id, int64(z.Score)).Int()
		if err != nil {
			return freed, err
		}
		freed += n
	}
	return freed, nil
}

// taskLive reports whether the account task id, or one of the takeover
// tasks that replaced it, is still to run or running.
func taskLive(inspector *asynq.Inspector, id string) (bool, error) {
	current := id
	for {
		info, err := inspector.GetTaskInfo(jobs.QueueAccounts, current)
		switch {
		case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
			// Takeovers are numbered from 1 without gaps, but an ended one
			// may be gone already: look one further before giving up.
			next := taskwait.NextTakeoverID(id, current)
			if _, err := inspector.GetTaskInfo(jobs.QueueAccounts, next); err != nil {
				if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
					return false, nil
				}
				return false, err
			}
			current = next
			continue
		case err != nil:
			return false, err
		}
		switch info.State {
		case asynq.TaskStatePending, asynq.TaskStateActive, asynq.TaskStateScheduled,
			asynq.TaskStateRetry, asynq.TaskStateAggregating:
			return true, nil
		}
		current = taskwait.NextTakeoverID(id, current)
	}
}
