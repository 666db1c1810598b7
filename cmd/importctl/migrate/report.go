package migrate

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"
)

// report writes failures.csv and failures.ndjson as failures come, one row
// per error item.
type report struct {
	mu     sync.Mutex
	csvF   *os.File
	csv    *csv.Writer
	ndF    *os.File
	nd     *json.Encoder
	rows   int
	failed map[string]bool // accounts with at least one row
}

// Report file names, in the report directory.
const (
	FailuresCSV    = "failures.csv"
	FailuresNDJSON = "failures.ndjson"
	JournalFile    = "journal.ndjson"
)

var csvHeader = []string{"external_account_number", "step", "http_status", "code", "attr", "detail", "line"}

func openReport(dir string) (*report, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	cf, err := os.Create(filepath.Join(dir, FailuresCSV))
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	nf, err := os.Create(filepath.Join(dir, FailuresNDJSON))
	if err != nil {
		cf.Close()
		return nil, fmt.Errorf("report: %w", err)
	}
	r := &report{csvF: cf, csv: csv.NewWriter(cf), ndF: nf, nd: json.NewEncoder(nf), failed: map[string]bool{}}
	r.nd.SetEscapeHTML(false)
	r.csv.Write(csvHeader)
	return r, nil
}

func (r *report) add(fs []Failure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range fs {
		r.csv.Write([]string{f.ExternalAccountNumber, string(f.Step), strconv.Itoa(f.HTTPStatus), f.Code, f.Attr, f.Detail, strconv.Itoa(f.Line)})
		r.nd.Encode(f)
		r.rows++
	}
	r.csv.Flush()
}

func (r *report) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.csv.Flush()
	err := r.csv.Error()
	for _, f := range []*os.File{r.csvF, r.ndF} {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// RequestTimeColumn heads the summary table's column of StepStats.Time.
const RequestTimeColumn = "request time (summed)"

// StepStats is one row of the summary table.
type StepStats struct {
	Step    Step
	OK      int
	Failed  int
	Retried int // requests sent again (429, 5xx, time-outs, refused connections, 401)
	Waited  int // of which after a 429
	// Time is the time spent in the step's requests, waits included,
	// summed over the accounts (so it can exceed the run's duration).
	Time time.Duration
}

// Result is what a run did.
type Result struct {
	// Accounts is the number of accounts (well-formed lines) this run
	// took to their end, succeeded or failed.
	Accounts int
	// Malformed is the number of lines that could not be read.
	Malformed int
	// Succeeded counts the accounts whose every step is done, Failed those
	// with a refused step; an account finished by an earlier run (per the
	// journal) is in Succeeded and in Resumed.
	Succeeded, Failed, Resumed int
	// Interrupted is set when the run stopped before the cohort's end
	// (Ctrl-C); the accounts it did not reach are in none of the counts.
	Interrupted bool
	Steps       []StepStats
	// TokenRenewals counts the access tokens obtained after the first.
	TokenRenewals int
	Elapsed       time.Duration
	// FailureRows is the number of rows in the failure report.
	FailureRows int
}

// ExitCode is 0 when every account succeeded, else 1.
func (r Result) ExitCode() int {
	if r.Failed > 0 || r.Malformed > 0 || r.Interrupted {
		return 1
	}
	return 0
}

// WriteSummary prints the table per step and the totals.
func (r Result) WriteSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	// The time column adds up requests that ran side by side (up to
	// --concurrency at once), so E5's can read 20m in a run of 2m; its
	// heading says so, and the line under the table says why.
	fmt.Fprintln(tw, "step\tok\tfailed\tretried\t(429)\t"+RequestTimeColumn+"\t")
	for _, s := range r.Steps {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t\n", s.Step, s.OK, s.Failed, s.Retried, s.Waited, s.Time.Round(time.Millisecond))
	}
	tw.Flush()
	if len(r.Steps) > 0 {
		fmt.Fprintln(w, RequestTimeColumn+": the step's requests, waits included, added up over the accounts in flight at once; it can exceed the elapsed time")
	}
	// The rate is of the accounts this run moved: those an earlier run
	// finished took none of its time. A resumed run says so, so that its
	// figure is not read as the cohort's.
	moved := r.Succeeded + r.Failed - r.Resumed
	rate := 0.0
	if r.Elapsed > 0 {
		rate = float64(moved) / r.Elapsed.Seconds()
	}
	fmt.Fprintf(w, "accounts: %d read, %d succeeded (%d by an earlier run), %d failed, %d malformed lines; %d failure rows\n",
		r.Accounts, r.Succeeded, r.Resumed, r.Failed, r.Malformed, r.FailureRows)
	fmt.Fprintf(w, "elapsed %s, %.1f accounts/s", r.Elapsed.Round(time.Millisecond), rate)
	if r.Resumed > 0 {
		fmt.Fprintf(w, " over the %d accounts this run moved (%d were done by an earlier run)", moved, r.Resumed)
	}
	fmt.Fprintf(w, ", %d token renewals", r.TokenRenewals)
	if r.Interrupted {
		fmt.Fprint(w, "; interrupted: run the same command again to go on")
	}
	fmt.Fprintln(w)
}
