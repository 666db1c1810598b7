// Package gather runs the work of callers that arrive at the same moment
// together: group commit. A Queue hands whatever is queued to one caller,
// the leader, which does it in one go while the others wait for their
// outcome. Account creation (jobs/creation) uses it to create the accounts
// of concurrent tasks in one transaction.
//
// Batches form by themselves: a caller that finds a leader slot free takes
// every job queued (up to the size) and runs them; the callers that arrive
// meanwhile queue for the next run. A lone caller waits for nobody, so a
// quiet service pays nothing, and a busy one shares each run's fixed cost
// among more jobs the busier it is. It pays where jobs overlap: the API's
// one-account writes, at a few hundred a second and under a millisecond
// each, rarely do, and sharing their transactions measured slower
// (docs/performance.md, "Durable commits").
package gather

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Queue gathers jobs of type J and runs them in batches.
type Queue[J any] struct {
	size    int
	leaders chan struct{} // a slot per batch that may run at once
	run     func(ctx context.Context, js []J)

	mu    sync.Mutex
	queue []*entry[J]

	// emptyLeads counts the times a leader slot was taken with nothing
	// left to run, for the test that holds that waiters do not spin.
	emptyLeads atomic.Int64
}

type entry[J any] struct {
	job     J
	ctx     context.Context
	done    chan struct{} // closed when the run that held the job has ended
	claimed chan struct{} // closed when a leader takes the job out of the queue
	err     error         // the caller's context's cause, when it ended while queued
}

// NewQueue returns a queue that runs up to leaders batches at once, each of
// at most size jobs, with run. run gets a context of its own, which keeps
// the leader's values but not its cancellation, so that one caller that
// gives up does not end the others' run; run bounds it as it needs.
func NewQueue[J any](leaders, size int, run func(ctx context.Context, js []J)) *Queue[J] {
	if leaders < 1 || size < 1 {
		panic(fmt.Sprintf("gather.NewQueue: %d leaders of %d: both must be positive", leaders, size))
	}
	return &Queue[J]{size: size, leaders: make(chan struct{}, leaders), run: run}
}

// Do runs j together with whatever else is queued. It returns once the run
// that held j has ended, even when ctx ends first, so that the caller never
// races with its own job's run; it returns ctx's cause only when ctx ended
// while j was still queued, and then j never ran.
//
// Only a job still in the queue competes for a leader slot, so every slot
// taken runs at least that job. A job that a leader has claimed waits for
// its run alone: were it to take free slots too, its caller would spin
// through empty leads for as long as that run lasts.
func (q *Queue[J]) Do(ctx context.Context, j J) error {
	e := &entry[J]{job: j, ctx: ctx, done: make(chan struct{}), claimed: make(chan struct{})}
	q.mu.Lock()
	q.queue = append(q.queue, e)
	q.mu.Unlock()
	for {
		select {
		case <-e.claimed:
			<-e.done
			return e.err
		default:
		}
		select {
		case <-e.claimed:
			<-e.done
			return e.err
		case q.leaders <- struct{}{}:
			q.lead(ctx)
			<-q.leaders
		case <-ctx.Done():
			if q.remove(e) {
				return context.Cause(ctx)
			}
			<-e.done // in a run already
			return e.err
		}
	}
}

// lead takes up to size queued jobs, oldest first, and runs them.
func (q *Queue[J]) lead(ctx context.Context) {
	q.mu.Lock()
	n := min(len(q.queue), q.size)
	es := make([]*entry[J], 0, n)
	for _, e := range q.queue[:n] {
		close(e.claimed)
		if e.ctx.Err() != nil {
			e.err = context.Cause(e.ctx)
			close(e.done)
			continue
		}
		es = append(es, e)
	}
	q.queue = append(q.queue[:0:0], q.queue[n:]...)
	q.mu.Unlock()
	if len(es) == 0 {
		q.emptyLeads.Add(1)
		return
	}
	js := make([]J, len(es))
	for i, e := range es {
		js[i] = e.job
	}
	q.run(context.WithoutCancel(ctx), js)
	for _, e := range es {
		close(e.done)
	}
}

// remove takes e out of the queue, reporting whether it was still there.
func (q *Queue[J]) remove(e *entry[J]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, x := range q.queue {
		if x == e {
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
			return true
		}
	}
	return false
}

// Queued is how many jobs wait for a leader now.
func (q *Queue[J]) Queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// Leading is how many batches run now.
func (q *Queue[J]) Leading() int { return len(q.leaders) }
