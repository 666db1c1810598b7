// Package reconcile is importctl reconcile: it proves that a cohort arrived
// whole. It computes each cohort line's summary with the service's own code
// (jobs/reconcile.FromCohortLine), reads the service's summaries of the
// supplier's accounts over HTTP (the reconciliation endpoint), merges the
// two streams by external account number and writes what differs; for an
// account whose digest differs it reads the account's detail and names the
// values that differ, at their paths (detail.go). Both
// streams are in byte order of the account numbers: the service's is, and
// the cohort is sorted here with bounded memory (sort.go), so memory does
// not grow with the cohort.
package reconcile

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shopspring/decimal"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
	"github.com/bulkimport/bulkimport/cmd/importctl/migrate"
	jr "github.com/bulkimport/bulkimport/jobs/reconcile"
)

// Config says what to reconcile.
type Config struct {
	// Cohort is the cohort file (plain or gzip; "-" is standard input).
	Cohort string
	// BaseURL and APIKey reach the service, as for importctl run.
	BaseURL, APIKey string
	// ReportDir receives the report files (Report* names).
	ReportDir string
	// Failures, when set, is the failure report of the run that imported
	// the cohort (its failures.ndjson, or the run's report directory): the
	// accounts it refused count as expected to be missing.
	Failures string
	// TempDir holds the sorted runs of a cohort too large for one; default
	// os.TempDir().
	TempDir string
	// ChunkBytes bounds the cohort held in memory while sorting (default
	// 64 MiB); a larger cohort is sorted in runs on disk.
	ChunkBytes int
	// Retries is how often a request or a broken stream is tried again
	// (default 8).
	Retries int
	// HTTPClient makes the requests (default: http.DefaultClient's
	// transport without an overall time-out: the stream is long).
	HTTPClient *http.Client
	// Backoff is the first wait before a retry, doubled each time
	// (default 500ms).
	Backoff time.Duration
	// Workers compute the cohort's summaries (default GOMAXPROCS).
	Workers int
	// Scope says which accounts are judged: ScopeCohort (the default) the
	// cohort's; ScopeSupplier also every other account of the supplier,
	// which then makes the exit code 1 as extra.
	Scope string
	// DrillDown is how many accounts whose digest differs are read in full
	// to name the values that differ (differences.csv); zero means
	// DefaultDrillDown, a negative number none.
	DrillDown int
}

// The scopes of a reconciliation (Config.Scope).
const (
	// ScopeCohort judges the cohort's accounts: an account of the supplier
	// that the cohort lacks (another cohort's, one imported by hand) is
	// listed in extra.csv but does not make the cohort incomplete.
	ScopeCohort = "cohort"
	// ScopeSupplier judges the supplier's accounts: one the cohort lacks is
	// a difference too. For the last cohort of a supplier, or its only one.
	ScopeSupplier = "supplier"
)

// Report file names, in the report directory.
const (
	MismatchesCSV    = "mismatches.csv"
	MismatchesNDJSON = "mismatches.ndjson"
	MissingCSV       = "missing.csv"
	MissingNDJSON    = "missing.ndjson"
	ExtraCSV         = "extra.csv"
	ExtraNDJSON      = "extra.ndjson"
	DifferencesCSV   = "differences.csv"
	DiffNDJSON       = "differences.ndjson"
	SummaryFile      = "summary.txt"
)

// Mismatch is one field of one account that differs, a row of
// mismatches.csv. Field is a jobs/reconcile.Fields name, or cohort_line for
// a line the service's parsers refuse (Expected says why) and
// duplicate_line for a second line of the same account.
type Mismatch struct {
	ExternalAccountNumber string `json:"external_account_number"`
	Field                 string `json:"field"`
	Expected              string `json:"expected"`
	Found                 string `json:"found"`
	Line                  int    `json:"line"`
}

// Missing is an account of the cohort that the service does not have.
// RefusedByRunner is set when the run's failure report refused it (then
// Step and Code say where and why), which makes it expected.
type Missing struct {
	ExternalAccountNumber string `json:"external_account_number"`
	Line                  int    `json:"line"`
	RefusedByRunner       bool   `json:"refused_by_runner"`
	Step                  string `json:"step,omitempty"`
	Code                  string `json:"code,omitempty"`
}

// Extra is an account of the service that the cohort does not have.
type Extra struct {
	ExternalAccountNumber string `json:"external_account_number"`
	ServiceAccountNumber  string `json:"service_account_number"`
}

// Totals are one side's column of the summary table.
type Totals struct {
	Accounts, Customers, SupplyPoints, Meters, Notes, Transactions, Statements, PaymentInstructions int
	TransactionsSum, LedgerBalance                                                                  decimal.Decimal
}

func (t *Totals) add(s jr.Summary) {
	t.Accounts++
	t.Customers += s.Customers
	t.SupplyPoints += s.SupplyPoints
	t.Meters += s.Meters
	t.Notes += s.Notes
	t.Transactions += s.Transactions
	t.Statements += s.Statements
	t.PaymentInstructions += s.PaymentInstructions
	t.TransactionsSum = t.TransactionsSum.Add(decimal.RequireFromString(orZero(s.TransactionsSum)))
	t.LedgerBalance = t.LedgerBalance.Add(decimal.RequireFromString(orZero(s.LedgerBalance)))
}

func orZero(s string) string {
	if _, err := decimal.NewFromString(s); err != nil {
		return "0"
	}
	return s
}

// Result is what a reconciliation found.
type Result struct {
	Supplier string
	// Scope is the Config's (ScopeCohort or ScopeSupplier); ReportDir the
	// directory of the report files.
	Scope, ReportDir string
	// Cohort counts the cohort's accounts whose summary could be computed
	// (every line but the malformed and the refused by the parsers);
	// Service the service's accounts.
	Cohort, Service Totals
	// Matched accounts are in both with equal summaries; Mismatched in
	// both with at least one difference (MismatchRows rows).
	Matched, Mismatched, MismatchRows int
	// Missing counts the cohort's accounts the service lacks, of which
	// ExpectedMissing were refused by the runner (--failures).
	Missing, ExpectedMissing int
	// WithFailures is whether the run's failure report was read.
	WithFailures bool
	// Extra counts the service's accounts the cohort lacks.
	Extra int
	// DrilledDown counts the mismatched accounts whose detail was read and
	// compared, DifferenceRows the rows of differences.csv they gave;
	// NotDrilledDown the accounts whose digest differs beyond
	// Config.DrillDown.
	DrilledDown, DifferenceRows, NotDrilledDown int
	// Malformed lines could not be read; Invalid lines were read but the
	// service's parsers refuse them; Duplicates are further lines of an
	// account already seen.
	Malformed, Invalid, Duplicates int
	// Sorting is the time the cohort's sort took, Elapsed the whole
	// reconciliation's.
	Sorting, Elapsed time.Duration
}

// ExitCode is 0 when everything in scope matches, else 1.
func (r Result) ExitCode() int {
	if r.Mismatched > 0 || r.Missing > r.ExpectedMissing || r.judgesExtra() && r.Extra > 0 || r.Malformed > 0 || r.Duplicates > 0 {
		return 1
	}
	return 0
}

// judgesExtra is whether an account the cohort lacks is a difference.
func (r Result) judgesExtra() bool { return r.Scope == ScopeSupplier }

// WriteSummary prints the summary table and the counts.
func (r Result) WriteSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tcohort\tservice\t")
	row := func(name string, c, s any) { fmt.Fprintf(tw, "%s\t%v\t%v\t\n", name, c, s) }
	row("accounts", r.Cohort.Accounts, r.Service.Accounts)
	row("customers", r.Cohort.Customers, r.Service.Customers)
	row("supply points", r.Cohort.SupplyPoints, r.Service.SupplyPoints)
	row("meters", r.Cohort.Meters, r.Service.Meters)
	row("notes", r.Cohort.Notes, r.Service.Notes)
	row("transactions", r.Cohort.Transactions, r.Service.Transactions)
	row("statements", r.Cohort.Statements, r.Service.Statements)
	row("payment instructions", r.Cohort.PaymentInstructions, r.Service.PaymentInstructions)
	row("transactions sum", r.Cohort.TransactionsSum.StringFixed(2), r.Service.TransactionsSum.StringFixed(2))
	row("ledger balances", r.Cohort.LedgerBalance.StringFixed(2), r.Service.LedgerBalance.StringFixed(2))
	tw.Flush()
	fmt.Fprintf(w, "supplier %s: %d matched, %d mismatched (%d rows), %d missing (%d refused by the run), %d extra, %d malformed lines, %d lines the service's parsers refuse, %d duplicate lines\n",
		r.Supplier, r.Matched, r.Mismatched, r.MismatchRows, r.Missing, r.ExpectedMissing, r.Extra, r.Malformed, r.Invalid,
		r.Duplicates)
	fmt.Fprintf(w, "elapsed %s, of which sorting the cohort %s\n", r.Elapsed.Round(time.Millisecond), r.Sorting.Round(time.Millisecond))
	r.writeVerdict(w)
}

// writeVerdict ends the summary: whether the cohort arrived whole, in which
// scope, then every report file that has rows, with their count and what
// they mean, the accounts the run refused (expected) apart from the others.
func (r Result) writeVerdict(w io.Writer) {
	scope := "the cohort's accounts"
	if r.judgesExtra() {
		scope = "every account of supplier " + r.Supplier
	}
	if r.ExitCode() == 0 {
		fmt.Fprintf(w, "verdict: the cohort arrived whole (scope: %s)\n", scope)
	} else {
		fmt.Fprintf(w, "verdict: the cohort did NOT arrive whole (scope: %s)\n", scope)
	}
	file := func(name string) string {
		if r.ReportDir == "" {
			return name
		}
		return filepath.Join(r.ReportDir, name)
	}
	var lines []string
	if rows := r.MismatchRows + r.Malformed + r.Duplicates; rows > 0 {
		var parts []string
		if r.Mismatched > 0 {
			parts = append(parts, plural(r.Mismatched, "account", "accounts")+" in the service differ from their lines")
		}
		if r.Malformed > 0 {
			parts = append(parts, plural(r.Malformed, "line", "lines")+" could not be read")
		}
		if r.Duplicates > 0 {
			parts = append(parts, plural(r.Duplicates, "line repeats", "lines repeat")+" an account")
		}
		lines = append(lines, fmt.Sprintf("%s: %s: %s (unexpected)", file(MismatchesCSV), plural(rows, "row", "rows"), strings.Join(parts, ", ")))
	}
	if r.DifferenceRows > 0 || r.NotDrilledDown > 0 {
		l := fmt.Sprintf("%s: %s: the values that differ in %s whose content differs", file(DifferencesCSV),
			plural(r.DifferenceRows, "row", "rows"), plural(r.DrilledDown, "account", "accounts"))
		if r.NotDrilledDown > 0 {
			l += fmt.Sprintf("; %s more not read (--drill-down)", plural(r.NotDrilledDown, "account", "accounts"))
		}
		lines = append(lines, l)
	}
	if r.Missing > 0 {
		unexpected := r.Missing - r.ExpectedMissing
		var parts []string
		if r.ExpectedMissing > 0 {
			parts = append(parts, fmt.Sprintf("%d refused by the run, as its failure report lists (expected)", r.ExpectedMissing))
		}
		if unexpected > 0 {
			why := "not refused by the run"
			if !r.WithFailures {
				why = "no failure report given (--failures), so none is known to be refused by the run"
			}
			parts = append(parts, fmt.Sprintf("%d %s (unexpected)", unexpected, why))
		}
		lines = append(lines, fmt.Sprintf("%s: %s of the cohort the service lacks: %s", file(MissingCSV),
			plural(r.Missing, "account", "accounts"), strings.Join(parts, "; ")))
	}
	if r.Extra > 0 {
		judged := "outside the scope, not judged; --scope supplier judges it"
		if r.judgesExtra() {
			judged = "unexpected"
		}
		lines = append(lines, fmt.Sprintf("%s: %s of supplier %s that the cohort lacks (%s)", file(ExtraCSV),
			plural(r.Extra, "account", "accounts"), r.Supplier, judged))
	}
	if len(lines) == 0 {
		lines = append(lines, "no report file has rows; "+file(SummaryFile)+" holds this summary")
	}
	for _, l := range lines {
		fmt.Fprintln(w, "  "+l)
	}
}

// plural is n with the singular or plural of a noun.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// ErrUsage marks an error of the command line or the input: exit 2.
var ErrUsage = errors.New("usage")

// Run reconciles the cohort with the service. An error means it could not
// finish (the service out of reach, an unreadable cohort): exit 2; the
// Result is then partial.
func Run(ctx context.Context, cfg Config) (Result, error) {
	start := time.Now()
	var res Result
	if cfg.Cohort == "" || cfg.ReportDir == "" {
		return res, fmt.Errorf("%w: the cohort and the report directory are required", ErrUsage)
	}
	if cfg.ChunkBytes <= 0 {
		cfg.ChunkBytes = 64 << 20
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 8
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 500 * time.Millisecond
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: http.DefaultTransport}
	}
	switch cfg.Scope {
	case "":
		cfg.Scope = ScopeCohort
	case ScopeCohort, ScopeSupplier:
	default:
		return res, fmt.Errorf("%w: the scope is %s or %s, not %q", ErrUsage, ScopeCohort, ScopeSupplier, cfg.Scope)
	}
	if cfg.DrillDown == 0 {
		cfg.DrillDown = DefaultDrillDown
	}
	res.Scope, res.ReportDir, res.WithFailures = cfg.Scope, cfg.ReportDir, cfg.Failures != ""
	tokens, err := migrate.NewTokens(migrate.Config{BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, HTTPClient: cfg.HTTPClient,
		Retries: cfg.Retries, InitialBackoff: cfg.Backoff})
	if err != nil {
		return res, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	// The first token proves the address and the key before anything is
	// written.
	if _, err := tokens.Token(ctx, false); err != nil {
		return res, err
	}
	refused, err := readFailures(cfg.Failures)
	if err != nil {
		return res, fmt.Errorf("%w: --failures: %v", ErrUsage, err)
	}
	rep, err := openReport(cfg.ReportDir)
	if err != nil {
		return res, err
	}
	defer rep.close()

	srt, err := sortCohort(cfg.Cohort, cfg.TempDir, cfg.ChunkBytes, func(le *cohort.LineError) {
		res.Malformed++
		rep.mismatch(Mismatch{Field: "cohort_line", Expected: le.Err.Error(), Line: le.Number})
	})
	if err != nil {
		if errors.Is(err, errOtherSupplier) {
			err = fmt.Errorf("%w: %v", ErrUsage, err)
		}
		return res, err
	}
	defer srt.close()
	res.Sorting = time.Since(start)
	res.Supplier = srt.supplier
	if res.Supplier == "" {
		res.Elapsed = time.Since(start)
		return res, rep.finish(res)
	}
	entries, err := srt.iterator()
	if err != nil {
		return res, err
	}
	svc := &remote{base: strings.TrimRight(cfg.BaseURL, "/"), supplier: res.Supplier, tokens: tokens,
		hc: cfg.HTTPClient, retries: cfg.Retries, backoff: cfg.Backoff}
	defer svc.close()
	if err := svc.open(ctx); err != nil {
		return res, err
	}
	// The cohort's summaries are computed ahead of the merge, on every
	// core, in the sorted order; the service's stream needs the country its
	// first answer gives.
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	next := computeAhead(pctx, entries, svc.country, cfg.Workers)

	e, eok, err := next()
	if err != nil {
		return res, err
	}
	s, sok, err := svc.next(ctx)
	if err != nil {
		return res, err
	}
	lastExt, seen := "", false
	for eok || sok {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		c := 0
		switch {
		case !sok:
			c = -1
		case !eok:
			c = 1
		default:
			c = strings.Compare(e.ext, s.ExternalAccountNumber)
		}
		if c <= 0 && seen && e.ext == lastExt {
			res.Duplicates++
			rep.mismatch(Mismatch{ExternalAccountNumber: e.ext, Field: "duplicate_line", Expected: "one line per account",
				Found: "another line of this account", Line: e.num})
			if e, eok, err = next(); err != nil {
				return res, err
			}
			continue
		}
		if c > 0 {
			res.Service.add(s)
			res.Extra++
			rep.extra(Extra{ExternalAccountNumber: s.ExternalAccountNumber, ServiceAccountNumber: s.ServiceAccountNumber})
			if s, sok, err = svc.next(ctx); err != nil {
				return res, err
			}
			continue
		}
		lastExt, seen = e.ext, true
		exp, perr := e.sum, e.err
		if perr == nil {
			res.Cohort.add(exp)
		}
		if c < 0 {
			m := Missing{ExternalAccountNumber: e.ext, Line: e.num}
			if f, ok := refused[e.ext]; ok {
				m.RefusedByRunner, m.Step, m.Code = true, f.Step, f.Code
				res.ExpectedMissing++
			}
			if perr != nil {
				res.Invalid++
				if m.Code == "" {
					m.Code = perr.Error()
				}
			}
			res.Missing++
			rep.missing(m)
		} else {
			res.Service.add(s)
			diffs := jr.Compare(exp, s)
			if perr != nil {
				res.Invalid++
				diffs = []jr.Difference{{Field: "cohort_line", Expected: perr.Error(), Found: "imported as " + s.ServiceAccountNumber}}
			}
			if len(diffs) == 0 {
				res.Matched++
			} else {
				res.Mismatched++
				digest := false
				for _, d := range diffs {
					res.MismatchRows++
					rep.mismatch(Mismatch{ExternalAccountNumber: e.ext, Field: d.Field, Expected: d.Expected, Found: d.Found, Line: e.num})
					digest = digest || d.Field == "digest"
				}
				// The digest says that the content differs; the account's
				// detail says what. Read inline, in the merge's order, so
				// that memory does not grow with the mismatches.
				switch {
				case !digest:
				case res.DrilledDown >= cfg.DrillDown:
					res.NotDrilledDown++
				default:
					pds, err := svc.drillDown(ctx, e.entry)
					if err != nil {
						return res, err
					}
					res.DrilledDown++
					for _, pd := range pds {
						res.DifferenceRows++
						rep.difference(Difference{ExternalAccountNumber: e.ext, Path: pd.Path, Cohort: pd.Cohort, Service: pd.Service, Line: e.num})
					}
				}
			}
			if s, sok, err = svc.next(ctx); err != nil {
				return res, err
			}
		}
		if e, eok, err = next(); err != nil {
			return res, err
		}
	}
	res.Elapsed = time.Since(start)
	return res, rep.finish(res)
}

// expected is the summary of a cohort entry, computed by the service's code.
func expected(ctx context.Context, e entry, country string) (jr.Summary, error) {
	rec, err := cohort.Parse(e.line)
	if err != nil {
		return jr.Summary{}, err
	}
	return jr.FromCohortLine(ctx, jr.Line{Account: rec.Account, Notes: rec.Notes, Transactions: rec.Transactions,
		Statements: rec.Statements, PaymentInstruction: rec.PaymentInstruction}, country)
}

// refusal is where the runner refused an account.
type refusal struct{ Step, Code string }

// accountSteps are the runner's steps whose refusal leaves the account
// uncreated (migrate.Step values).
var accountSteps = map[migrate.Step]bool{migrate.StepValidate: true, migrate.StepStage: true,
	migrate.StepProcess: true, migrate.StepParse: true}

// readFailures reads the accounts a run refused before they were created
// from its failures.ndjson (path, or the directory holding it).
func readFailures(path string) (map[string]refusal, error) {
	out := map[string]refusal{}
	if path == "" {
		return out, nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, migrate.FailuresNDJSON)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var fl migrate.Failure
		if err := json.Unmarshal(sc.Bytes(), &fl); err != nil {
			return nil, fmt.Errorf("%s line %d: %v", path, n, err)
		}
		if accountSteps[fl.Step] && fl.ExternalAccountNumber != "" {
			if _, ok := out[fl.ExternalAccountNumber]; !ok {
				out[fl.ExternalAccountNumber] = refusal{Step: string(fl.Step), Code: fl.Code}
			}
		}
	}
	return out, sc.Err()
}

// report writes the report files as the merge goes.
type report struct {
	dir   string
	files []*os.File
	csvs  []*csv.Writer
	nds   []*json.Encoder
	err   error
}

func openReport(dir string) (*report, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	r := &report{dir: dir}
	headers := [][]string{
		{"external_account_number", "field", "expected", "found", "line"},
		{"external_account_number", "line", "refused_by_runner", "step", "code"},
		{"external_account_number", "service_account_number"},
		{"external_account_number", "path", "cohort", "service", "line"},
	}
	for i, names := range [][2]string{{MismatchesCSV, MismatchesNDJSON}, {MissingCSV, MissingNDJSON}, {ExtraCSV, ExtraNDJSON},
		{DifferencesCSV, DiffNDJSON}} {
		cf, err := os.Create(filepath.Join(dir, names[0]))
		if err != nil {
			r.close()
			return nil, fmt.Errorf("report: %w", err)
		}
		nf, err := os.Create(filepath.Join(dir, names[1]))
		if err != nil {
			cf.Close()
			r.close()
			return nil, fmt.Errorf("report: %w", err)
		}
		r.files = append(r.files, cf, nf)
		cw := csv.NewWriter(cf)
		cw.Write(headers[i])
		enc := json.NewEncoder(&flushless{nf})
		enc.SetEscapeHTML(false)
		r.csvs, r.nds = append(r.csvs, cw), append(r.nds, enc)
	}
	return r, nil
}

// flushless is an *os.File behind a writer type, so that the encoders'
// writes go straight to the file (one write per row).
type flushless struct{ f *os.File }

func (w *flushless) Write(p []byte) (int, error) { return w.f.Write(p) }

func (r *report) row(i int, cells []string, v any) {
	if err := r.csvs[i].Write(cells); err != nil && r.err == nil {
		r.err = err
	}
	if err := r.nds[i].Encode(v); err != nil && r.err == nil {
		r.err = err
	}
}

func (r *report) mismatch(m Mismatch) {
	r.row(0, []string{m.ExternalAccountNumber, m.Field, m.Expected, m.Found, strconv.Itoa(m.Line)}, m)
}

func (r *report) missing(m Missing) {
	r.row(1, []string{m.ExternalAccountNumber, strconv.Itoa(m.Line), strconv.FormatBool(m.RefusedByRunner), m.Step, m.Code}, m)
}

func (r *report) extra(x Extra) {
	r.row(2, []string{x.ExternalAccountNumber, x.ServiceAccountNumber}, x)
}

func (r *report) difference(d Difference) {
	r.row(3, []string{d.ExternalAccountNumber, d.Path, cell(d.Cohort), cell(d.Service), strconv.Itoa(d.Line)}, d)
}

// finish flushes the lists and writes the summary table.
func (r *report) finish(res Result) error {
	for _, cw := range r.csvs {
		cw.Flush()
		if err := cw.Error(); err != nil && r.err == nil {
			r.err = err
		}
	}
	f, err := os.Create(filepath.Join(r.dir, SummaryFile))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	res.WriteSummary(f)
	if err := f.Close(); err != nil && r.err == nil {
		r.err = err
	}
	if r.err != nil {
		return fmt.Errorf("report: %w", r.err)
	}
	return nil
}

func (r *report) close() {
	for _, cw := range r.csvs {
		cw.Flush()
	}
	for _, f := range r.files {
		f.Close()
	}
}
