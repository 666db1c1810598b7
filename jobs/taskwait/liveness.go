package taskwait

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Takeover timing: how long a waiter lets a task look dead before it
// queues a task of its own in its place.
const (
	// DeadAfter is how long an active task must go without a heartbeat
	// (whose key already outlives its last refresh by HeartbeatTTL) before
	// it is taken over: two looks, so that a task that has just started
	// and not yet written its first beat (HeartbeatDelay, half of
	// DeadAfter), or just finished, is not.
	DeadAfter = time.Second
	// MissingAfter is how long a task must be missing from Redis: another
	// request may be between deleting a finished task and queueing a new
	// one.
	MissingAfter = 2 * time.Second
)

// Liveness follows, for one waiting request, the task that does its work,
// and says when that task has stopped answering: active in Asynq without a
// heartbeat for DeadAfter (its worker died, froze or lost Redis), or
// missing from Redis for MissingAfter (Redis lost it, or an operator
// deleted it). Asynq itself notices a dead worker only after a minute and
// more (see the heartbeat's timing); a waiter that asks here at each poll
// can queue a task in its place within seconds.
//
// A Liveness is used by one goroutine.
type Liveness struct {
	rdb       redis.UniversalClient
	inspector *asynq.Inspector
	queue     string
	current   string
	// since is when the current task was first seen dead or missing; zero
	// while it looks alive.
	since   time.Time
	missing bool
}

// NewLiveness follows task taskID of queue.
func NewLiveness(rdb redis.UniversalClient, inspector *asynq.Inspector, queue, taskID string) *Liveness {
	return &Liveness{rdb: rdb, inspector: inspector, queue: queue, current: taskID}
}

// Current is the task followed.
func (l *Liveness) Current() string { return l.current }

// Missing reports whether the current task was missing from Redis at the
// last look, rather than active without a heartbeat.
func (l *Liveness) Missing() bool { return l.missing }

// Follow makes l follow task id, the one that does the work now.
func (l *Liveness) Follow(id string) {
	if id != l.current {
		l.current, l.since, l.missing = id, time.Time{}, false
	}
}

// Dead reports whether the current task has been active without a
// heartbeat for DeadAfter, or missing from Redis for MissingAfter. Pending,
// scheduled and retrying tasks wait for a worker, and completed and
// archived ones have ended: none of them is dead.
func (l *Liveness) Dead(ctx context.Context) (bool, error) {
	// A heartbeat answers in one round trip what Asynq's task state would
	// in two: the task is running.
	alive, err := Alive(ctx, l.rdb, l.current)
	if err != nil {
		return false, err
	}
	if alive {
		l.since, l.missing = time.Time{}, false
		return false, nil
	}
	info, err := l.inspector.GetTaskInfo(l.queue, l.current)
	var silent, missing bool
	switch {
	case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
		silent, missing = true, true
	case err != nil:
		return false, err
	case info.State == asynq.TaskStateActive:
		silent = true
	}
	if !silent || missing != l.missing {
		l.since, l.missing = time.Time{}, missing
	}
	if !silent {
		return false, nil
	}
	now := time.Now()
	if l.since.IsZero() {
		l.since = now
	}
	limit := DeadAfter
	if missing {
		limit = MissingAfter
	}
	return now.Sub(l.since) >= limit, nil
}

// TakeoverID is the id of the task that takes over from the current one:
// a missing task is queued again under its own id, and a dead one, whose id
// Asynq keeps in its active list until its recoverer frees it, under
// NextTakeoverID's.
func (l *Liveness) TakeoverID(base string) string {
	if l.missing {
		return l.current
	}
	return NextTakeoverID(base, l.current)
}

// NextTakeoverID is the id of the task that takes over from current:
// base-takeover-1 after the base task, then -2, and so on. Being derived
// from the task it replaces, every waiter of the same work picks the same
// one, so that they share the takeover task instead of queueing several.
func NextTakeoverID(base, current string) string {
	n := 0
	if rest, ok := strings.CutPrefix(current, base+"-takeover-"); ok {
		n, _ = strconv.Atoi(rest)
	}
	return base + "-takeover-" + strconv.Itoa(n+1)
}
