package reconcile

import (
	"context"
	"runtime"

	jr "github.com/bulkimport/bulkimport/jobs/reconcile"
)

// computed is a sorted cohort entry with its summary (or the service's
// refusal of the line, err).
type computed struct {
	entry
	sum  jr.Summary
	err  error
	done chan struct{}
}

// aheadPerWorker bounds the entries in flight: memory stays flat, and the
// workers never wait for the merge while the service's stream is quick.
const aheadPerWorker = 256

// computeAhead returns an iterator over the entries of next, each with its
// summary, in next's order. The summaries are computed by workers
// goroutines (default GOMAXPROCS) ahead of the caller. An error of next
// ends the iteration with it. Cancelling ctx stops the goroutines.
func computeAhead(ctx context.Context, next func() (entry, bool, error), country string, workers int) func() (computed, bool, error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	type item struct {
		c   *computed
		err error
	}
	ordered := make(chan item, workers*aheadPerWorker)
	jobs := make(chan *computed, workers*aheadPerWorker)
	for range workers {
		go func() {
			for c := range jobs {
				c.sum, c.err = expected(ctx, c.entry, country)
				close(c.done)
			}
		}()
	}
	go func() {
		defer close(ordered)
		defer close(jobs)
		for {
			e, ok, err := next()
			if err != nil {
				select {
				case ordered <- item{err: err}:
				case <-ctx.Done():
				}
				return
			}
			if !ok {
				return
			}
			c := &computed{entry: e, done: make(chan struct{})}
			select {
			case jobs <- c:
			case <-ctx.Done():
				return
			}
			select {
			case ordered <- item{c: c}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() (computed, bool, error) {
		it, ok := <-ordered
		if !ok {
			if err := ctx.Err(); err != nil {
				return computed{}, false, err
			}
			return computed{}, false, nil
		}
		if it.err != nil {
			return computed{}, false, it.err
		}
		<-it.c.done
		return *it.c, true, nil
	}
}
