// Package taskwait is how an API request waits for an Asynq task that a
// worker runs (Tasks.Do, for E5, E2 and E9 alike): subscribe to the task's
// done channel, enqueue the task under a deterministic id (or join the one
// already queued or running), wait for the worker's announcement with a
// timeout while looking at where the outcome is kept, and take the task
// over when its worker died. The announcement only wakes the request; the
// caller reads the outcome from PostgreSQL, which is the truth, whenever it
// can. The worker's side of the protocol is here too: the heartbeat a
// running task keeps (Beat) and the announcement of its end (Publish).
package taskwait

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/jobs"
)

// Waiter listens, through a Hub, on one task's done channel.
type Waiter struct {
	hub     *Hub
	rdb     redis.UniversalClient
	taskID  string
	channel string
	// msgs receives the task's announcements; recheck asks the waiter to
	// look for an announcement it may have missed while the hub's
	// connection was away.
	msgs    chan []byte
	recheck chan struct{}
	// last is the last announcement returned, so that the stored copy of
	// one already handled is not returned again.
	last []byte
	// queued is true when Enqueue queued a new task: Join deleted the
	// stored announcement before, and the waiter listened before, so
	// there is nothing stored to look for until the hub reconnects or a
	// poll interval passes.
	queued bool
	// looked is true when Next has just looked for a stored announcement
	// at a poll, so that the next call need not look again at once.
	looked bool
}

// outcomeKey holds the last announcement of a task, for a request that
// joins the task after it announced its end but before Asynq marked it
// finished: that request subscribed too late to hear the announcement.
// Join deletes the key before a new task is queued, so whatever
// the key holds is the announcement of the task a request joins.
func outcomeKey(taskID string) string { return "importd:outcome:" + taskID }

// outcomeTTL outlives by far the moment between a task's announcement and
// Asynq marking it finished, during which it can still be joined.
const outcomeTTL = 10 * time.Minute

// Close ends the subscription.
func (w *Waiter) Close() error {
	w.hub.leave(w)
	return nil
}

// Wait returns the payload of the first announcement within d. ok is false
// when none came in time, or when the hub stopped; err is ctx's error when
// ctx ended first. It also returns an announcement the task made before the
// Waiter subscribed, or while the hub's connection was away (see
// outcomeKey). A request that waits for work looks at its outcome between
// announcements too: Tasks.Do.
func (w *Waiter) Wait(ctx context.Context, d time.Duration) (payload []byte, ok bool, err error) {
	deadline := time.Now().Add(d)
	for {
		b, ev, err := w.Next(ctx, time.Until(deadline), 0)
		switch ev {
		case Announced:
			return b, true, nil
		case Ended:
			return nil, false, err
		}
	}
}

// stored reads the announcement the task kept (Publish), unless it is the
// one returned last. A failed read leaves the announcement, or the
// caller's own fallback when none comes, to answer.
func (w *Waiter) stored(ctx context.Context) ([]byte, bool) {
	b, err := w.rdb.Get(ctx, outcomeKey(w.taskID)).Bytes()
	if err != nil || bytes.Equal(b, w.last) {
		return nil, false
	}
	w.last = b
	return b, true
}

// Event is what ended a call of Next.
type Event int

const (
	// Ended: the time given ran out, the hub stopped, or ctx ended. The
	// caller reads the outcome where it is kept (PostgreSQL).
	Ended Event = iota
	// Announced: the payload is an announcement of the task, heard or
	// stored (Publish).
	Announced
	// Poll: an interval passed, or the hub's connection came back, and
	// the waiter found no stored announcement. The caller may look for
	// the outcome where it is kept (the worker may have died after
	// writing it, before announcing it), then call Next again.
	Poll
)

// Next waits up to d for the task's announcement, and returns at the first
// of: an announcement (Announced, with its payload), a poll (every
// interval, when interval is positive, and whenever a renewed subscription
// may have missed an announcement), or the end of d, of the hub or of ctx
// (Ended; err is ctx's error when ctx ended). A waiter that polls between
// calls loses at most one interval to an announcement that did not arrive,
// instead of the whole wait.
//
// An announcement that did not arrive is looked for in its stored copy
// (see outcomeKey) when Next starts and at each poll, except when nothing
// can be stored for this wait yet: a task the Waiter queued itself
// (Enqueue), or a poll that has just looked.
func (w *Waiter) Next(ctx context.Context, d, interval time.Duration) (payload []byte, ev Event, err error) {
	if !w.queued && !w.looked {
		if b, ok := w.stored(ctx); ok {
			return b, Announced, nil
		}
	}
	w.looked = false
	timer := time.NewTimer(d)
	defer timer.Stop()
	var tick <-chan time.Time // nil, so never ready, without an interval
	if interval > 0 {
		t := time.NewTimer(interval)
		defer t.Stop()
		tick = t.C
	}
	select {
	case b := <-w.msgs:
		w.last = b
		return b, Announced, nil
	case <-tick:
	case <-w.recheck:
	case <-w.hub.done:
		return nil, Ended, nil
	case <-timer.C:
		return nil, Ended, nil
	case <-ctx.Done():
		return nil, Ended, ctx.Err()
	}
	if b, ok := w.stored(ctx); ok {
		return b, Announced, nil
	}
	w.looked = true
	return nil, Poll, nil
}

// Publish announces the end of taskID with v encoded as JSON, and keeps the
// announcement for requests that join the task before Asynq marks it
// finished. It is best effort: a waiter that hears nothing reads the
// outcome from PostgreSQL when its wait ends. It never uses ctx's
// cancellation, because the outcome must be announced even when the task's
// context has just ended.
func Publish(ctx context.Context, rdb redis.UniversalClient, taskID string, v any) error {
	return PublishWith(ctx, rdb, taskID, v, nil)
}

// PublishWith is Publish with the commands that before adds to the same
// pipeline, ahead of the announcement: one round trip for all. Their
// errors are in their own results; PublishWith reports the announcement's.
func PublishWith(ctx context.Context, rdb redis.UniversalClient, taskID string, v any, before func(redis.Pipeliner)) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode outcome of %s: %w", taskID, err)
	}
	ctx = context.WithoutCancel(ctx)
	pipe := rdb.Pipeline()
	if before != nil {
		before(pipe)
	}
	// Stored before it is published: a request that missed the message
	// subscribed before its read of the key, so it finds the one or hears
	// the other.
	set := pipe.Set(ctx, outcomeKey(taskID), b, outcomeTTL)
	pub := pipe.Publish(ctx, jobs.DoneChannel(database(rdb), taskID), b)
	_, _ = pipe.Exec(ctx)
	return errors.Join(set.Err(), pub.Err())
}

// database is the number of the Redis database rdb works in, which names
// its done channels (jobs.DoneChannel): 0 for a cluster, which has no other.
func database(rdb redis.UniversalClient) int {
	if c, ok := rdb.(interface{ Options() *redis.Options }); ok {
		return c.Options().DB
	}
	return 0
}

// Join looks for a task of w's task id on queue, to share it: joined is
// true when one is pending, scheduled, running or retrying. Otherwise there
// is no task of that id any more (a finished one that Asynq still retains,
// completed or archived after failing, is deleted, so that the work can be
// tried again), and neither is the stored announcement of an earlier task
// of that id: the caller queues its own with Enqueue.
//
// Callers that record that work is under way do so between Join and
// Enqueue, never for a joined task: a joined task may be just finishing,
// may have written its outcome already, and a record written now would
// overwrite that outcome with nothing left to correct it.
func (w *Waiter) Join(ctx context.Context, inspector *asynq.Inspector, queue string) (joined bool, err error) {
	joined, err = Joinable(ctx, w.rdb, inspector, queue, w.taskID)
	if err != nil || joined {
		return joined, err
	}
	return false, w.rdb.Del(ctx, outcomeKey(w.taskID)).Err()
}

// Enqueue queues task, whose id is w's task id, after Join found none to
// share. It returns asynq.ErrTaskIDConflict when another request queued
// one meanwhile: Join again to share it.
func (w *Waiter) Enqueue(ctx context.Context, client *asynq.Client, task *asynq.Task) error {
	_, err := client.EnqueueContext(ctx, task)
	if err == nil {
		w.queued = true
	}
	return err
}

// asynqTaskKey is the Redis key of a task in Asynq v0.26 (internal/base
// TaskKey); TestAsynqTaskKey holds it to the Asynq in go.mod.
func asynqTaskKey(queue, taskID string) string { return "asynq:{" + queue + "}:t:" + taskID }

// Joinable reports whether the task taskID on queue is pending, scheduled,
// running or retrying, for a caller that shares such a task rather than
// queue one of the same id. A finished task that Asynq still retains
// (completed, or archived after failing) is deleted first, so that its id
// can be queued again. It keeps any stored announcement of that id.
func Joinable(ctx context.Context, rdb redis.UniversalClient, inspector *asynq.Inspector, queue, taskID string) (bool, error) {
	// Most accounts have no task yet. One EXISTS says so, where Asynq's
	// GetTaskInfo takes two round trips; a task that exists is looked at
	// with GetTaskInfo.
	n, err := rdb.Exists(ctx, asynqTaskKey(queue, taskID)).Result()
	if err != nil || n == 0 {
		return false, err
	}
	info, err := inspector.GetTaskInfo(queue, taskID)
	switch {
	case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
	case err != nil:
		return false, err
	case info.State == asynq.TaskStateCompleted || info.State == asynq.TaskStateArchived:
		if err := inspector.DeleteTask(queue, taskID); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
			return false, err
		}
	default:
		return true, nil // pending, scheduled, active or retrying: share it
	}
	return false, nil
}

// Abandon makes a task that nobody waits for any more stop, as far as it
// can: a task not yet started is deleted, and a running one is asked to
// cancel (its context ends). It is best effort and reports nothing: a task
// that finishes anyway has recorded its outcome in PostgreSQL.
func Abandon(inspector *asynq.Inspector, queue, taskID string) {
	info, err := inspector.GetTaskInfo(queue, taskID)
	if err != nil {
		return
	}
	switch info.State {
	case asynq.TaskStatePending, asynq.TaskStateScheduled, asynq.TaskStateRetry:
		_ = inspector.DeleteTask(queue, taskID)
	case asynq.TaskStateActive:
		_ = inspector.CancelProcessing(taskID)
	}
}
