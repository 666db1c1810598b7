package main

// The checks that the soak and the chaos runs share: a cohort driven by
// the built `importctl run`, held against the service's database, the
// runner's failure report and importctl reconcile.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bulkimport/bulkimport/db"
	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
	"github.com/bulkimport/bulkimport/cmd/importctl/migrate"
)

// readExpected reads the generator's --expect file.
func readExpected(t testing.TB, path string) []cohort.Expected {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []cohort.Expected
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e cohort.Expected
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// lineExtras is what one valid cohort line must have in the database.
type lineExtras struct {
	Notes, Transactions, Statements, PaymentInstructions int
}

// cohortLineExtras reads, per valid line of the cohort (its external
// account number), the notes (those of the E4 payload and E6's),
// transactions, statements and payment instruction it carries: the
// per-account form of the runner's tests' cohortExtras
// (cmd/importctl/migrate/run_test.go).
func cohortLineExtras(t testing.TB, path string, invalid []cohort.Expected) map[string]lineExtras {
	t.Helper()
	bad := map[string]bool{}
	for _, e := range invalid {
		bad[e.ExternalAccountNumber] = true
	}
	rd, c, err := cohort.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := map[string]lineExtras{}
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if bad[rec.ExternalAccountNumber] {
			continue
		}
		var acc struct{ Notes []json.RawMessage }
		var notes, txs, sts []json.RawMessage
		for _, p := range []struct {
			raw json.RawMessage
			dst any
		}{{rec.Account, &acc}, {rec.Notes, &notes}, {rec.Transactions, &txs}, {rec.Statements, &sts}} {
			if len(p.raw) > 0 {
				if err := json.Unmarshal(p.raw, p.dst); err != nil {
					t.Fatalf("line %d: %v", rec.Number, err)
				}
			}
		}
		x := lineExtras{Notes: len(acc.Notes) + len(notes), Transactions: len(txs), Statements: len(sts)}
		if len(rec.PaymentInstruction) > 0 {
			x.PaymentInstructions = 1
		}
		if _, dup := out[rec.ExternalAccountNumber]; dup {
			t.Fatalf("line %d: external account number %s twice in the cohort", rec.Number, rec.ExternalAccountNumber)
		}
		out[rec.ExternalAccountNumber] = x
	}
	return out
}

// cohortArrival is what checkCohortArrived counts: each must be 0.
type cohortArrival struct {
	// Differ is the valid lines whose account is missing, doubled or
	// holds other children than the line, and the accounts of the
	// supplier no valid line asked for.
	Differ int
	// ReportRows is the rows of the runner's failure report that are not
	// exactly the invalid lines with their codes, and the invalid lines
	// missing from it.
	ReportRows int
	// Reconcile is 1 when importctl reconcile found a difference or could
	// not finish.
	Reconcile int
}

// checkCohortArrived checks a runner's cohort against the service, on the
// failures of t: every valid line of supplier created exactly once with
// all its notes, transactions, statements and payment instruction, and no
// other account of the supplier; the invalid lines, and only they, in
// the failure report of reportDir at E4 with the generator's codes; and
// importctl reconcile (the built ctl) through the API at apiURL: every
// line the run did not report as refused is in the service with its
// children, balances and content (the digest), and nothing else is.
func checkCohortArrived(t testing.TB, ctx context.Context, d *db.DB, supplier, cohortPath string, invalid []cohort.Expected,
	reportDir, ctl, apiURL, key string) cohortArrival {
	t.Helper()
	var res cohortArrival
	want := cohortLineExtras(t, cohortPath, invalid)
	type row struct {
		Ext   string `db:"external_account_number"`
		Times int    `db:"times"`
		lineExtras
	}
	var rows []row
	if err := d.SelectContext(ctx, &rows, `SELECT a.external_account_number, count(*) AS times,
			sum((SELECT count(*) FROM notes x WHERE x.account_id = a.id)) AS notes,
			sum((SELECT count(*) FROM transactions x WHERE x.account_id = a.id)) AS transactions,
			sum((SELECT count(*) FROM historical_statements x WHERE x.account_id = a.id)) AS statements,
			sum((SELECT count(*) FROM payment_instructions x WHERE x.account_id = a.id)) AS paymentinstructions
		FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id WHERE s.code = $1
		GROUP BY a.external_account_number`, supplier); err != nil {
		t.Fatalf("read accounts: %v", err)
	}
	got := map[string]lineExtras{}
	for _, rw := range rows {
		if rw.Times != 1 {
			res.Differ++
			t.Errorf("%s: created %d times", rw.Ext, rw.Times)
		}
		got[rw.Ext] = rw.lineExtras
	}
	for ext, w := range want {
		g, ok := got[ext]
		switch {
		case !ok:
			res.Differ++
			if res.Differ <= 20 {
				t.Errorf("%s: valid cohort line with no account", ext)
			}
		case g != w:
			res.Differ++
			if res.Differ <= 20 {
				t.Errorf("%s: database (-cohort +db):\n%s", ext, cmp.Diff(w, g))
			}
		}
	}
	for ext := range got {
		if _, ok := want[ext]; !ok {
			res.Differ++
			if res.Differ <= 20 {
				t.Errorf("%s: an account no valid cohort line asked for", ext)
			}
		}
	}
	if res.Differ > 0 {
		t.Errorf("%d accounts differ from the cohort (%d valid lines, %d accounts)", res.Differ, len(want), len(got))
	}

	// The failure report: exactly the invalid lines, each at E4 with the
	// code and attr the generator gave it.
	wantF := make([]migrate.Failure, 0, len(invalid))
	for _, e := range invalid {
		wantF = append(wantF, migrate.Failure{ExternalAccountNumber: e.ExternalAccountNumber, Step: migrate.StepStage,
			HTTPStatus: 400, Code: e.Code, Attr: e.Attr, Line: e.Line})
	}
	gotF := readFailureReport(t, filepath.Join(reportDir, migrate.FailuresNDJSON))
	for i := range gotF {
		gotF[i].Detail = ""
	}
	byLine := func(a, b migrate.Failure) int { return a.Line - b.Line }
	slices.SortFunc(wantF, byLine)
	slices.SortFunc(gotF, byLine)
	if diff := cmp.Diff(wantF, gotF); diff != "" {
		t.Errorf("failure report (-expect file +failures.ndjson):\n%s", diff)
		wanted := map[migrate.Failure]bool{}
		for _, f := range wantF {
			wanted[f] = true
		}
		for _, f := range gotF {
			if !wanted[f] {
				res.ReportRows++
			}
			delete(wanted, f)
		}
		res.ReportRows += len(wanted)
	}

	// importctl reconcile, through the API as a migration team runs it. It
	// exits 0 only when nothing differs.
	rec := exec.Command(ctl, "reconcile", cohortPath, "--url", apiURL, "--report", filepath.Join(reportDir, "reconcile"),
		"--failures", reportDir)
	rec.Env = append(os.Environ(), "IMPORTCTL_API_KEY="+key)
	out, err := rec.CombinedOutput()
	t.Logf("importctl reconcile:\n%s", out)
	if err != nil {
		res.Reconcile = 1
		t.Errorf("importctl reconcile found differences or could not finish (%v); its report is in %s", err, filepath.Join(reportDir, "reconcile"))
	}
	return res
}

// readFailureReport reads the runner's failures.ndjson.
func readFailureReport(t testing.TB, path string) []migrate.Failure {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []migrate.Failure
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var x migrate.Failure
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, x)
	}
	return out
}
