// Package migrate is the migration runner of `importctl run`: it moves a
// cohort file (package cohort) into the service over its HTTP API, with an
// API key, as a migration team's laptop or CI job would, and never touches
// the database. Per account it stages (E4), processes (E5) and imports the
// extras (E6 to E9); it waits out 429s, retries the service's failures,
// records each finished step in a journal so that a stopped run can go on,
// and writes a report of every refusal.
package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
)

// Config is one run.
type Config struct {
	// BaseURL is the service's address, e.g. https://import.example.
	BaseURL string
	// APIKey obtains the access tokens.
	APIKey string
	// Team is E5's operations_team_name (not needed with ValidateOnly).
	Team string
	// Cohort is the cohort file's path; "-" is standard input.
	Cohort string
	// ReportDir receives failures.csv, failures.ndjson and the journal.
	ReportDir string
	// Concurrency is the number of accounts in flight (default 16).
	Concurrency int
	// ValidateOnly runs E3 over the cohort and only reports.
	ValidateOnly bool
	// DryRun stages and runs E5's dry run; nothing is created, nothing
	// journaled.
	DryRun bool
	// Retries is how often a request is sent again after a 500, a
	// time-out, a refused connection or a 401 (default 8); 429s do not count.
	Retries int
	// RequestTimeout bounds one request (default 2m: E5 waits up to
	// PROCESS_WAIT_TIMEOUT for its account).
	RequestTimeout time.Duration
	// Progress receives the progress display; nil shows none.
	Progress io.Writer
	// Terminal makes the progress a live bar; else a line every
	// ProgressEvery (default 5s).
	Terminal      bool
	ProgressEvery time.Duration
	// HTTPClient is used for every request (default: one with keep-alive
	// connections for Concurrency).
	HTTPClient *http.Client
	// InitialBackoff and MaxBackoff shape the exponential backoff with
	// jitter (defaults 200ms and 10s).
	InitialBackoff, MaxBackoff time.Duration
}

// Usage errors and connection errors come back from Run as errors; the
// command exits 2 on them.

// Run migrates the cohort. It returns when every account is done, or when
// ctx is cancelled (Ctrl-C): then the requests in flight finish, no new
// one starts, and the Result says Interrupted. An error means the run could
// not start or lost the service (exit 2); the Result is still filled in
// as far as it got.
func Run(ctx context.Context, cfg Config) (Result, error) {
	start := time.Now()
	if cfg.BaseURL == "" || cfg.APIKey == "" || cfg.Cohort == "" || cfg.ReportDir == "" {
		return Result{}, &errUsage{"the service URL, the API key, the cohort and the report directory are required"}
	}
	if !cfg.ValidateOnly && cfg.Team == "" {
		return Result{}, &errUsage{"the operations team is required (E5's operations_team_name)"}
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 8
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 2 * time.Minute
	}
	if cfg.InitialBackoff <= 0 {
		cfg.InitialBackoff = 200 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	if cfg.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = cfg.Concurrency + 4
		cfg.HTTPClient = &http.Client{Transport: tr}
	}
	total, err := countLines(cfg.Cohort)
	if err != nil {
		return Result{}, &errUsage{fmt.Sprintf("cohort: %v", err)}
	}
	c := &client{base: trimSlash(cfg.BaseURL), apiKey: cfg.APIKey, hc: cfg.HTTPClient, timeout: cfg.RequestTimeout,
		maxTransient: cfg.Retries, newBackOff: func() backoff.BackOff {
			b := backoff.NewExponentialBackOff()
			b.InitialInterval, b.MaxInterval, b.RandomizationFactor = cfg.InitialBackoff, cfg.MaxBackoff, 0.5
			return b
		}}
	// The first token proves the address and the key before anything is read.
	if _, err := c.accessToken(ctx, false); err != nil {
		return Result{}, err
	}
	rep, err := openReport(cfg.ReportDir)
	if err != nil {
		return Result{}, err
	}
	var jr *journal
	if !cfg.ValidateOnly && !cfg.DryRun {
		if jr, err = openJournal(filepath.Join(cfg.ReportDir, JournalFile)); err != nil {
			rep.close()
			return Result{}, err
		}
	}
	r := &runner{cfg: cfg, c: c, rep: rep, jr: jr, stats: map[Step]*StepStats{}}
	r.steps = []Step{StepStage, StepProcess, StepNotes, StepTransactions, StepStatements, StepPaymentInstruction}
	switch {
	case cfg.ValidateOnly:
		r.steps = []Step{StepValidate}
	case cfg.DryRun:
		r.steps = []Step{StepStage, StepProcess}
	}
	for _, s := range r.steps {
		r.stats[s] = &StepStats{Step: s}
	}
	r.prog = newProgress(cfg.Progress, int64(total), cfg.Terminal, cfg.ProgressEvery)
	runErr := r.run(ctx)
	r.prog.close()

	res := r.res
	res.Interrupted = ctx.Err() != nil && runErr == nil && r.unfinished
	for _, s := range r.steps {
		res.Steps = append(res.Steps, *r.stats[s])
	}
	res.TokenRenewals = int(c.refreshes.Load())
	res.Elapsed = time.Since(start)
	res.FailureRows = rep.rows
	errs := []error{runErr, rep.close()}
	if jr != nil {
		errs = append(errs, jr.close())
	}
	return res, errors.Join(errs...)
}

type runner struct {
	cfg   Config
	c     *client
	rep   *report
	jr    *journal
	prog  *progress
	steps []Step

	mu         sync.Mutex
	stats      map[Step]*StepStats
	res        Result
	fatal      error
	unfinished bool // some account was not reached or not finished
}

// run reads the cohort and hands the accounts to the workers.
func (r *runner) run(ctx context.Context) error {
	cr, closer, err := cohort.Open(r.cfg.Cohort)
	if err != nil {
		return &errUsage{fmt.Sprintf("cohort: %v", err)}
	}
	defer closer.Close()
	// lost is cancelled when the service is lost, to stop the others.
	wctx, lost := context.WithCancel(ctx)
	defer lost()
	work := make(chan cohort.Record)
	var wg sync.WaitGroup
	for range r.cfg.Concurrency {
		wg.Go(func() {
			for rec := range work {
				r.account(wctx, rec, lost)
			}
		})
	}
	var readErr error
read:
	for {
		rec, err := cr.Next()
		if err == io.EOF {
			break
		}
		var le *cohort.LineError
		if errors.As(err, &le) {
			r.mu.Lock()
			r.res.Malformed++
			r.mu.Unlock()
			r.rep.add([]Failure{{Step: StepParse, Code: "malformed_line", Detail: le.Err.Error(), Line: le.Number}})
			r.prog.finish(false)
			continue
		}
		if err != nil {
			readErr = fmt.Errorf("cohort: %w", err)
			break
		}
		select {
		case work <- rec:
		case <-wctx.Done():
			r.mu.Lock()
			r.unfinished = true
			r.mu.Unlock()
			break read
		}
	}
	close(work)
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fatal != nil {
		return r.fatal
	}
	return readErr
}

// account makes the steps of one account.
func (r *runner) account(ctx context.Context, rec cohort.Record, lost context.CancelFunc) {
	if ctx.Err() != nil {
		r.mu.Lock()
		r.unfinished = true
		r.mu.Unlock()
		return
	}
	key := accountKey(rec.ImportSupplier, rec.ExternalAccountNumber)
	r.prog.busy.Add(1)
	defer r.prog.busy.Add(-1)
	resumed := r.jr != nil && r.jr.has(key)
	ok := true
	fresh := false // some step was sent in this run
	for _, s := range r.steps {
		if r.jr != nil && r.jr.finished(key, s) {
			continue
		}
		path, body, has := request(s, rec, r.cfg.Team, r.cfg.DryRun)
		if !has {
			continue
		}
		if ctx.Err() != nil {
			r.mu.Lock()
			r.unfinished = true
			r.mu.Unlock()
			return
		}
		fresh = true
		var n counts
		t0 := time.Now()
		a, err := r.c.do(ctx, http.MethodPost, path, body, &n)
		took := time.Since(t0)
		r.mu.Lock()
		st := r.stats[s]
		st.Retried += n.retries
		st.Waited += n.waits429
		st.Time += took
		r.mu.Unlock()
		if err != nil {
			var conn *errConnection
			var use *errUsage
			r.mu.Lock()
			r.unfinished = true
			if (errors.As(err, &conn) || errors.As(err, &use)) && r.fatal == nil {
				r.fatal = err
			}
			r.mu.Unlock()
			if r.fatal != nil {
				lost()
			}
			return
		}
		if succeeded(s, r.cfg.DryRun, a) {
			r.mu.Lock()
			st.OK++
			r.mu.Unlock()
			if r.jr != nil {
				r.jr.record(journalEntry{Line: rec.Number, Account: key, Step: s, ServiceAccountNumber: serviceNumber(s, a)})
			}
			continue
		}
		ok = false
		r.mu.Lock()
		st.Failed++
		r.mu.Unlock()
		r.rep.add(failures(s, rec, a))
		if s == StepStage || s == StepProcess {
			// Without the account, its extras can only be refused.
			break
		}
	}
	r.mu.Lock()
	if ok {
		r.res.Succeeded++
		if resumed && !fresh {
			r.res.Resumed++
		}
	} else {
		r.res.Failed++
	}
	r.res.Accounts++
	r.mu.Unlock()
	r.prog.finish(ok)
}

func serviceNumber(s Step, a answer) string {
	if s != StepProcess {
		return ""
	}
	var p problemBody
	_ = jsonUnmarshal(a.Body, &p)
	return p.ServiceAccountNumber
}

func countLines(path string) (int, error) { return cohort.Count(path) }

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
