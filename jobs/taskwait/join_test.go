package taskwait_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// Join shares a task that is still to run, and clears a finished one, with
// its stored announcement, for Enqueue to queue the work again; Enqueue
// reports a task queued by another request meanwhile as a conflict.
func TestJoin_SharesALiveTaskAndClearsAFinishedOne(t *testing.T) {
	t.Parallel()
	rdb, _ := newRedis(t, 10)
	ctx := t.Context()
	client, inspector := asynq.NewClientFromRedisClient(rdb), asynq.NewInspectorFromRedisClient(rdb)
	const id, queue = "join-task", "join-queue"
	task := asynq.NewTask("t", nil, asynq.TaskID(id), asynq.Queue(queue))
	w, err := newHub(t, rdb).Subscribe(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	if joined, err := w.Join(ctx, inspector, queue); err != nil || joined {
		t.Fatalf("Join with no task = %v, %v; want false, nil", joined, err)
	}
	if err := w.Enqueue(ctx, client, task); err != nil {
		t.Fatal(err)
	}
	if err := w.Enqueue(ctx, client, task); !errors.Is(err, asynq.ErrTaskIDConflict) {
		t.Fatalf("Enqueue of a queued task = %v, want asynq.ErrTaskIDConflict", err)
	}
	if joined, err := w.Join(ctx, inspector, queue); err != nil || !joined {
		t.Fatalf("Join with a pending task = %v, %v; want true, nil", joined, err)
	}

	// The task ends (archived) and announces it; a later request joins
	// nothing, and must not hear that old announcement.
	if err := inspector.ArchiveTask(queue, id); err != nil {
		t.Fatal(err)
	}
	if err := taskwait.Publish(ctx, rdb, id, "old outcome"); err != nil {
		t.Fatal(err)
	}
	later, err := newHub(t, rdb).Subscribe(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	if joined, err := later.Join(ctx, inspector, queue); err != nil || joined {
		t.Fatalf("Join with an archived task = %v, %v; want false, nil", joined, err)
	}
	if _, err := inspector.GetTaskInfo(queue, id); !errors.Is(err, asynq.ErrTaskNotFound) {
		t.Errorf("the archived task is still there (GetTaskInfo: %v)", err)
	}
	if b, ev, err := later.Next(ctx, 100*time.Millisecond, 0); ev != taskwait.Ended || err != nil {
		t.Errorf("Next after Join = %q, %v, %v; want the wait to end without the old announcement", b, ev, err)
	}
	if err := later.Enqueue(ctx, client, task); err != nil {
		t.Errorf("Enqueue after Join cleared the archived task: %v", err)
	}
}
