package metrics

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db/dbtest"
)

// The accounts queue's depth, on which the workers scale
// (deploy/k8s/worker-scaledobject.yaml), is the count of its pending tasks
// in a real Redis: tasks scheduled for later, and other queues' tasks, are
// apart, and a queue that never held a task reports zeros.
func TestQueues_PendingDepthFromRedis(t *testing.T) {
	t.Parallel()
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	client := asynq.NewClientFromRedisClient(rc)
	enqueue := func(n int, opts ...asynq.Option) {
		for range n {
			if _, err := client.Enqueue(asynq.NewTask("account:process", nil), opts...); err != nil {
				t.Fatal(err)
			}
		}
	}
	enqueue(3, asynq.Queue("accounts"))
	enqueue(2, asynq.Queue("accounts"), asynq.ProcessIn(time.Hour))
	enqueue(1, asynq.Queue("emails"))

	m := New()
	m.WatchQueues(asynq.NewInspectorFromRedisClient(rc), "accounts", "vendors", "emails")
	got, err := gauges(t, m)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"accounts/pending": 3, "accounts/active": 0, "accounts/scheduled": 2, "accounts/retry": 0, "accounts/archived": 0,
		"vendors/pending": 0, "vendors/active": 0, "vendors/scheduled": 0, "vendors/retry": 0, "vendors/archived": 0,
		"emails/pending": 1, "emails/active": 0, "emails/scheduled": 0, "emails/retry": 0, "emails/archived": 0,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("importd_queue_tasks (-want +got):\n%s", d)
	}
}
