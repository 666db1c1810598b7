package migrate

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows how far the run is: a live bar on a terminal, else a line
// every few seconds (CI logs, `| tee`).
//
// Its rate and time left are over the accounts this run moves. A resumed
// run passes the accounts its journal holds as finished in an instant; counted
// as done, they once made the first line of a resume read 2,109 accounts/s
// and 4 s left for a run of minutes.
type progress struct {
	total              int64
	done, failed, busy atomic.Int64
	// resumed are the accounts of done that an earlier run finished.
	resumed atomic.Int64
	start   time.Time

	// barMu orders the changes of the bar's maximum (finish).
	barMu sync.Mutex
	bar   *progressbar.ProgressBar
	w     io.Writer
	stop  chan struct{}
	wg    sync.WaitGroup
}

func newProgress(w io.Writer, total int64, terminal bool, every time.Duration) *progress {
	p := &progress{total: total, start: time.Now(), w: w, stop: make(chan struct{})}
	if w == nil {
		return p
	}
	if terminal {
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("accounts"),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("accounts"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionSetWidth(30),
		)
	}
	if every <= 0 {
		every = 5 * time.Second
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(every)
		if p.bar != nil {
			t.Reset(500 * time.Millisecond)
		}
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.show()
			}
		}
	}()
	return p
}

// finish records an account's end; resumed says an earlier run finished
// it (the journal holds all its steps), so this run spent no time on it.
func (p *progress) finish(ok, resumed bool) {
	p.done.Add(1)
	if !ok {
		p.failed.Add(1)
	}
	if resumed {
		p.resumed.Add(1)
	}
	if p.bar == nil {
		return
	}
	p.barMu.Lock()
	defer p.barMu.Unlock()
	if resumed {
		// The bar counts the accounts this run moves, out of those left
		// to move, so that its rate and time left are this run's.
		p.bar.ChangeMax64(p.bar.GetMax64() - 1)
		return
	}
	p.bar.Add(1)
}

func (p *progress) show() {
	if p.bar != nil {
		p.bar.Describe(p.line(0))
		return
	}
	fmt.Fprintln(p.w, p.line(time.Since(p.start)))
}

// line is the progress line after el, or the bar's description on a
// terminal. The rate is of the accounts this run moved; the time left is
// the accounts not yet done at that rate.
func (p *progress) line(el time.Duration) string {
	done, failed, busy, resumed := p.done.Load(), p.failed.Load(), p.busy.Load(), p.resumed.Load()
	earlier := ""
	if resumed > 0 {
		earlier = fmt.Sprintf(", %d done by an earlier run", resumed)
	}
	if p.bar != nil {
		return fmt.Sprintf("%d failed, %d in flight%s", failed, busy, earlier)
	}
	moved := done - resumed
	rate := 0.0
	if el > 0 {
		rate = float64(moved) / el.Seconds()
	}
	left := "?"
	if rate > 0 {
		left = time.Duration(float64(p.total-done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	pct := 0.0
	if p.total > 0 {
		pct = 100 * float64(done) / float64(p.total)
	}
	return fmt.Sprintf("progress: %d/%d accounts (%.1f%%%s), %d failed, %d in flight, %.1f accounts/s moved by this run, %s left",
		done, p.total, pct, earlier, failed, busy, rate, left)
}

func (p *progress) close() {
	close(p.stop)
	p.wg.Wait()
	if p.bar != nil {
		p.bar.Exit()
		fmt.Fprintln(p.w)
	}
}
