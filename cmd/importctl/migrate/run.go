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
	"strings"
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
	if err := cfg.check(); err != nil {
		return Result{}, err
	}
	total, err := cohort.Count(cfg.Cohort)
	if err != nil {
		return Result{}, &errUsage{fmt.Sprintf("cohort: %v", err)}
	}
	c := newClient(cfg)
	// The first token proves the address and the key before anything is
	// written.
	if _, err := c.accessToken(ctx, false); err != nil {
		return Result{}, err
	}
	r, err := newRunner(cfg, c)
	if err != nil {
		return Result{}, err
	}
	r.prog = newProgress(cfg.Progress, int64(total), cfg.Terminal, cfg.ProgressEvery)
	runErr := r.run(ctx)
	r.prog.close()
	res := r.result(ctx.Err() != nil && runErr == nil)
	res.Elapsed = time.Since(start)
	return res, errors.Join(runErr, r.close())
}

// check refuses an incomplete Config and fills in the defaults.
func (cfg *Config) check() error {
	if cfg.BaseURL == "" || cfg.APIKey == "" || cfg.Cohort == "" || cfg.ReportDir == "" {
		return &errUsage{"the service URL, the API key, the cohort and the report directory are required"}
	}
	if !cfg.ValidateOnly && cfg.Team == "" {
		return &errUsage{"the operations team is required (E5's operations_team_name)"}
	}
	if cfg.ValidateOnly && cfg.DryRun {
		return &errUsage{"validate-only and dry-run exclude each other"}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 8
	}
	def(&cfg.RequestTimeout, 2*time.Minute)
	def(&cfg.InitialBackoff, 200*time.Millisecond)
	def(&cfg.MaxBackoff, 10*time.Second)
	if cfg.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = cfg.Concurrency + 4
		cfg.HTTPClient = &http.Client{Transport: tr}
	}
	return nil
}

func newClient(cfg Config) *client {
	hc := *cfg.HTTPClient // a copy: the caller's client keeps its own redirect policy
	hc.CheckRedirect = refuseRedirects
	return &client{base: strings.TrimRight(cfg.BaseURL, "/"), apiKey: cfg.APIKey, hc: &hc,
		timeout: cfg.RequestTimeout, maxTransient: cfg.Retries, newBackOff: func() backoff.BackOff {
			b := backoff.NewExponentialBackOff()
			b.InitialInterval, b.MaxInterval, b.RandomizationFactor = cfg.InitialBackoff, cfg.MaxBackoff, 0.5
			return b
		}}
}

// newRunner opens the report and, for a real run, the journal.
func newRunner(cfg Config, c *client) (*runner, error) {
	rep, err := openReport(cfg.ReportDir)
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, c: c, rep: rep, stats: map[Step]*StepStats{}}
	switch {
	case cfg.ValidateOnly:
		r.steps = []Step{StepValidate}
	case cfg.DryRun:
		r.steps = []Step{StepStage, StepProcess}
	default:
		r.steps = []Step{StepStage, StepProcess, StepNotes, StepTransactions, StepStatements, StepPaymentInstruction}
		if r.jr, err = openJournal(filepath.Join(cfg.ReportDir, JournalFile)); err != nil {
			rep.close()
			return nil, err
		}
	}
	for _, s := range r.steps {
		r.stats[s] = &StepStats{Step: s}
	}
	return r, nil
}

// result is the Result so far; stopped says the run's context ended.
func (r *runner) result(stopped bool) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.res
	res.Interrupted = stopped && r.unfinished
	for _, s := range r.steps {
		res.Steps = append(res.Steps, *r.stats[s])
	}
	res.TokenRenewals = int(r.c.refreshes.Load())
	res.FailureRows = r.rep.rows
	return res
}

func (r *runner) close() error {
	err := r.rep.close()
	if r.jr != nil {
		err = errors.Join(err, r.jr.close())
	}
	return err
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
			r.prog.finish(false, false)
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
	key := accountKey(rec.ImportSupplier, rec.ExternalAccountNumber)
	r.prog.busy.Add(1)
	defer r.prog.busy.Add(-1)
	ok, fresh := true, false // fresh: some step was sent in this run
	for _, s := range r.steps {
		if r.jr != nil && r.jr.finished(key, s) {
			continue
		}
		path, body, has := request(s, rec, r.cfg.Team, r.cfg.DryRun)
		if !has {
			continue
		}
		if ctx.Err() != nil {
			r.stopped(nil, lost)
			return
		}
		fresh = true
		done, err := r.step(ctx, s, rec, key, path, body)
		if err != nil {
			r.stopped(err, lost)
			return
		}
		if !done {
			ok = false
			if s == StepStage || s == StepProcess {
				// Without the account, its extras can only be refused.
				break
			}
		}
	}
	resumed := false
	r.mu.Lock()
	r.res.Accounts++
	switch {
	case !ok:
		r.res.Failed++
	case r.jr != nil && !fresh && r.jr.has(key):
		r.res.Succeeded++
		r.res.Resumed++
		resumed = true
	default:
		r.res.Succeeded++
	}
	r.mu.Unlock()
	r.prog.finish(ok, resumed)
}

// step sends one step's request and records its outcome: in the journal
// when done, in the report when refused. An error means the step has no
// outcome (the run was stopped, or the service is lost).
func (r *runner) step(ctx context.Context, s Step, rec cohort.Record, key, path string, body []byte) (bool, error) {
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
		return false, err
	}
	done := succeeded(s, r.cfg.DryRun, a)
	r.mu.Lock()
	if done {
		st.OK++
	} else {
		st.Failed++
	}
	r.mu.Unlock()
	if !done {
		r.rep.add(failures(s, rec, a))
	} else if r.jr != nil {
		r.jr.record(journalEntry{Line: rec.Number, Account: key, Step: s, ServiceAccountNumber: serviceNumber(s, a)})
	}
	return done, nil
}

// stopped notes an account left unfinished; an error that loses the
// service (or the key) stops the whole run.
func (r *runner) stopped(err error, lost context.CancelFunc) {
	var conn *errConnection
	var use *errUsage
	fatal := errors.As(err, &conn) || errors.As(err, &use)
	r.mu.Lock()
	r.unfinished = true
	if fatal && r.fatal == nil {
		r.fatal = err
	}
	r.mu.Unlock()
	if fatal {
		lost()
	}
}

func serviceNumber(s Step, a answer) string {
	if s != StepProcess {
		return ""
	}
	var p problemBody
	_ = json.Unmarshal(a.Body, &p)
	return p.ServiceAccountNumber
}
