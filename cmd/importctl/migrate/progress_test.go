package migrate

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// After a resume, the accounts the journal holds as finished pass in an
// instant; the rate and the time left are over the accounts this run moved,
// not those. They once read 2,109 accounts/s and 4 s left.
func TestProgress_RateIsOverTheAccountsThisRunMoved(t *testing.T) {
	t.Parallel()
	p := &progress{total: 10000}
	for range 9000 {
		p.finish(true, true)
	}
	for range 99 {
		p.finish(true, false)
	}
	p.finish(false, false)
	p.busy.Store(16)
	want := "progress: 9100/10000 accounts (91.0%, 9000 done by an earlier run), 1 failed, 16 in flight, " +
		"10.0 accounts/s moved by this run, 1m30s left"
	if d := cmp.Diff(want, p.line(10*time.Second)); d != "" {
		t.Errorf("progress line (-want +got):\n%s", d)
	}
	// Before this run has moved any account there is no rate to go by.
	q := &progress{total: 10}
	q.finish(true, true)
	if got := q.line(time.Second); !strings.Contains(got, "0.0 accounts/s moved by this run, ? left") {
		t.Errorf("progress line of a run that moved nothing yet: %s", got)
	}
}

// On a terminal the bar counts the accounts this run moves out of those it
// has to move: a resumed account lowers the bar's total, it does not fill it.
func TestProgress_BarCountsOnlyTheAccountsThisRunMoves(t *testing.T) {
	t.Parallel()
	p := newProgress(io.Discard, 100, true, time.Hour)
	for range 40 {
		p.finish(true, true)
	}
	p.finish(true, false)
	st := p.bar.State()
	p.close()
	if d := cmp.Diff([2]int64{1, 60}, [2]int64{st.CurrentNum, st.Max}); d != "" {
		t.Errorf("bar (current, max) (-want +got):\n%s", d)
	}
}

// The step table's time column adds up the requests that ran at once; its
// heading says so, and a line under the table says that it can exceed the
// elapsed time (E5's read 20m20s in a 2m10s run under a column named time).
func TestResult_SummaryNamesTheRequestTimeAsSummed(t *testing.T) {
	t.Parallel()
	r := Result{Accounts: 100, Succeeded: 100, Elapsed: 2*time.Minute + 10*time.Second,
		Steps: []StepStats{{Step: StepProcess, OK: 100, Time: 20*time.Minute + 20*time.Second}}}
	var b bytes.Buffer
	r.WriteSummary(&b)
	lines := strings.Split(b.String(), "\n")
	header := strings.Fields(lines[0])
	if d := cmp.Diff([]string{"step", "ok", "failed", "retried", "(429)", "request", "time", "(summed)"}, header); d != "" {
		t.Errorf("table heading (-want +got):\n%s\n%s", d, b.String())
	}
	if !strings.Contains(b.String(), "request time (summed): the step's requests, waits included, added up over the accounts in flight at once; it can exceed the elapsed time\n") {
		t.Errorf("no line says what the time column is:\n%s", b.String())
	}
}
