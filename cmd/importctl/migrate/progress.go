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
type progress struct {
	total              int64
	done, failed, busy atomic.Int64
	start              time.Time

	bar  *progressbar.ProgressBar
	w    io.Writer
	stop chan struct{}
	wg   sync.WaitGroup
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

// finish records an account's end.
func (p *progress) finish(ok bool) {
	p.done.Add(1)
	if !ok {
		p.failed.Add(1)
	}
	if p.bar != nil {
		p.bar.Add(1)
	}
}

func (p *progress) show() {
	done, failed, busy := p.done.Load(), p.failed.Load(), p.busy.Load()
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("%d failed, %d in flight", failed, busy))
		return
	}
	el := time.Since(p.start)
	rate := float64(done) / el.Seconds()
	left := "?"
	if rate > 0 {
		left = (time.Duration(float64(p.total-done)/rate) * time.Second).Round(time.Second).String()
	}
	pct := 0.0
	if p.total > 0 {
		pct = 100 * float64(done) / float64(p.total)
	}
	fmt.Fprintf(p.w, "progress: %d/%d accounts (%.1f%%), %d failed, %d in flight, %.1f accounts/s, %s left\n",
		done, p.total, pct, failed, busy, rate, left)
}

func (p *progress) close() {
	close(p.stop)
	p.wg.Wait()
	if p.bar != nil {
		p.bar.Exit()
		fmt.Fprintln(p.w)
	}
}
