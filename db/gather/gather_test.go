package gather

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// waitQueued waits until n jobs are queued.
func waitQueued[J any](t *testing.T, q *Queue[J], n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); q.Queued() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs queued", q.Queued(), n)
		}
	}
}

// takeLeaders holds every leader slot of q until the returned func is called.
func takeLeaders[J any](q *Queue[J]) (release func()) {
	for range cap(q.leaders) {
		q.leaders <- struct{}{}
	}
	return func() {
		for range cap(q.leaders) {
			<-q.leaders
		}
	}
}

// Jobs that queue while every leader is busy run together, up to the size,
// oldest first, and each caller returns after its own job's run.
func TestQueue_JobsQueuedMeanwhileRunTogether(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var runs [][]int
	q := NewQueue(1, 4, func(_ context.Context, js []int) {
		mu.Lock()
		runs = append(runs, js)
		mu.Unlock()
	})
	release := takeLeaders(q)
	var wg sync.WaitGroup
	for i := range 6 {
		waitQueued(t, q, i)
		wg.Go(func() {
			if err := q.Do(context.Background(), i); err != nil {
				t.Errorf("job %d: %v", i, err)
			}
		})
	}
	waitQueued(t, q, 6)
	release()
	wg.Wait()
	if diff := cmp.Diff([][]int{{0, 1, 2, 3}, {4, 5}}, runs); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
}

// A caller whose context ends while its job is queued gets the cause back,
// and its job never runs; one whose job a run holds waits for that run.
func TestQueue_ACallerThatGivesUpWhileQueuedLeavesItsJobOut(t *testing.T) {
	t.Parallel()
	ran := make(chan []string, 2)
	q := NewQueue(1, 8, func(_ context.Context, js []string) { ran <- js })
	release := takeLeaders(q)
	cause := errors.New("client went away")
	ctx, cancel := context.WithCancelCause(context.Background())
	gone := make(chan error, 1)
	go func() { gone <- q.Do(ctx, "gone") }()
	waitQueued(t, q, 1)
	cancel(cause)
	if err := <-gone; !errors.Is(err, cause) {
		t.Errorf("Do = %v, want the context's cause", err)
	}
	release()
	if err := q.Do(context.Background(), "stays"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"stays"}, <-ran); diff != "" {
		t.Errorf("the run (-want +got):\n%s", diff)
	}
}

// The run's context outlives the leader's: a leader whose caller gives up
// mid-run does not end the run of the jobs it carries.
func TestQueue_TheRunOutlivesTheLeadersContext(t *testing.T) {
	t.Parallel()
	started, finish := make(chan struct{}), make(chan struct{})
	var runErr error
	q := NewQueue(1, 8, func(ctx context.Context, _ []int) {
		close(started)
		<-finish
		runErr = ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Do(ctx, 1) }()
	<-started
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Do returned %v before its run ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(finish)
	if err := <-done; err != nil {
		t.Errorf("Do = %v, want nil: its job ran", err)
	}
	if runErr != nil {
		t.Errorf("the run's context ended with the leader's: %v", runErr)
	}
}

// Callers whose jobs a running batch holds wait for it without taking the
// free leader slots: taking one would find nothing to run, and doing so over
// and over for the length of a creation transaction burnt a fifth of a
// worker's CPU.
func TestQueue_CallersHeldByARunDoNotSpin(t *testing.T) {
	t.Parallel()
	const callers = 12
	entered, finish := make(chan int, callers), make(chan struct{})
	q := NewQueue(4, 64, func(_ context.Context, js []int) {
		entered <- len(js)
		<-finish
	})
	// Every leader slot is taken until every job is queued, so that one
	// leader takes them all.
	release := takeLeaders(q)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { _ = q.Do(context.Background(), i) })
	}
	waitQueued(t, q, callers)
	release()
	if n := <-entered; n != callers {
		t.Fatalf("the first run holds %d jobs, want all %d", n, callers)
	}
	// While the run lasts, the other callers may each find the queue
	// empty at most once (claimed between taking a slot and looking).
	time.Sleep(200 * time.Millisecond)
	if got := q.emptyLeads.Load(); got > callers {
		t.Errorf("%d leader slots taken with nothing to run while one run lasted, want at most %d", got, callers)
	}
	close(finish)
	wg.Wait()
}
