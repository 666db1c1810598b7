package taskwait

import (
	"testing"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db/dbtest"
)

// Joinable's first look reads Asynq's task key itself: a task that
// Asynq holds has that key, and one it does not hold has not.
func TestAsynqTaskKey(t *testing.T) {
	t.Parallel()
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	client := asynq.NewClientFromRedisClient(rdb)
	ctx := t.Context()
	if _, err := client.EnqueueContext(ctx, asynq.NewTask("t", nil), asynq.TaskID("held"), asynq.Queue("q")); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int64{"held": 1, "not-held": 0} {
		if n, err := rdb.Exists(ctx, asynqTaskKey("q", id)).Result(); err != nil || n != want {
			t.Errorf("EXISTS %s = %d (err %v), want %d", asynqTaskKey("q", id), n, err, want)
		}
	}
}
