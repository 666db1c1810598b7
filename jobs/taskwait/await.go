package taskwait

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Tasks is how an API request has a worker do its work and waits for the
// outcome: E5 (account:process), E2 and E9 (payment:verify) each call Do
// once, with a Work that says what differs between them. Do owns the
// rest, the same for all three: subscribe to the task's announcements
// before it can end, join the task already under way or queue a new one
// (with a bound on the requests that race to queue it), wait for the
// announcement while looking every PollInterval at where the outcome is
// kept, and take the task over when its worker died (Liveness).
//
// The announcement only wakes the request: PostgreSQL holds every outcome,
// and the caller answers from it whenever the announcement does not say
// everything.
type Tasks struct {
	rdb       redis.UniversalClient
	client    *asynq.Client
	inspector *asynq.Inspector
	hub       *Hub
	log       *slog.Logger
	takeovers TakeoverCounter
}

// TakeoverCounter counts the takeovers a process queues, by task type
// (*metrics.Metrics); nil counts nothing.
type TakeoverCounter interface {
	Takeover(taskType string)
}

// NewTasks returns the Tasks of rdb, waiting through hub, the process's
// one pub/sub connection. log reports takeovers and failed looks; it must
// not be nil.
func NewTasks(rdb redis.UniversalClient, hub *Hub, log *slog.Logger, takeovers TakeoverCounter) *Tasks {
	if log == nil {
		panic("taskwait.NewTasks: nil *slog.Logger")
	}
	return &Tasks{rdb: rdb, client: asynq.NewClientFromRedisClient(rdb), inspector: asynq.NewInspectorFromRedisClient(rdb),
		hub: hub, log: log, takeovers: takeovers}
}

// Inspector is the Asynq inspector of t's Redis, for the callers' own looks
// at their queues.
func (t *Tasks) Inspector() *asynq.Inspector { return t.inspector }

// Work is one piece of work a request waits for: what E5, E2 and E9 do
// differently. Queue, ID, Type, Task and Wait are required; the hooks are
// optional.
type Work struct {
	// Queue is the Asynq queue of the task.
	Queue string
	// ID is the work's own task id, deterministic, so that identical
	// requests share one task; takeover ids derive from it.
	ID string
	// Type is the task's type, for the takeover count.
	Type string
	// Task builds the task under id: ID, or a takeover's id.
	Task func(id string) (*asynq.Task, error)
	// Wait bounds the wait for the outcome.
	Wait time.Duration
	// RenewOnTakeover gives a takeover's task the whole Wait again (a
	// vendor verification whose worker died has its whole budget to run
	// again); otherwise the wait keeps its deadline.
	RenewOnTakeover bool

	// Prepare runs before this request queues a new task, never for a
	// joined one (a joined task may be just finishing, with its outcome
	// written, which a record of work under way would overwrite). It
	// returns an undo, run when nothing was queued after all; E5 marks its
	// row IN_PROGRESS, and puts it back.
	Prepare func(ctx context.Context) (undo func(), err error)
	// Claim moves the work from the task current to the takeover next
	// before next is queued, or returns ErrTakenOver when another request
	// did (E5's compare-and-swap on its row's task_id): the next look then
	// follows the task that owns the work now.
	Claim func(ctx context.Context, current, next string) error
	// Check looks where the outcome is kept, at each poll and once after
	// joining a task: done ends the wait (the worker may have written the
	// outcome and died before announcing it, or the joined task ended just
	// before this request subscribed). follow, when not empty, names the
	// task that owns the work now. An error is "not yet": the next poll
	// looks again.
	Check func(ctx context.Context) (done bool, follow string, err error)
	// Heard reads an announcement; done false waits on (E5 hears the
	// announcements of tasks its row no longer names). Nil ends the wait at
	// the first announcement.
	Heard func(ctx context.Context, payload []byte) (done bool)
}

// Outcome is how a wait ended.
type Outcome struct {
	// Payload is the announcement that ended the wait, or nil when none
	// did: Check found the outcome, or the wait ran out (TimedOut).
	Payload []byte
	// TimedOut is true when neither an announcement nor Check ended the
	// wait within Work.Wait (or the hub stopped).
	TimedOut bool
	// Current is the task that did the work last: ID, or a takeover's.
	Current string
}

// ErrTakenOver is Work.Claim's answer when another request took the work
// over, or its outcome is recorded.
var ErrTakenOver = errors.New("taskwait: task taken over already")

// PollInterval is how often a waiting request looks at where the outcome
// is kept (Work.Check) and at its task's heartbeat (Liveness).
const PollInterval = time.Second

// enqueueAttempts bounds the looks of a join-or-enqueue and of a takeover:
// each conflict means that another request queued the task between a look
// and an enqueue.
const enqueueAttempts = 3

// ErrUnavailable wraps a failure of Redis in Do: nothing was queued, and
// the caller answers that the queue is unavailable.
var ErrUnavailable = errors.New("taskwait: the queue is unavailable")

// Do has the work done and waits for its outcome. It returns an error
// wrapping ErrUnavailable when Redis failed before the task was queued
// (nothing was queued, and Prepare's record is undone), ctx's error when
// the request ended, and otherwise an Outcome.
func (t *Tasks) Do(ctx context.Context, w Work) (Outcome, error) {
	// Subscribe before enqueueing, so that a task finishing at once cannot
	// announce its outcome before anyone listens.
	waiter, err := t.hub.Subscribe(ctx, w.ID)
	if err != nil {
		return Outcome{}, t.unavailable(ctx, err)
	}
	defer waiter.Close()
	joined, err := t.enqueueOrJoin(ctx, waiter, w)
	if err != nil {
		return Outcome{}, err
	}
	live := NewLiveness(t.rdb, t.inspector, w.Queue, w.ID)
	if joined && w.Check != nil {
		if done, _, err := w.Check(ctx); err == nil && done {
			return Outcome{Current: live.Current()}, nil
		}
	}
	deadline := time.Now().Add(w.Wait)
	for {
		payload, ev, err := waiter.Next(ctx, time.Until(deadline), PollInterval)
		switch ev {
		case Ended:
			if err != nil {
				return Outcome{}, err
			}
			return Outcome{TimedOut: true, Current: live.Current()}, nil
		case Announced:
			if w.Heard == nil || w.Heard(ctx, payload) {
				return Outcome{Payload: payload, Current: live.Current()}, nil
			}
			continue
		}
		if w.Check != nil {
			done, follow, err := w.Check(ctx)
			if err == nil && done {
				return Outcome{Current: live.Current()}, nil
			}
			if follow != "" {
				live.Follow(follow)
			}
		}
		dead, err := live.Dead(ctx)
		if err == nil && dead {
			var renewed bool
			renewed, err = t.takeOver(ctx, w, live)
			if renewed && w.RenewOnTakeover {
				deadline = time.Now().Add(w.Wait)
			}
		}
		if err != nil && ctx.Err() == nil {
			t.log.WarnContext(ctx, "watch task", "type", w.Type, "task_id", live.Current(), "error", err)
		}
	}
}

// enqueueOrJoin joins the work's task when one is pending, scheduled,
// running or retrying, and otherwise runs Prepare and queues the task.
func (t *Tasks) enqueueOrJoin(ctx context.Context, waiter *Waiter, w Work) (joined bool, err error) {
	task, err := w.Task(w.ID)
	if err != nil {
		return false, err
	}
	var undo []func()
	fail := func(err error) (bool, error) {
		for _, u := range undo {
			u()
		}
		return false, err
	}
	for range enqueueAttempts {
		joined, err := waiter.Join(ctx, t.inspector, w.Queue)
		if err != nil {
			return fail(t.unavailable(ctx, err))
		}
		if joined {
			return true, nil
		}
		if w.Prepare != nil {
			u, err := w.Prepare(ctx)
			if err != nil {
				return fail(err)
			}
			if u != nil {
				undo = append(undo, u)
			}
		}
		err = waiter.Enqueue(ctx, t.client, task)
		if err == nil {
			return false, nil
		}
		if !errors.Is(err, asynq.ErrTaskIDConflict) {
			return fail(t.unavailable(ctx, err))
		}
		// Another request queued it between the look and the enqueue: look again.
	}
	return fail(t.unavailable(ctx, fmt.Errorf("could not enqueue task %s", w.ID)))
}

// unavailable wraps a failure of Redis, or is the request's own end when
// its client hung up meanwhile: that is no outage to report.
func (t *Tasks) unavailable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// takeOver queues the task that replaces the current one, whose worker
// died: under the next takeover id when the current task is active in a
// dead worker (Asynq keeps its id until its recoverer frees it), or under
// its own id when it is missing. Every request that waits for the same
// work picks the same id, so that one queues it and the others join it.
// Claim, when set, moves the work to the new task first; a request that
// loses that race follows the winner's task at its next Check. moved is
// true when the work follows a new task, queued or joined.
//
// Running a piece of work twice must be safe for every Work: E5's creation
// locks its row and creates nothing for an account that has a number, and
// accounts are unique; a verification only reads the vendor, and unique
// indexes keep one instruction (jobs/process/takeover.go and
// jobs/payment argue each).
func (t *Tasks) takeOver(ctx context.Context, w Work, live *Liveness) (moved bool, err error) {
	next := live.TakeoverID(w.ID)
	task, err := w.Task(next)
	if err != nil {
		return false, err
	}
	queued := false // by this request, rather than joined
	for attempt := 0; ; attempt++ {
		if attempt == enqueueAttempts {
			return false, fmt.Errorf("could not enqueue task %s", next)
		}
		joined, err := Joinable(ctx, t.rdb, t.inspector, w.Queue, next)
		if err != nil {
			return false, err
		}
		if joined {
			break // another request queued it
		}
		if w.Claim != nil {
			if err := w.Claim(ctx, live.Current(), next); errors.Is(err, ErrTakenOver) {
				return false, nil
			} else if err != nil {
				return false, err
			}
		}
		// The dead task may have announced its end just before it died:
		// its stored announcement stays for the waiters to find.
		_, err = t.client.EnqueueContext(ctx, task)
		if err == nil {
			queued = true
			break
		}
		if !errors.Is(err, asynq.ErrTaskIDConflict) {
			return false, err
		}
	}
	if queued {
		// Only the request that queued the takeover reports it; the
		// others that waited on the dead task follow it quietly.
		if t.takeovers != nil {
			t.takeovers.Takeover(w.Type)
		}
		t.log.InfoContext(ctx, "took over task", "type", w.Type, "task_id", live.Current(), "takeover_task_id", next)
	}
	live.Follow(next)
	return true, nil
}
