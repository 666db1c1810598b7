package slots

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
)

// A slot outlives its task when the release is lost (the worker died while
// retrying it after a Redis restart, or the API died between taking the
// slot and queueing the task). Reclaim frees exactly those, and keeps
// the slots of tasks still to run or running, taken-over ones included,
// and of slots taken too recently to have their task queued yet.
func TestReclaim_FreesTheSlotsOfEndedTasksOnly(t *testing.T) {
	t.Parallel()
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	client := asynq.NewClientFromRedisClient(rdb)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	ctx := context.Background()

	enqueue := func(id string) {
		t.Helper()
		task, err := jobs.NewAccountProcessTaskID(jobs.AccountProcessPayload{ProcessID: 1, SupplierCode: "S", ExternalAccountNumber: id}, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.EnqueueContext(ctx, task, asynq.Queue(jobs.QueueAccounts)); err != nil {
			t.Fatal(err)
		}
	}
	archive := func(id string) {
		t.Helper()
		if err := inspector.ArchiveTask(jobs.QueueAccounts, id); err != nil {
			t.Fatal(err)
		}
	}
	const grace = time.Second
	old := float64(time.Now().Add(TTL - 2*grace).UnixMilli())
	fresh := float64(time.Now().Add(TTL).UnixMilli())
	hold := func(id string, score float64) {
		t.Helper()
		if err := rdb.ZAdd(ctx, Key, redis.Z{Score: score, Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}

	hold("no-task", old)
	hold("archived", old)
	enqueue("archived")
	archive("archived")
	hold("pending", old)
	enqueue("pending")
	hold("taken-over", old)
	enqueue("taken-over")
	archive("taken-over")
	enqueue("taken-over-takeover-1")
	hold("taken-over-missing", old) // its own task gone, its takeover queued
	enqueue("taken-over-missing-takeover-1")
	hold("just-taken", fresh)

	n, err := Reclaim(ctx, rdb, inspector, grace)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("Reclaim freed %d slots, want 2", n)
	}
	held, err := rdb.ZRange(ctx, Key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"just-taken", "pending", "taken-over", "taken-over-missing"}
	if diff := cmp.Diff(want, held, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("slots held after Reclaim (-want +got):\n%s", diff)
	}
}

// An E5 that takes a slot again between Reclaim reading it and
// freeing it moves its expiry, and keeps the slot.
func TestReclaim_KeepsASlotTakenAgainMeanwhile(t *testing.T) {
	t.Parallel()
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	read := time.Now().Add(TTL - time.Hour).UnixMilli()
	retaken := time.Now().Add(TTL).UnixMilli()
	if err := rdb.ZAdd(ctx, Key, redis.Z{Score: float64(retaken), Member: "t"}).Err(); err != nil {
		t.Fatal(err)
	}
	n, err := reclaimScript.Run(ctx, rdb, []string{Key}, "t", read).Int()
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the reclaim script freed a slot whose expiry moved since it was read")
	}
	if _, err := rdb.ZScore(ctx, Key, "t").Result(); err != nil {
		t.Errorf("slot taken again is gone: %v", err)
	}
}
