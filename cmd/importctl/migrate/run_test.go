package migrate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
	"github.com/bulkimport/bulkimport/cmd/importctl/migrate"
)

// extras counts what the valid lines of a cohort carry, as the database
// must hold it after a complete run.
type extras struct {
	Accounts, Notes, Transactions, Statements, PaymentInstructions int
}

func cohortExtras(t *testing.T, path string, invalid []cohort.Expected) extras {
	t.Helper()
	bad := map[string]bool{}
	for _, e := range invalid {
		bad[e.ExternalAccountNumber] = true
	}
	r, c, err := cohort.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var x extras
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		if bad[rec.ExternalAccountNumber] {
			continue
		}
		var acc struct{ Notes []any }
		json.Unmarshal(rec.Account, &acc)
		var notes, txs, sts []any
		json.Unmarshal(rec.Notes, &notes)
		json.Unmarshal(rec.Transactions, &txs)
		json.Unmarshal(rec.Statements, &sts)
		x.Accounts++
		x.Notes += len(acc.Notes) + len(notes)
		x.Transactions += len(txs)
		x.Statements += len(sts)
		if len(rec.PaymentInstruction) > 0 {
			x.PaymentInstructions++
		}
	}
	return x
}

// dbExtras counts the same in the service's database, and checks that no
// account is there twice.
func (s *service) dbExtras(t *testing.T) extras {
	t.Helper()
	if n := s.count(t, `SELECT count(*) - count(DISTINCT external_account_number) FROM accounts`); n != 0 {
		t.Errorf("%d accounts created twice", n)
	}
	if n := s.count(t, `SELECT count(*) FROM accounts a JOIN import_processes p ON p.id = a.import_process_id WHERE p.status <> 'COMPLETED'`); n != 0 {
		t.Errorf("%d created accounts whose process is not COMPLETED", n)
	}
	return extras{
		Accounts:            s.count(t, `SELECT count(*) FROM accounts`),
		Notes:               s.count(t, `SELECT count(*) FROM notes`),
		Transactions:        s.count(t, `SELECT count(*) FROM transactions`),
		Statements:          s.count(t, `SELECT count(*) FROM historical_statements`),
		PaymentInstructions: s.count(t, `SELECT count(*) FROM payment_instructions`),
	}
}

func logSummary(t *testing.T, res migrate.Result) {
	t.Helper()
	var b strings.Builder
	res.WriteSummary(&b)
	t.Log("\n" + b.String())
}

func readFailures(t *testing.T, dir string) []migrate.Failure {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, migrate.FailuresNDJSON))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []migrate.Failure
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var x migrate.Failure
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			t.Fatalf("failures.ndjson: %v", err)
		}
		out = append(out, x)
	}
	return out
}

func config(s *service, path, dir string) migrate.Config {
	return migrate.Config{BaseURL: s.base, APIKey: s.key, Team: team, Cohort: path, ReportDir: dir,
		InitialBackoff: 20 * time.Millisecond, MaxBackoff: time.Second}
}

// A generated cohort with 2% invalid accounts runs to its end: every valid
// account is created once with its notes, transactions, statement and
// payment instruction, and the report lists exactly the invalid accounts,
// each with the code and attr the validator gives its kind.
func TestRun_CohortWithInvalidAccountsCreatesTheValidOnesAndReportsTheOthers(t *testing.T) {
	t.Parallel()
	n := 300
	if !testing.Short() {
		n = 2000
	}
	s := startService(t, nil)
	path, invalid := writeCohort(t, cohort.Options{Accounts: n, Seed: 11, InvalidRate: 0.02})
	dir := t.TempDir()
	res, err := migrate.Run(context.Background(), config(s, path, dir))
	logSummary(t, res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Succeeded != n-len(invalid) || res.Failed != len(invalid) || res.ExitCode() != 1 {
		t.Errorf("succeeded %d, failed %d, exit %d; want %d, %d, 1", res.Succeeded, res.Failed, res.ExitCode(), n-len(invalid), len(invalid))
	}
	var want []migrate.Failure
	for _, e := range invalid {
		want = append(want, migrate.Failure{ExternalAccountNumber: e.ExternalAccountNumber, Step: migrate.StepStage,
			HTTPStatus: 400, Code: e.Code, Attr: e.Attr, Line: e.Line})
	}
	got := readFailures(t, dir)
	for i := range got {
		got[i].Detail = ""
	}
	byLine := func(a, b migrate.Failure) int { return a.Line - b.Line }
	slices.SortFunc(got, byLine)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("failure report (-want +got):\n%s", d)
	}
	csv, err := os.ReadFile(filepath.Join(dir, migrate.FailuresCSV))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(csv), "\n"); lines != len(invalid)+1 {
		t.Errorf("failures.csv has %d lines, want a header and %d rows", lines, len(invalid))
	}
	if d := cmp.Diff(cohortExtras(t, path, invalid), s.dbExtras(t)); d != "" {
		t.Errorf("database (-cohort +db):\n%s", d)
	}
}

// A runner killed with SIGKILL in the middle of a run, then run again with
// the same command, finishes the cohort with every account created once
// and no note, transaction or statement twice.
func TestRun_KilledRunnerRunAgainCreatesEverythingExactlyOnce(t *testing.T) {
	t.Parallel()
	s := startService(t, nil)
	_, importctl := binaries(t)
	const n = 300
	path, _ := writeCohort(t, cohort.Options{Accounts: n, Seed: 12})
	dir := t.TempDir()
	run := func() *exec.Cmd {
		// The report directory as a user types it, with a slash at the end.
		cmd := exec.Command(importctl, "run", path, "--url", s.base, "--team", team, "--report", dir+"/", "--concurrency", "8",
			"--progress-every", "1s")
		cmd.Env = []string{"IMPORTCTL_API_KEY=" + s.key}
		return cmd
	}
	first := run()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(dir, migrate.JournalFile)
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(journal)
		if strings.Count(string(b), "\n") >= n { // about a third of the steps
			break
		}
		if time.Now().After(deadline) {
			first.Process.Kill()
			t.Fatalf("the journal did not reach %d lines in 60s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()
	half := s.count(t, `SELECT count(*) FROM accounts`)
	if half == 0 || half == n {
		t.Fatalf("%d accounts after the kill, want some but not all", half)
	}
	out, err := run().CombinedOutput()
	if err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "by an earlier run") {
		t.Errorf("summary does not say what the earlier run did:\n%s", out)
	}
	if !strings.Contains(string(out), "accounts/s over the ") || !strings.Contains(string(out), " accounts this run moved (") {
		t.Errorf("a resumed run's rate does not say it is of the accounts this run moved:\n%s", out)
	}
	if want := "report: " + filepath.Join(dir, migrate.FailuresCSV) + ", "; !strings.Contains(string(out), want) {
		t.Errorf("summary does not name the report as %q:\n%s", want, out)
	}
	if d := cmp.Diff(cohortExtras(t, path, nil), s.dbExtras(t)); d != "" {
		t.Errorf("database after the second run (-cohort +db):\n%s\n%s", d, out)
	}
	if got := readFailures(t, dir); len(got) != 0 {
		t.Errorf("failures after the second run: %v", got)
	}
}

// With the service's E5 limit far below the runner's concurrency, the run
// still finishes: its 429s are waited out and none is reported.
func TestRun_ConcurrencyLimitIsWaitedOutNotReported(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{"PROCESS_CONCURRENCY_LIMIT": "2"})
	const n = 60
	path, _ := writeCohort(t, cohort.Options{Accounts: n, Seed: 13})
	dir := t.TempDir()
	cfg := config(s, path, dir)
	cfg.Concurrency = 12
	res, err := migrate.Run(context.Background(), cfg)
	logSummary(t, res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Succeeded != n || res.Failed != 0 || res.ExitCode() != 0 {
		t.Errorf("succeeded %d, failed %d, exit %d; want %d, 0, 0", res.Succeeded, res.Failed, res.ExitCode(), n)
	}
	e5 := res.Steps[slices.IndexFunc(res.Steps, func(st migrate.StepStats) bool { return st.Step == migrate.StepProcess })]
	if e5.Waited == 0 {
		t.Errorf("E5 met no 429 with limit 2 and concurrency 12: %+v", e5)
	}
	if got := readFailures(t, dir); len(got) != 0 {
		t.Errorf("failures reported: %v", got)
	}
	if d := cmp.Diff(cohortExtras(t, path, nil), s.dbExtras(t)); d != "" {
		t.Errorf("database (-cohort +db):\n%s", d)
	}
}

// A token lifetime far shorter than the run is renewed as the run goes,
// and no request fails for an expired token.
func TestRun_ShortTokenLifetimeIsRenewedDuringTheRun(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{"TOKEN_TTL": "3s"})
	// One account at a time, each about 10 ms of five requests on a quiet
	// machine, so that the run outlives a token however fast the machine is.
	// No payment instructions: a verification retried by Asynq holds one
	// request for seconds, during which no token is needed, and the bound
	// below assumes requests all through the run.
	const n = 720
	path, _ := writeCohort(t, cohort.Options{Accounts: n, Seed: 14, NoPayments: true})
	cfg := config(s, path, t.TempDir())
	cfg.Concurrency = 1
	res, err := migrate.Run(context.Background(), cfg)
	logSummary(t, res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Elapsed < 4*time.Second {
		t.Fatalf("the run took %s, shorter than the test needs to outlive a token", res.Elapsed)
	}
	if res.Succeeded != n || res.Failed != 0 {
		t.Errorf("succeeded %d, failed %d; want %d, 0", res.Succeeded, res.Failed, n)
	}
	if min := int(res.Elapsed / (3 * time.Second)); res.TokenRenewals < min {
		t.Errorf("%d token renewals in %s with 3s tokens, want at least %d", res.TokenRenewals, res.Elapsed, min)
	}
}

// --validate-only runs E3 and reports; --dry-run stages and runs E5's dry
// run; neither creates an account.
func TestRun_ValidateOnlyAndDryRunCreateNothing(t *testing.T) {
	t.Parallel()
	s := startService(t, nil)
	const n = 30
	path, invalid := writeCohort(t, cohort.Options{Accounts: n, Seed: 15, InvalidRate: 0.1})
	for _, mode := range []string{"validate-only", "dry-run"} {
		dir := t.TempDir()
		cfg := config(s, path, dir)
		cfg.ValidateOnly, cfg.DryRun = mode == "validate-only", mode == "dry-run"
		res, err := migrate.Run(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if res.Succeeded != n-len(invalid) || res.Failed != len(invalid) {
			t.Errorf("%s: succeeded %d, failed %d; want %d, %d", mode, res.Succeeded, res.Failed, n-len(invalid), len(invalid))
		}
		var codes []string
		for _, f := range readFailures(t, dir) {
			codes = append(codes, f.Code+"@"+f.Attr)
		}
		var want []string
		for _, e := range invalid {
			want = append(want, e.Code+"@"+e.Attr)
		}
		slices.Sort(codes)
		slices.Sort(want)
		if d := cmp.Diff(want, codes); d != "" {
			t.Errorf("%s: failures (-want +got):\n%s", mode, d)
		}
		if _, err := os.Stat(filepath.Join(dir, migrate.JournalFile)); !os.IsNotExist(err) {
			t.Errorf("%s wrote a journal (%v)", mode, err)
		}
	}
	if n := s.count(t, `SELECT count(*) FROM accounts`); n != 0 {
		t.Errorf("%d accounts created", n)
	}
	if got := s.count(t, `SELECT count(*) FROM import_processes`); got != n-len(invalid) {
		t.Errorf("%d staged processes after the dry run, want %d", got, n-len(invalid))
	}
}

// A second run without the first one's journal repeats every step, and the
// service's idempotency answers each repeat: already imported (E4, E5,
// with the service account number), notes and transactions that exist,
// statements and a payment instruction stored before. The runner counts
// them all as success, and nothing is created twice.
func TestRun_RepeatWithoutJournalIsAnsweredByTheServicesIdempotency(t *testing.T) {
	t.Parallel()
	s := startService(t, nil)
	const n = 40
	path, _ := writeCohort(t, cohort.Options{Accounts: n, Seed: 16})
	for i := range 2 {
		dir := t.TempDir()
		res, err := migrate.Run(context.Background(), config(s, path, dir))
		logSummary(t, res)
		if err != nil {
			t.Fatal(err)
		}
		if res.Succeeded != n || res.Failed != 0 || res.Resumed != 0 {
			t.Errorf("run %d: succeeded %d, failed %d, resumed %d; want %d, 0, 0", i+1, res.Succeeded, res.Failed, res.Resumed, n)
		}
		if got := readFailures(t, dir); len(got) != 0 {
			t.Errorf("run %d: failures %v", i+1, got)
		}
	}
	if d := cmp.Diff(cohortExtras(t, path, nil), s.dbExtras(t)); d != "" {
		t.Errorf("database (-cohort +db):\n%s", d)
	}
}

// Ctrl-C (SIGINT) stops the runner cleanly: it prints the summary, says
// the run was interrupted and exits 1; the same command then finishes the
// cohort.
func TestRun_InterruptStopsCleanlyAndTheSameCommandGoesOn(t *testing.T) {
	t.Parallel()
	s := startService(t, nil)
	_, importctl := binaries(t)
	const n = 200
	path, _ := writeCohort(t, cohort.Options{Accounts: n, Seed: 17})
	dir := t.TempDir()
	run := func() *exec.Cmd {
		cmd := exec.Command(importctl, "run", path, "--url", s.base, "--team", team, "--report", dir, "--concurrency", "4",
			"--progress-every", "100ms")
		cmd.Env = []string{"IMPORTCTL_API_KEY=" + s.key}
		return cmd
	}
	first := run()
	var out strings.Builder
	first.Stdout, first.Stderr = &out, &out
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(dir, migrate.JournalFile)
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(journal)
		if strings.Count(string(b), "\n") >= 100 {
			break
		}
		if time.Now().After(deadline) {
			first.Process.Kill()
			t.Fatal("the journal did not reach 100 lines in 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.Process.Signal(os.Interrupt)
	err := first.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("interrupted run: %v, want exit 1\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "interrupted") || !strings.Contains(out.String(), string(migrate.StepProcess)) {
		t.Errorf("interrupted run printed no summary:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "progress: ") || !strings.Contains(out.String(), "accounts/s") {
		t.Errorf("no progress line on a non-terminal:\n%s", out.String())
	}
	if got := readFailures(t, dir); len(got) != 0 {
		t.Errorf("the interruption was reported as failures: %v", got)
	}
	if out, err := run().CombinedOutput(); err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	if d := cmp.Diff(cohortExtras(t, path, nil), s.dbExtras(t)); d != "" {
		t.Errorf("database (-cohort +db):\n%s", d)
	}
}

// importctl run exits 2 on a usage error and when the service cannot be
// reached, before writing anything.
func TestRunCommand_UsageAndConnectionErrorsExit2(t *testing.T) {
	t.Parallel()
	_, importctl := binaries(t)
	path, _ := writeCohort(t, cohort.Options{Accounts: 3, Seed: 18})
	dir := filepath.Join(t.TempDir(), "report")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"no cohort", []string{"run", "--url", "http://127.0.0.1:1", "--team", team}},
		{"no team", []string{"run", path, "--url", "http://127.0.0.1:1", "--report", dir}},
		{"unknown flag", []string{"run", path, "--bogus"}},
		{"validate-only and dry-run", []string{"run", path, "--url", "http://127.0.0.1:1", "--validate-only", "--dry-run"}},
		{"service unreachable", []string{"run", path, "--url", "http://127.0.0.1:1", "--team", team, "--report", dir, "--retries", "1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(importctl, c.args...)
			cmd.Env = []string{"IMPORTCTL_API_KEY=bik_x"}
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
				t.Errorf("%v, want exit 2\n%s", err, out)
			}
		})
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("report directory written without a service (%v)", err)
	}
}
