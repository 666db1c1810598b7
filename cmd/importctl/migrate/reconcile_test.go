package migrate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/shopspring/decimal"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
	"github.com/bulkimport/bulkimport/cmd/importctl/migrate"
	"github.com/bulkimport/bulkimport/cmd/importctl/reconcile"
	jr "github.com/bulkimport/bulkimport/jobs/reconcile"
)

// fullLine is a cohort line with every child kind the canonical form holds:
// two customers (alternative phone numbers, user details, preferences,
// national numbers the service normalises), supply points of four types
// with meters (meter type, registers), agreements and transfer readings,
// metadata, payload notes (one with a document path) and E6 notes, E7
// transactions with line and tax items, one of them dated before the open
// statement period (E7 moves it and pins a note of its own, which the
// summary must leave out), payload statements and E8 statements, and an E9
// payment instruction.
func fullLine(t testing.TB, ean string) []byte {
	t.Helper()
	raw, err := os.ReadFile("../../../jobs/account/testdata/account.json")
	if err != nil {
		t.Fatal(err)
	}
	var acc map[string]any
	if err := json.Unmarshal(raw, &acc); err != nil {
		t.Fatal(err)
	}
	acc["external_account_number"] = ean
	// A statement the account payload carries, as the reference's GB
	// example does; E8's statements below come after it.
	acc["statements"] = []any{map[string]any{"statement_id": ean + "-S0", "bill_period_from_date": "2025-02-01",
		"bill_period_to_date": "2025-03-01", "statement_path": "/" + ean + "/2025-02-01-to-2025-03-01.pdf"}}
	sas := acc["supply_addresses"].([]any)
	sa := sas[1].(map[string]any)
	sa["supply_points"] = append(sa["supply_points"].([]any), map[string]any{
		"supply_type": "LIGHT", "serial_number": "LT-" + ean, "secondary_serial_number": "LT2", "manufacturer_name": "Philips",
		"model_name": "StreetLED", "location": "Car park", "installed_at": "2020-02-02", "supply_start_date": "2022-01-15",
		"agreements": []any{map[string]any{"tariff_code": "HP-STD", "effective_from": "2022-01-15"}},
	})
	line := map[string]any{
		"account": acc,
		"notes": []any{
			map[string]any{"body": "E6 note, pinned.", "created_at": "2025-06-02T09:00:00Z", "is_pinned": true, "unpin_at": "2030-01-01T00:00:00.5+01:00"},
			map[string]any{"body": "E6 note without a time."},
		},
		"transactions": []any{
			map[string]any{"transaction_id": ean + "-T1", "transaction_date": "2025-06-10", "type": "CHARGE", "amount": 120.5,
				"reason": "IMPORTED_CHARGE", "display_note": "Electricity", "note": "Imported",
				"line_items": []any{map[string]any{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2025-05-01", "end_date": "2025-05-31",
					"number_of_units": 412.50, "net_amount": 114.76, "price_per_unit": 0.27820, "units": []any{200.25, 212.25}}},
				"tax_items": []any{map[string]any{"amount": 5.74, "tax_type": "VAT", "value_taxed": 114.76, "rate": 0.050, "unit_type": "PROPORTION"}}},
			map[string]any{"transaction_id": ean + "-T2", "transaction_date": "2025-06-20", "type": "PAYMENT", "amount": json.Number("80.00"),
				"reason": "ACCOUNT_CHARGE_PAYMENT", "reference": "DD-1", "payment_type": "DD_REGULAR_COLLECTION"},
			map[string]any{"transaction_id": ean + "-T3", "transaction_date": "2025-01-15", "type": "CREDIT", "amount": 10,
				"reason": "GENERAL_CREDIT", "note": "Dated in a closed period: moved"},
		},
		"statements": []any{
			map[string]any{"statement_id": ean + "-S1", "number": "9001", "bill_period_from_date": "2025-04-01",
				"bill_period_to_date": "2025-05-01", "issued_date": "2025-05-03", "gross_amount": 12345},
			map[string]any{"statement_id": ean + "-S2", "bill_period_from_date": "2025-03-01", "bill_period_to_date": "2025-04-01"},
		},
		"payment_instruction": map[string]any{"vendor": "DEMO_PAY", "reference": "DEMO-CARD-0001", "type": "CARD"},
	}
	b, err := json.Marshal(line)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cohortWithFullLines generates a cohort and appends n full lines.
func cohortWithFullLines(t testing.TB, opts cohort.Options, n int) (string, []cohort.Expected) {
	t.Helper()
	path, invalid := writeCohort(t, opts)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		f.Write(fullLine(t, "FULL-"+string(rune('A'+i))))
		f.Write([]byte("\n"))
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, invalid
}

// serviceSummaries reads the reconciliation endpoint whole.
func serviceSummaries(t testing.TB, s *service, supplier string) ([]jr.Summary, string) {
	t.Helper()
	tokens, err := migrate.NewTokens(migrate.Config{BaseURL: s.base, APIKey: s.key})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokens.Token(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", s.base+"/v1/data-import/reconciliation/"+supplier+"/", nil)
	req.Header.Set("Authorization", "Token "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("reconciliation: %d", res.StatusCode)
	}
	var out []jr.Summary
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out, res.Header.Get("Import-Supplier-Country")
}

// cohortSummaries computes every line's summary as importctl reconcile
// does, by external account number.
func cohortSummaries(t testing.TB, path, country string) map[string]jr.Summary {
	t.Helper()
	r, closer, err := cohort.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	out := map[string]jr.Summary{}
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		s, err := jr.FromCohortLine(context.Background(), jr.Line{Account: rec.Account, Notes: rec.Notes,
			Transactions: rec.Transactions, Statements: rec.Statements, PaymentInstruction: rec.PaymentInstruction}, country)
		if err != nil {
			continue // refused by the service too (the test checks which)
		}
		out[rec.ExternalAccountNumber] = s
	}
	return out
}

// The two sides of the reconciliation agree: for real cohort lines imported
// through the real service by the runner, the summary the cohort's side
// computes (FromCohortLine) equals, field by field and digest included, the
// one the service streams, for generated accounts and for lines that hold
// every child kind.
func TestReconcile_CohortAndServiceSummariesAgreeForEveryChildKind(t *testing.T) {
	t.Parallel()
	s := startService(t, nil)
	path, invalid := cohortWithFullLines(t, cohort.Options{Accounts: 40, Seed: 5, InvalidRate: 0.05}, 2)
	dir := t.TempDir()
	res, err := migrate.Run(context.Background(), config(s, path, dir))
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != len(invalid) {
		logSummary(t, res)
		t.Fatalf("the run refused %d accounts, want the %d invalid ones: %+v", res.Failed, len(invalid), readFailures(t, dir))
	}
	got, country := serviceSummaries(t, s, "DEMO")
	if country != "GB" {
		t.Errorf("country header %q, want GB", country)
	}
	want := cohortSummaries(t, path, country)
	if len(got) != 40-len(invalid)+2 || len(want) != len(got) {
		t.Fatalf("service has %d accounts, cohort computes %d; want %d", len(got), len(want), 40-len(invalid)+2)
	}
	if !slices.IsSortedFunc(got, func(a, b jr.Summary) int { return strings.Compare(a.ExternalAccountNumber, b.ExternalAccountNumber) }) {
		t.Error("the service's summaries are not in byte order")
	}
	for _, g := range got {
		w := want[g.ExternalAccountNumber]
		w.ServiceAccountNumber = g.ServiceAccountNumber
		if d := cmp.Diff(w, g); d != "" {
			t.Errorf("account %s (-cohort +service):\n%s", g.ExternalAccountNumber, d)
		}
	}
	full := want["FULL-A"]
	if full.Customers != 2 || full.SupplyPoints != 5 || full.Meters != 2 || full.Notes != 4 || full.Transactions != 3 ||
		full.Statements != 3 || full.PaymentInstructions != 1 || full.TransactionsSum != "210.50" || full.LedgerBalance != "30.50" {
		t.Errorf("full line summary %+v", full)
	}
	var moved int
	if err := s.db.Get(&moved, `SELECT count(*) FROM notes n JOIN accounts a ON a.id = n.account_id
		WHERE a.external_account_number = 'FULL-A' AND n.body LIKE 'Migration:%'`); err != nil || moved != 1 {
		t.Errorf("E7's move note: %d (%v), want 1: the test no longer covers the note the summary leaves out", moved, err)
	}

	// The command agrees: everything matches once the run's refusals are
	// expected.
	rdir := t.TempDir()
	rres, err := reconcile.Run(context.Background(), reconcile.Config{Cohort: path, BaseURL: s.base, APIKey: s.key,
		ReportDir: rdir, Failures: dir})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rres.WriteSummary(&b)
	t.Log("\n" + b.String())
	if rres.ExitCode() != 0 || rres.Matched != len(got) || rres.ExpectedMissing != len(invalid) {
		t.Errorf("reconcile: exit %d, matched %d, expected missing %d; want 0, %d, %d", rres.ExitCode(), rres.Matched,
			rres.ExpectedMissing, len(got), len(invalid))
	}
	// The command's exit codes: 0 when everything matches, 1 when
	// something differs, 2 on a usage or connection error (and then no
	// report is written).
	_, importctl := binaries(t)
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"matches", []string{"reconcile", path, "--url", s.base, "--report", t.TempDir(), "--failures", dir}, 0},
		{"missing accounts", []string{"reconcile", path, "--url", s.base, "--report", t.TempDir()}, 1},
		{"no cohort", []string{"reconcile", "--url", s.base}, 2},
		{"unknown flag", []string{"reconcile", path, "--bogus"}, 2},
		{"no failure report there", []string{"reconcile", path, "--url", s.base, "--report", t.TempDir(), "--failures", filepath.Join(dir, "nope")}, 2},
		{"service unreachable", []string{"reconcile", path, "--url", "http://127.0.0.1:1", "--report", filepath.Join(t.TempDir(), "r"), "--retries", "1"}, 2},
	} {
		cmd := osexec.Command(importctl, c.args...)
		cmd.Env = []string{"IMPORTCTL_API_KEY=" + s.key}
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*osexec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code {
			t.Errorf("%s: exit %d, want %d\n%s", c.name, code, c.code, out)
		}
	}

	// Without the run's report, the refused accounts are missing.
	rres, err = reconcile.Run(context.Background(), reconcile.Config{Cohort: path, BaseURL: s.base, APIKey: s.key, ReportDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rres.ExitCode() != 1 || rres.Missing != len(invalid) || rres.ExpectedMissing != 0 {
		t.Errorf("reconcile without --failures: exit %d, missing %d (%d expected); want 1, %d, 0", rres.ExitCode(), rres.Missing,
			rres.ExpectedMissing, len(invalid))
	}
}

func readNDJSON[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var x T
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			t.Fatal(err)
		}
		out = append(out, x)
	}
	return out
}

// Accounts changed after the import, in every way a summary can catch, are
// reported field by field: a child added or removed of each kind, an
// amount changed, the ledger moved, an account missing, and an account the
// cohort does not have. Sorting the cohort on disk (a tiny chunk size)
// gives the same report.
func TestReconcile_ChangesAfterImportAreReportedFieldByField(t *testing.T) {
	t.Parallel()
	s := startService(t, nil)
	path, _ := cohortWithFullLines(t, cohort.Options{Accounts: 12, Seed: 9, NoPayments: true}, 1)
	runWhole(t, s, path)
	acct := func(i int) string { return "S9-000000" + string(rune('0'+i)) }
	exec := execer(t, s)
	id := `(SELECT id FROM accounts WHERE external_account_number = $1)`
	exec(`INSERT INTO notes (account_id, body, created_at) VALUES (`+id+`, 'added later', now())`, acct(1))
	exec(`DELETE FROM transactions WHERE id = (SELECT min(id) FROM transactions WHERE account_id = `+id+`)`, acct(2))
	exec(`UPDATE transactions SET amount = amount + 1 WHERE id = (SELECT min(id) FROM transactions WHERE account_id = `+id+`)`, acct(3))
	exec(`UPDATE ledgers SET balance = balance - 2.5 WHERE account_id = `+id, acct(4))
	exec(`DELETE FROM accounts WHERE external_account_number = $1`, acct(5))
	exec(`DELETE FROM historical_statements WHERE account_id = `+id, acct(6))
	exec(`DELETE FROM customers WHERE position = 0 AND account_id = `+id, acct(7))
	exec(`DELETE FROM meters WHERE account_id = `+id, acct(8))
	exec(`UPDATE customers SET email = 'changed@example.com' WHERE account_id = `+id, "FULL-A")
	exec(`DELETE FROM payment_instructions WHERE account_id = `+id, "FULL-A")

	// The cohort without the line of account 10: that account is extra.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	cut := filepath.Join(t.TempDir(), "cohort.ndjson")
	if err := os.WriteFile(cut, []byte(strings.Join(slices.Delete(lines, 9, 10), "")), 0o644); err != nil {
		t.Fatal(err)
	}

	type row struct{ Account, Field string }
	// FULL-A sorts first (byte order).
	want := []row{{"FULL-A", "payment_instructions"}, {"FULL-A", "digest"}}
	for _, r := range []struct {
		i      int
		fields []string
	}{
		{1, []string{"notes", "digest"}},
		{2, []string{"transactions", "transactions_sum", "digest"}},
		{3, []string{"transactions_sum", "digest"}},
		{4, []string{"ledger_balance"}},
		{6, []string{"statements", "digest"}},
		{7, []string{"customers", "digest"}},
		{8, []string{"meters", "digest"}},
	} {
		for _, f := range r.fields {
			want = append(want, row{acct(r.i), f})
		}
	}

	for _, chunk := range []int{0, 2 << 10} {
		dir := t.TempDir()
		rres, err := reconcile.Run(context.Background(), reconcile.Config{Cohort: cut, BaseURL: s.base, APIKey: s.key,
			ReportDir: dir, ChunkBytes: chunk, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		rres.WriteSummary(&sb)
		t.Logf("chunk %d:\n%s", chunk, sb.String())
		ms := readNDJSON[reconcile.Mismatch](t, filepath.Join(dir, reconcile.MismatchesNDJSON))
		var got []row
		for _, m := range ms {
			got = append(got, row{m.ExternalAccountNumber, m.Field})
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("chunk %d: mismatches (-want +got):\n%s", chunk, d)
		}
		// The values are the summaries' own.
		for _, m := range ms {
			if m.ExternalAccountNumber == acct(1) && m.Field == "notes" && (m.Found != incr(m.Expected)) {
				t.Errorf("notes of %s: expected %s found %s", acct(1), m.Expected, m.Found)
			}
			if m.ExternalAccountNumber == acct(4) && m.Field == "ledger_balance" {
				e, f := decimalOf(t, m.Expected), decimalOf(t, m.Found)
				if e.Sub(f).String() != "2.5" {
					t.Errorf("ledger of %s: expected %s found %s", acct(4), m.Expected, m.Found)
				}
			}
		}
		missing := readNDJSON[reconcile.Missing](t, filepath.Join(dir, reconcile.MissingNDJSON))
		if d := cmp.Diff([]reconcile.Missing{{ExternalAccountNumber: acct(5), Line: 5}}, missing); d != "" {
			t.Errorf("chunk %d: missing (-want +got):\n%s", chunk, d)
		}
		extra := readNDJSON[reconcile.Extra](t, filepath.Join(dir, reconcile.ExtraNDJSON))
		if len(extra) != 1 || extra[0].ExternalAccountNumber != "S9-0000010" || extra[0].ServiceAccountNumber == "" {
			t.Errorf("chunk %d: extra %+v, want S9-0000010", chunk, extra)
		}
		if rres.ExitCode() != 1 || rres.Mismatched != 8 || rres.Matched != 3 || rres.Missing != 1 || rres.Extra != 1 {
			t.Errorf("chunk %d: result %+v", chunk, rres)
		}
		if _, err := os.Stat(filepath.Join(dir, reconcile.SummaryFile)); err != nil {
			t.Error(err)
		}
	}
}

func incr(s string) string {
	n, err := strconv.Atoi(s)
	if err != nil {
		return "not a number: " + s
	}
	return strconv.Itoa(n + 1)
}

func decimalOf(t testing.TB, s string) decimal.Decimal {
	t.Helper()
	d, err := decimal.NewFromString(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// breakingBody ends the first answer's body with an error after n bytes,
// as a connection reset would.
type breakingBody struct {
	io.ReadCloser
	left int
}

func (b *breakingBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= n
	return n, err
}

// A stream that breaks in the middle goes on after the last summary read
// (?after=), and the reconciliation ends as if nothing had happened.
func TestReconcile_BrokenStreamGoesOnAfterTheLastSummaryRead(t *testing.T) {
	t.Parallel()
	s := startService(t, nil)
	path, _ := writeCohort(t, cohort.Options{Accounts: 30, Seed: 31})
	if res, err := migrate.Run(context.Background(), config(s, path, t.TempDir())); err != nil || res.ExitCode() != 0 {
		t.Fatalf("run: exit %d, %v", res.ExitCode(), err)
	}
	target, _ := url.Parse(s.base)
	var mu sync.Mutex
	var queries []string
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if !strings.Contains(r.Request.URL.Path, "/reconciliation/") {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		queries = append(queries, r.Request.URL.RawQuery)
		if len(queries) == 1 {
			r.Body = &breakingBody{ReadCloser: r.Body, left: 3000}
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	defer front.Close()
	res, err := reconcile.Run(context.Background(), reconcile.Config{Cohort: path, BaseURL: front.URL, APIKey: s.key,
		ReportDir: t.TempDir(), Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode() != 0 || res.Matched != 30 || res.Extra != 0 || res.Missing != 0 {
		t.Errorf("result %+v, want 30 matched", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(queries) != 2 || queries[0] != "" || !strings.HasPrefix(queries[1], "after=S31-") {
		t.Errorf("requests %q, want a second one after the last summary read", queries)
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[max(0, len(lines)-n):]
}

// The six changes a migration team tried after an import, as a person
// reads them: a digest that differs is followed by the values that differ,
// at their paths, with the cohort's value and the service's (a note's body,
// a meter's serial number, a transaction's amount, a statement deleted);
// an account deleted and a ledger balance moved need no drill-down. The
// verdict names every report file with rows.
func TestReconcile_ADifferingDigestIsNamedAtItsPaths(t *testing.T) {
	t.Parallel()
	s := startService(t, nil)
	path, _ := cohortWithFullLines(t, cohort.Options{Accounts: 12, Seed: 9, NoPayments: true}, 1)
	runDir := runWhole(t, s, path)
	acct := func(i int) string { return "S9-000000" + string(rune('0'+i)) }
	exec := execer(t, s)
	id := `(SELECT id FROM accounts WHERE external_account_number = $1)`
	var tx struct {
		ID     string          `db:"transaction_id"`
		Amount decimal.Decimal `db:"amount"`
	}
	if err := s.db.Get(&tx, `SELECT transaction_id, amount FROM transactions WHERE id = (SELECT min(id) FROM transactions WHERE account_id = `+id+`)`, acct(3)); err != nil {
		t.Fatal(err)
	}
	exec(`UPDATE transactions SET amount = amount + 1 WHERE transaction_id = $1`, tx.ID)
	exec(`UPDATE notes SET body = 'Customer asked for e-mail bills.' WHERE body LIKE 'Customer asked%' AND account_id = `+id, "FULL-A")
	exec(`UPDATE meters SET serial_number = 'TAMPERED-1' WHERE id = (SELECT min(id) FROM meters WHERE account_id = `+id+`)`, "FULL-A")
	exec(`DELETE FROM historical_statements WHERE account_id = `+id, acct(6))
	exec(`DELETE FROM accounts WHERE external_account_number = $1`, acct(5))
	exec(`UPDATE ledgers SET balance = balance - 2.5 WHERE account_id = `+id, acct(4))

	dir := t.TempDir()
	rres, err := reconcile.Run(context.Background(), reconcile.Config{Cohort: path, BaseURL: s.base, APIKey: s.key,
		ReportDir: dir, Failures: runDir})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rres.WriteSummary(&out)
	t.Log("\n" + out.String())

	type row struct{ Account, Path, Cohort, Service string }
	var got []row
	for _, d := range readNDJSON[reconcile.Difference](t, filepath.Join(dir, reconcile.DiffNDJSON)) {
		got = append(got, row{d.ExternalAccountNumber, d.Path, string(d.Cohort), string(d.Service)})
	}
	// FULL-A sorts first; an account's values in the canonical form's
	// order (supply addresses before notes).
	want := []row{
		{"FULL-A", "supply_addresses.0.supply_points.0.meters.0.serial_number", `"E21Z012345"`, `"TAMPERED-1"`},
		{"FULL-A", "notes.1.body", `"Customer asked for paper bills until the end of 2025."`, `"Customer asked for e-mail bills."`},
		{acct(3), "transactions[" + tx.ID + "].amount", `"` + tx.Amount.StringFixed(2) + `"`, `"` + tx.Amount.Add(decimal.NewFromInt(1)).StringFixed(2) + `"`},
	}
	var stmt row
	if len(got) == len(want)+1 {
		stmt, got = got[len(got)-1], got[:len(got)-1]
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("differences (-want +got):\n%s", d)
	}
	// The deleted statement is the cohort's alone, whole.
	if stmt.Account != acct(6) || stmt.Path != "statements["+acct(6)+"-ST1]" || stmt.Service != "" ||
		!strings.HasPrefix(stmt.Cohort, `{"statement_id":"`+acct(6)+`-ST1","number":`) {
		t.Errorf("deleted statement: %+v", stmt)
	}
	// The CSV holds the same rows, strings without their quotes.
	raw, err := os.ReadFile(filepath.Join(dir, reconcile.DifferencesCSV))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s:\n%s", reconcile.DifferencesCSV, raw)
	if csvLines := strings.Split(string(raw), "\n"); len(csvLines) < 3 ||
		csvLines[0] != "external_account_number,path,cohort,service,line" ||
		csvLines[1] != "FULL-A,supply_addresses.0.supply_points.0.meters.0.serial_number,E21Z012345,TAMPERED-1,13" {
		t.Errorf("differences.csv:\n%s", raw)
	}

	if rres.DrilledDown != 3 || rres.DifferenceRows != 4 || rres.ExitCode() != 1 {
		t.Errorf("drilled down %d accounts, %d rows, exit %d; want 3, 4, 1", rres.DrilledDown, rres.DifferenceRows, rres.ExitCode())
	}
	wantVerdict := []string{
		"verdict: the cohort did NOT arrive whole (scope: the cohort's accounts)",
		"  " + filepath.Join(dir, "mismatches.csv") + ": 6 rows: 4 accounts in the service differ from their lines (unexpected)",
		"  " + filepath.Join(dir, "differences.csv") + ": 4 rows: the values that differ in 3 accounts whose content differs",
		"  " + filepath.Join(dir, "missing.csv") + ": 1 account of the cohort the service lacks: 1 not refused by the run (unexpected)",
	}
	if d := cmp.Diff(wantVerdict, lastLines(out.String(), len(wantVerdict))); d != "" {
		t.Errorf("verdict (-want +got):\n%s", d)
	}

	// With the drill-down off, the digest alone says so, and the verdict
	// says what was not read.
	rres, err = reconcile.Run(context.Background(), reconcile.Config{Cohort: path, BaseURL: s.base, APIKey: s.key,
		ReportDir: t.TempDir(), Failures: runDir, DrillDown: -1})
	if err != nil {
		t.Fatal(err)
	}
	if rres.DrilledDown != 0 || rres.NotDrilledDown != 3 || rres.DifferenceRows != 0 {
		t.Errorf("without drill-down: %d drilled, %d not, %d rows; want 0, 3, 0", rres.DrilledDown, rres.NotDrilledDown, rres.DifferenceRows)
	}

	// Capped at one account, it reads one and counts the others.
	rres, err = reconcile.Run(context.Background(), reconcile.Config{Cohort: path, BaseURL: s.base, APIKey: s.key,
		ReportDir: t.TempDir(), Failures: runDir, DrillDown: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rres.DrilledDown != 1 || rres.NotDrilledDown != 2 || rres.DifferenceRows == 0 {
		t.Errorf("drill-down of 1: %d drilled, %d not, %d rows; want 1, 2 and some", rres.DrilledDown, rres.NotDrilledDown, rres.DifferenceRows)
	}
}

// The migration guide's walk, on a service where Day one imported an
// account of the same supplier: the cohort arrives whole (exit 0), the
// verdict names the lines the run refused as expected and the supplier's
// other account as outside the scope. --scope supplier judges that account.
func TestReconcile_TheGuideWalkArrivesWholeBesideAnotherAccountOfTheSupplier(t *testing.T) {
	t.Parallel()
	s := startService(t, nil)
	// Day one's account, imported before the cohort.
	dayOne := filepath.Join(t.TempDir(), "day-one.ndjson")
	if err := os.WriteFile(dayOne, append(fullLine(t, "A-00012345"), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := migrate.Run(context.Background(), config(s, dayOne, t.TempDir())); err != nil || res.ExitCode() != 0 {
		t.Fatalf("day one: exit %d, %v", res.ExitCode(), err)
	}
	path, invalid := writeCohort(t, cohort.Options{Accounts: 40, Seed: 3, InvalidRate: 0.1})
	if len(invalid) == 0 {
		t.Fatal("the cohort has no invalid line: the test no longer covers the run's refusals")
	}
	runDir := t.TempDir()
	if res, err := migrate.Run(context.Background(), config(s, path, runDir)); err != nil || res.Failed != len(invalid) {
		t.Fatalf("run: %d failed, %v; want %d", res.Failed, err, len(invalid))
	}

	_, importctl := binaries(t)
	reconcileCmd := func(args ...string) (string, int) {
		t.Helper()
		cmd := osexec.Command(importctl, append([]string{"reconcile", path, "--url", s.base}, args...)...)
		cmd.Env = []string{"IMPORTCTL_API_KEY=" + s.key}
		out, err := cmd.Output()
		if ee, ok := err.(*osexec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	dir := t.TempDir()
	out, code := reconcileCmd("--report", dir, "--failures", runDir)
	t.Logf("importctl reconcile:\n%s", out)
	n := len(invalid)
	want := []string{
		"verdict: the cohort arrived whole (scope: the cohort's accounts)",
		"  " + filepath.Join(dir, "missing.csv") + ": " + strconv.Itoa(n) + " accounts of the cohort the service lacks: " +
			strconv.Itoa(n) + " refused by the run, as its failure report lists (expected)",
		"  " + filepath.Join(dir, "extra.csv") + ": 1 account of supplier DEMO that the cohort lacks (outside the scope, not judged; --scope supplier judges it)",
	}
	if d := cmp.Diff(want, lastLines(out, len(want))); d != "" || code != 0 {
		t.Errorf("the guide's walk: exit %d, want 0; verdict (-want +got):\n%s\n%s", code, d, out)
	}

	dir = t.TempDir()
	out, code = reconcileCmd("--report", dir, "--failures", runDir, "--scope", "supplier")
	want = []string{
		"verdict: the cohort did NOT arrive whole (scope: every account of supplier DEMO)",
		"  " + filepath.Join(dir, "missing.csv") + ": " + strconv.Itoa(n) + " accounts of the cohort the service lacks: " +
			strconv.Itoa(n) + " refused by the run, as its failure report lists (expected)",
		"  " + filepath.Join(dir, "extra.csv") + ": 1 account of supplier DEMO that the cohort lacks (unexpected)",
	}
	if d := cmp.Diff(want, lastLines(out, len(want))); d != "" || code != 1 {
		t.Errorf("--scope supplier: exit %d, want 1; verdict (-want +got):\n%s\n%s", code, d, out)
	}
	if _, code := reconcileCmd("--report", t.TempDir(), "--scope", "everything"); code != 2 {
		t.Errorf("--scope everything: exit %d, want 2", code)
	}
}

// runWhole runs the cohort at path through s and returns the run's report
// folder; unless every account succeeded, it fails the test with the run's
// summary and failures.
func runWhole(t *testing.T, s *service, path string) string {
	t.Helper()
	dir := t.TempDir()
	res, err := migrate.Run(context.Background(), config(s, path, dir))
	if err != nil || res.ExitCode() != 0 {
		logSummary(t, res)
		for _, f := range readFailures(t, dir) {
			t.Logf("failure: %+v", f)
		}
		t.Fatalf("run: %v", err)
	}
	return dir
}

// execer returns a function that runs a statement on s's database, as an
// incident would change it, failing the test when it fails.
func execer(t *testing.T, s *service) func(q string, args ...any) {
	return func(q string, args ...any) {
		t.Helper()
		if _, err := s.db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
