// Package taskwait is how an API request waits for an Asynq task that a
// worker runs: subscribe to the task's done channel, enqueue the task under a
// deterministic id (or join the one already queued or running), and wait for
// the worker's announcement with a timeout. The announcement only wakes the
// request; the caller reads the outcome from PostgreSQL, which is the truth,
// whenever it can.
//
// It is the technique of E5 (jobs/process) in a form other tasks can share.
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
	// queued is true when EnqueueOrJoin queued a new task: it deleted the
	// stored announcement before, and the waiter listened before, so
	// there is nothing stored to look for until the hub reconnects or a
	// poll interval passes.
	queued bool
}

// outcomeKey holds the last announcement of a task, for a request that
// joins the task after it announced its end but before Asynq marked it
// finished: that request subscribed too late to hear the announcement.
// EnqueueOrJoin deletes the key before it queues a new task, so whatever
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
// outcomeKey).
func (w *Waiter) Wait(ctx context.Context, d time.Duration) (payload []byte, ok bool, err error) {
	return w.WaitOrCheck(ctx, d, 0, nil)
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

// WaitOrCheck is Wait that also looks every interval for an announcement
// that did not arrive (one published while the hub was reconnecting is
// stored by Publish) and asks done, when not nil, whether the outcome is
// already in PostgreSQL (the worker may have died after writing it, before
// announcing it). A lost announcement then costs at most one interval
// instead of the whole wait. It returns ok false as soon as done reports
// true, like a wait that ended without a message: the caller then reads
// PostgreSQL. An error from done is treated as "not yet", since the next
// tick or the end of the wait reads PostgreSQL again. A renewed
// subscription after a reconnect looks at once, whatever the interval.
func (w *Waiter) WaitOrCheck(ctx context.Context, d, interval time.Duration, done func(context.Context) (bool, error)) (payload []byte, ok bool, err error) {
	if !w.queued {
		if b, ok := w.stored(ctx); ok {
			return b, true, nil
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	var tick <-chan time.Time // nil, so never ready, without an interval
	if interval > 0 {
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		tick = ticker.C
	}
	look := func() (payload []byte, found, ended bool) {
		if b, ok := w.stored(ctx); ok {
			return b, true, false
		}
		if done != nil {
			if finished, err := done(ctx); err == nil && finished {
				return nil, false, true
			}
		}
		return nil, false, false
	}
	for {
		select {
		case b := <-w.msgs:
			w.last = b
			return b, true, nil
		case <-tick:
		case <-w.recheck:
		case <-w.hub.done:
			return nil, false, nil
		case <-timer.C:
			return nil, false, nil
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		if b, found, ended := look(); found {
			return b, true, nil
		} else if ended {
			return nil, false, nil
		}
	}
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
	pub := pipe.Publish(ctx, jobs.DoneChannel(taskID), b)
	_, _ = pipe.Exec(ctx)
	return errors.Join(set.Err(), pub.Err())
}

// EnqueueOrJoin joins the task of id w's task id on queue when one is
// pending, scheduled, running or retrying, and otherwise queues task (whose
// id it is). A finished task that Asynq still retains (completed, or
// archived after failing) is deleted first, so that the work can be tried
// again, and so is the stored announcement of an earlier task of that id.
//
// prepare, when not nil, runs just before a new task is queued, and never
// when an existing task is joined: callers record there that work is under
// way. Recording it for a joined task would be wrong when that task is just
// finishing: it may have written its outcome already, and the record would
// overwrite it with nothing left to correct it.
//
// joined reports whether an existing task was joined.
func (w *Waiter) EnqueueOrJoin(ctx context.Context, client *asynq.Client, inspector *asynq.Inspector, task *asynq.Task, queue string, prepare func() error) (joined bool, err error) {
	joined, err = enqueueOrJoin(ctx, w.rdb, client, inspector, task, queue, w.taskID, func() error {
		if err := w.rdb.Del(ctx, outcomeKey(w.taskID)).Err(); err != nil {
			return err
		}
		if prepare != nil {
			return prepare()
		}
		return nil
	})
	w.queued = err == nil && !joined
	return joined, err
}

// TakeOver is EnqueueOrJoin for a task of another id, id, that does the
// work of w's task, whose worker died (see Beat), and announces its end on
// w's channel. It keeps the stored announcement: the dead task may have
// announced its end just before it died.
func (w *Waiter) TakeOver(ctx context.Context, client *asynq.Client, inspector *asynq.Inspector, task *asynq.Task, queue, id string, prepare func() error) (joined bool, err error) {
	if prepare == nil {
		prepare = func() error { return nil }
	}
	return enqueueOrJoin(ctx, w.rdb, client, inspector, task, queue, id, prepare)
}

// asynqTaskKey is the Redis key of a task in Asynq v0.26 (internal/base
// TaskKey); TestAsynqTaskKey holds it to the Asynq in go.mod.
func asynqTaskKey(queue, taskID string) string { return "asynq:{" + queue + "}:t:" + taskID }

func enqueueOrJoin(ctx context.Context, rdb redis.UniversalClient, client *asynq.Client, inspector *asynq.Inspector, task *asynq.Task, queue, taskID string, prepare func() error) (joined bool, err error) {
	// Most accounts have no task yet. One EXISTS says so, where Asynq's
	// GetTaskInfo takes two round trips; a task that exists is looked at
	// with GetTaskInfo, and so is every look after a conflict.
	n, err := rdb.Exists(ctx, asynqTaskKey(queue, taskID)).Result()
	if err != nil {
		return false, err
	}
	look := n > 0
	for range 3 {
		if look {
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
		}
		look = true
		if err := prepare(); err != nil {
			return false, err
		}
		_, err = client.EnqueueContext(ctx, task)
		if !errors.Is(err, asynq.ErrTaskIDConflict) {
			return false, err
		}
		// Another request queued it between the look and the enqueue: look again.
	}
	return false, fmt.Errorf("could not enqueue task %s", taskID)
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
