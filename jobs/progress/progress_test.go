package progress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/problem"
	pt "github.com/bulkimport/bulkimport/jobs/progress/progresstest"
)

func all(string) bool { return true }

func seeded(t testing.TB) (*db.DB, *Service) {
	t.Helper()
	d := dbtest.New(t)
	pt.Seed(t, d)
	return d, New(d, nil)
}

func TestSummarize_CountsTheSeededCohortByState(t *testing.T) {
	t.Parallel()
	_, svc := seeded(t)
	sum, err := svc.Summarize(context.Background(), pt.Supplier, Filter{}, all, false)
	if err != nil {
		t.Fatal(err)
	}
	want := SupplierProgress{Code: pt.Supplier, Status: "Ongoing",
		Counts: Counts{Staged: 3, InProgress: 2, Completed: 4, Failed: 5, Total: 14, SkipMarks: 2}}
	if diff := cmp.Diff(want, sum.Supplier); diff != "" {
		t.Errorf("supplier (-want +got):\n%s", diff)
	}
	wantTop := []ErrorCount{
		{Code: pt.CodePhone, Attr: pt.AttrPhone, Accounts: 3},
		{Code: problem.CodeInternal, Attr: "", Accounts: 1},
		{Code: pt.CodePostcode, Attr: pt.AttrPostcode, Accounts: 1},
		{Code: pt.CodeTariff, Attr: pt.AttrTariff, Accounts: 1},
	}
	if diff := cmp.Diff(wantTop, sum.TopErrors); diff != "" {
		t.Errorf("top errors (-want +got):\n%s", diff)
	}
	checkMinutes(t, sum.PerMinute, time.Now())
	var completed, failed int64
	for _, m := range sum.PerMinute {
		completed += m.Completed
		failed += m.Failed
	}
	if completed != 4 || failed != 6 {
		t.Errorf("per minute: %d completed and %d failures over the window, want 4 and 6", completed, failed)
	}
	if sum.Queue != nil {
		t.Errorf("queue without withQueue: %+v", sum.Queue)
	}
}

func TestSummarize_FailedAccountsNewestFirstAndFilteredByCode(t *testing.T) {
	t.Parallel()
	_, svc := seeded(t)
	type row struct{ EAN, Code, Attr string }
	cases := []struct {
		name   string
		filter Filter
		want   []row
	}{
		{"no filter", Filter{}, []row{
			{"ACME-F5", problem.CodeInternal, ""}, {"ACME-F4", pt.CodeTariff, pt.AttrTariff},
			{"ACME-F3", pt.CodePhone, pt.AttrPhone}, {"ACME-F2", pt.CodePhone, pt.AttrPhone},
			{"ACME-F1", pt.CodePhone, pt.AttrPhone}}},
		{"field code shows the matching error", Filter{Code: pt.CodePostcode}, []row{{"ACME-F1", pt.CodePostcode, pt.AttrPostcode}}},
		{"code and attr", Filter{Code: pt.CodePhone, Attr: pt.AttrPhone}, []row{
			{"ACME-F3", pt.CodePhone, pt.AttrPhone}, {"ACME-F2", pt.CodePhone, pt.AttrPhone}, {"ACME-F1", pt.CodePhone, pt.AttrPhone}}},
		{"an earlier failure of a retried account does not match", Filter{Code: pt.CodeTariff}, []row{{"ACME-F4", pt.CodeTariff, pt.AttrTariff}}},
		{"top-level code of an error without field errors", Filter{Code: problem.CodeInternal}, []row{{"ACME-F5", problem.CodeInternal, ""}}},
		{"attr of another code", Filter{Code: pt.CodePhone, Attr: pt.AttrPostcode}, nil},
		{"another supplier's code", Filter{Code: pt.CodeOther}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sum, err := svc.Summarize(context.Background(), pt.Supplier, tc.filter, all, false)
			if err != nil {
				t.Fatal(err)
			}
			var got []row
			for _, a := range sum.Failed.Accounts {
				got = append(got, row{a.ExternalAccountNumber, a.Code, a.Attr})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("failed accounts (-want +got):\n%s", diff)
			}
			if sum.Failed.Next != "" {
				t.Errorf("next cursor on the only page: %q", sum.Failed.Next)
			}
		})
	}
}

func TestSummarize_FailedAccountsArePagedWithTheCursor(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO import_suppliers (code) VALUES ('BIG')`,
		// One failure time for all: the cursor must order by id within it.
		`INSERT INTO import_processes (supplier_id, external_account_number, payload)
		 SELECT s.id, 'BIG-' || lpad(i::text, 4, '0'), '{}' FROM import_suppliers s, generate_series(1, 120) i`,
		`UPDATE import_processes SET last_error = '{"code":"x","detail":"d","errors":[]}', updated_at = '2026-01-01T00:00:00Z'`,
	} {
		if _, err := d.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	svc := New(d, nil)
	var seen []string
	before := ""
	for pages := 0; ; pages++ {
		sum, err := svc.Summarize(ctx, "BIG", Filter{Before: before}, all, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range sum.Failed.Accounts {
			seen = append(seen, a.ExternalAccountNumber)
		}
		if before = sum.Failed.Next; before == "" {
			if pages != 2 {
				t.Errorf("%d pages, want 3", pages+1)
			}
			break
		}
	}
	var want []string
	for i := 120; i >= 1; i-- {
		want = append(want, fmt.Sprintf("BIG-%04d", i))
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("accounts over the pages (-want +got):\n%s", diff)
	}
}

func TestSummarize_SupplierOutOfScopeIsNotFound(t *testing.T) {
	t.Parallel()
	_, svc := seeded(t)
	onlyOther := func(c string) bool { return c == pt.Other }
	for _, code := range []string{pt.Supplier, "NOPE"} {
		_, err := svc.Summarize(context.Background(), code, Filter{}, onlyOther, false)
		if p, ok := problem.As(err); !ok || p.Kind != problem.NotFound || p.Code != "import_supplier_not_found" {
			t.Errorf("%s: %v, want NotFound import_supplier_not_found", code, err)
		}
	}
	list, err := svc.Suppliers(context.Background(), onlyOther)
	if err != nil {
		t.Fatal(err)
	}
	want := []SupplierProgress{{Code: pt.Other, Status: "Paused", Counts: Counts{Completed: 1, Failed: 1, Total: 2}}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("suppliers (-want +got):\n%s", diff)
	}
}

func TestSummarize_BadFilterIsInvalidAndNamesTheParameter(t *testing.T) {
	t.Parallel()
	_, svc := seeded(t)
	cases := []struct {
		name   string
		filter Filter
		attr   string
	}{
		{"cursor not a cursor", Filter{Before: "yesterday"}, "before"},
		{"cursor with a zero id", Filter{Before: "1.0"}, "before"},
		{"cursor past year 9999", Filter{Before: "999999999999999999.1"}, "before"},
		{"code with NUL", Filter{Code: "a\x00b"}, "code"},
		{"code not UTF-8", Filter{Code: "\xff"}, "code"},
		{"attr without code", Filter{Attr: "x"}, "attr"},
		{"code too long", Filter{Code: string(make([]byte, 201))}, "code"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := svc.Summarize(context.Background(), pt.Supplier, tc.filter, all, false)
			p, ok := problem.As(err)
			if !ok || p.Kind != problem.Invalid || len(p.Errors) != 1 || p.Errors[0].Attr != tc.attr || p.Errors[0].Code != "invalid" {
				t.Errorf("got %v, want one invalid error at %s", err, tc.attr)
			}
		})
	}
}

// recount is what the counters must equal: the states counted from the
// table itself.
func recount(t *testing.T, d *db.DB) map[string]int64 {
	t.Helper()
	var rows []struct {
		State string `db:"state"`
		N     int64  `db:"n"`
	}
	if err := d.Select(&rows, `SELECT progress_state(status, last_error) AS state, count(*) AS n FROM import_processes GROUP BY 1`); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, r := range rows {
		out[r.State] = r.N
	}
	return out
}

func counters(t *testing.T, d *db.DB) map[string]int64 {
	t.Helper()
	var rows []struct {
		State string `db:"state"`
		N     int64  `db:"n"`
	}
	if err := d.Select(&rows, `SELECT state, sum(n) AS n FROM progress_counts GROUP BY 1 HAVING sum(n) <> 0`); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, r := range rows {
		out[r.State] = r.N
	}
	return out
}

// Concurrent status changes, some of them rolled back, leave the counters
// equal to a recount: each change is counted once, in its own transaction.
func TestCounters_ConcurrentChangesAndRollbacksMatchARecount(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	d.SetMaxOpenConns(16)
	ctx := context.Background()
	if _, err := d.Exec(`INSERT INTO import_suppliers (code) VALUES ('RACE')`); err != nil {
		t.Fatal(err)
	}
	errRollback := errors.New("roll back")
	var wg sync.WaitGroup
	errs := make(chan error, 16*25*4)
	for w := range 16 {
		wg.Go(func() {
			for i := range 25 {
				ean := fmt.Sprintf("R-%d-%d", w, i)
				var id int64
				if err := d.GetContext(ctx, &id, `INSERT INTO import_processes (supplier_id, external_account_number, payload)
					SELECT id, $1, '{}' FROM import_suppliers WHERE code = 'RACE' RETURNING id`, ean); err != nil {
					errs <- err
					return
				}
				steps := []string{`UPDATE import_processes SET status = 'IN_PROGRESS' WHERE id = $1`}
				switch i % 3 {
				case 0:
					steps = append(steps, `UPDATE import_processes SET status = 'COMPLETED', service_account_number = 'A-' || lpad(to_hex($1::int), 8, '0') WHERE id = $1`)
				case 1:
					steps = append(steps, `UPDATE import_processes SET status = 'UNKNOWN', last_error = '{"code":"c","errors":[{"code":"e","attr":"a"}]}' WHERE id = $1`)
				}
				for _, q := range steps {
					if _, err := d.ExecContext(ctx, q, id); err != nil {
						errs <- err
						return
					}
				}
				// A completion that rolls back counts nothing.
				tx, err := d.BeginTxx(ctx, nil)
				if err != nil {
					errs <- err
					return
				}
				if _, err := tx.ExecContext(ctx, `UPDATE import_processes SET status = 'COMPLETED' WHERE id = $1`, id); err != nil {
					errs <- err
				}
				if err := tx.Rollback(); err != nil && !errors.Is(err, errRollback) {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := recount(t, d)
	if diff := cmp.Diff(want, counters(t, d)); diff != "" {
		t.Errorf("counters against a recount (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{"in_progress": 128, "completed": 144, "failed": 128}, want); diff != "" {
		t.Errorf("recount (-want +got):\n%s", diff)
	}
	var errCount int64
	if err := d.Get(&errCount, `SELECT sum(n) FROM progress_errors WHERE code = 'e' AND attr = 'a'`); err != nil || errCount != want["failed"] {
		t.Errorf("error counter: %d (%v), want %d", errCount, err, want["failed"])
	}
}

// Staging again changes only the payload: the counters stay as they were.
func TestCounters_RestagingCountsNothing(t *testing.T) {
	t.Parallel()
	d, _ := seeded(t)
	before := counters(t, d)
	if _, err := d.Exec(`UPDATE import_processes SET payload = '{"again": true}', updated_at = now() WHERE status = 'UNKNOWN'`); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, counters(t, d)); diff != "" {
		t.Errorf("counters after restaging (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(recount(t, d), counters(t, d)); diff != "" {
		t.Errorf("counters against a recount (-want +got):\n%s", diff)
	}
}

// progress_rebuild, which the migration runs, counts what the triggers
// counted as the cohort was processed, refused accounts included.
func TestCounters_RebuildMatchesWhatTheTriggersKept(t *testing.T) {
	t.Parallel()
	d, svc := seeded(t)
	pt.SeedRefusals(t, d)
	ctx := context.Background()
	before, err := svc.Summarize(ctx, pt.Supplier, Filter{}, all, false)
	if err != nil {
		t.Fatal(err)
	}
	if c := before.Supplier.Counts; c.Refused != 1 || c.RefusedNotOngoing != 1 {
		t.Fatalf("refused accounts counted by the triggers: %d, and %d while not Ongoing; want 1 and 1", c.Refused, c.RefusedNotOngoing)
	}
	if _, err := d.Exec(`SELECT progress_rebuild()`); err != nil {
		t.Fatal(err)
	}
	after, err := svc.Summarize(ctx, pt.Supplier, Filter{}, all, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before.Supplier, after.Supplier); diff != "" {
		t.Errorf("counts (-triggers +rebuild):\n%s", diff)
	}
	if diff := cmp.Diff(before.TopErrors, after.TopErrors); diff != "" {
		t.Errorf("top errors (-triggers +rebuild):\n%s", diff)
	}
}

// Status changes of one supplier in many backends at once do not wait on
// each other's counters: each of 17 open transactions (more than the 16
// counter slots of migration 00015, so two of them shared a slot there)
// completes a process and stays open while the next one does the same
// under a lock_timeout. Once they commit, the counters match a recount.
func TestCounters_OpenTransactionsDoNotWaitOnEachOther(t *testing.T) {
	t.Parallel()
	const backends = 17
	d := dbtest.New(t)
	d.SetMaxOpenConns(backends + 1)
	ctx := context.Background()
	if _, err := d.Exec(`INSERT INTO import_suppliers (code) VALUES ('WAIT')`); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	if err := d.Select(&ids, `INSERT INTO import_processes (supplier_id, external_account_number, payload)
		SELECT s.id, 'W-' || i, '{}' FROM import_suppliers s, generate_series(1, $1) i WHERE s.code = 'WAIT'
		RETURNING id`, backends); err != nil {
		t.Fatal(err)
	}
	var txs []*db.Tx
	defer func() {
		for _, tx := range txs {
			_ = tx.Rollback()
		}
	}()
	for i, id := range ids {
		tx, err := d.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		txs = append(txs, tx)
		steps := []string{
			`SET LOCAL lock_timeout = '2s'`,
			`UPDATE import_processes SET status = 'IN_PROGRESS' WHERE id = $1`,
			`UPDATE import_processes SET status = 'COMPLETED', account_created_at = now(),
				service_account_number = 'A-' || lpad(to_hex($1::int), 8, '0') WHERE id = $1`,
		}
		if i%2 == 1 { // a failure instead: the error counters and the failed minute
			steps[2] = `UPDATE import_processes SET status = 'UNKNOWN',
				last_error = '{"code":"c","errors":[{"code":"e","attr":"a"}]}' WHERE id = $1`
		}
		for _, q := range steps {
			args := []any{id}
			if !strings.Contains(q, "$1") {
				args = nil
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				t.Fatalf("transaction %d of %d open, %q: %v", i+1, backends, q, err)
			}
		}
	}
	// A compaction meanwhile neither waits for them nor folds their deltas.
	if _, err := Compact(ctx, d); err != nil {
		t.Fatal(err)
	}
	for _, tx := range txs {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	txs = nil
	if diff := cmp.Diff(recount(t, d), counters(t, d)); diff != "" {
		t.Errorf("counters against a recount (-want +got):\n%s", diff)
	}
	var minute struct {
		Completed int64 `db:"completed"`
		Failed    int64 `db:"failed"`
	}
	if err := d.Get(&minute, `SELECT sum(completed) AS completed, sum(failed) AS failed FROM progress_minutes`); err != nil {
		t.Fatal(err)
	}
	if want := (struct {
		Completed int64 `db:"completed"`
		Failed    int64 `db:"failed"`
	}{9, 8}); minute != want {
		t.Errorf("per-minute sums %+v, want %+v", minute, want)
	}
}

// Statements that change many processes at once (insert, update in several
// states, delete, and the same again rolled back) keep the counters equal
// to a recount, and compaction folds them into one row per key without
// changing any sum.
func TestCounters_BulkStatementsMatchARecountAndCompact(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	if _, err := d.Exec(`INSERT INTO import_suppliers (code) VALUES ('BULK1'), ('BULK2')`); err != nil {
		t.Fatal(err)
	}
	statements := []string{
		`INSERT INTO import_processes (supplier_id, external_account_number, payload)
			SELECT s.id, s.code || '-' || i, '{}' FROM import_suppliers s, generate_series(1, 3000) i`,
		`UPDATE import_processes SET status = 'IN_PROGRESS' WHERE id % 3 <> 0`,
		`UPDATE import_processes SET status = 'COMPLETED', account_created_at = now(),
			service_account_number = 'A-' || lpad(to_hex(id), 8, '0') WHERE id % 3 = 1`,
		`UPDATE import_processes SET status = 'UNKNOWN',
			last_error = jsonb_build_object('code', 'c', 'errors', jsonb_build_array(
				jsonb_build_object('code', 'e' || id % 4, 'attr', 'a'), jsonb_build_object('code', 'e' || id % 4, 'attr', 'a')))
			WHERE id % 3 = 2`,
		// A new error for some failed ones, restaging for others.
		`UPDATE import_processes SET last_error = '{"code":"other"}' WHERE id % 3 = 2 AND id % 4 = 0`,
		`UPDATE import_processes SET payload = '{"again": true}' WHERE status = 'UNKNOWN'`,
		`DELETE FROM import_processes WHERE id % 5 = 0`,
	}
	for _, q := range statements {
		if _, err := d.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		tx, err := d.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE import_processes SET status = 'COMPLETED' WHERE id % 7 = 0`); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	type errorRow struct {
		Supplier int64  `db:"supplier_id"`
		Code     string `db:"code"`
		Attr     string `db:"attr"`
		N        int64  `db:"n"`
	}
	errorCounters := func() []errorRow {
		var rows []errorRow
		if err := d.Select(&rows, `SELECT supplier_id, code, attr, sum(n) AS n FROM progress_errors
			GROUP BY 1, 2, 3 HAVING sum(n) <> 0 ORDER BY 1, 2, 3`); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	var wantErrors []errorRow
	if err := d.Select(&wantErrors, `SELECT p.supplier_id, e.code, e.attr, count(*) AS n
		FROM import_processes p, progress_error_pairs(p.last_error) e
		WHERE progress_state(p.status, p.last_error) = 'failed' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`); err != nil {
		t.Fatal(err)
	}
	var minutes struct {
		Completed int64 `db:"completed"`
		Failed    int64 `db:"failed"`
	}
	// Completions: 2,000; failures: 2,000 recorded, then a new error for
	// the 1,000 whose id is also a multiple of 4 (ids 1 to 6,000).
	wantMinutes := minutes
	wantMinutes.Completed, wantMinutes.Failed = 2000, 2500
	for _, stage := range []string{"deltas", "compacted"} {
		if diff := cmp.Diff(recount(t, d), counters(t, d)); diff != "" {
			t.Errorf("%s: counters against a recount (-want +got):\n%s", stage, diff)
		}
		if diff := cmp.Diff(wantErrors, errorCounters()); diff != "" {
			t.Errorf("%s: error counters against a recount (-want +got):\n%s", stage, diff)
		}
		if err := d.Get(&minutes, `SELECT sum(completed) AS completed, sum(failed) AS failed FROM progress_minutes`); err != nil {
			t.Fatal(err)
		}
		if minutes != wantMinutes {
			t.Errorf("%s: per-minute sums %+v, want %+v", stage, minutes, wantMinutes)
		}
		if n, err := Compact(ctx, d); err != nil || n == 0 && stage == "deltas" {
			t.Fatalf("%s: compact folded %d rows (%v)", stage, n, err)
		}
	}
	// Nothing changed since: a compaction folds nothing and rewrites no row.
	if n, err := Compact(ctx, d); err != nil || n != 0 {
		t.Errorf("a second compaction folded %d rows (%v), want 0", n, err)
	}
	if n := len(counters(t, d)); n != 3 { // staged, completed and failed
		t.Errorf("%d states counted, want 3", n)
	}
	var rows, keys int
	if err := d.Get(&rows, `SELECT count(*) FROM progress_counts`); err != nil {
		t.Fatal(err)
	}
	if err := d.Get(&keys, `SELECT count(DISTINCT (supplier_id, state)) FROM progress_counts`); err != nil {
		t.Fatal(err)
	}
	if rows != keys {
		t.Errorf("after compaction %d counter rows for %d keys", rows, keys)
	}
}

// checkMinutes fails unless ms is one point per minute, without a gap, at
// least MinWindow long, and ends at the minute of now (or the one before,
// should the minute turn during the test).
func checkMinutes(t *testing.T, ms []Minute, now time.Time) {
	t.Helper()
	if len(ms) < int(MinWindow/time.Minute) {
		t.Fatalf("per minute: %d points, want at least %v", len(ms), MinWindow.Minutes())
	}
	for i := 1; i < len(ms); i++ {
		if d := ms[i].Minute.Sub(ms[i-1].Minute); d != time.Minute {
			t.Fatalf("per minute: point %d is %v after the one before, want a minute", i, d)
		}
	}
	if end := ms[len(ms)-1].Minute; now.Sub(end) < 0 || now.Sub(end) >= 2*time.Minute {
		t.Errorf("per minute: ends at %v, want the minute of %v", end, now)
	}
}

// The chart starts at the supplier's first minute with progress (within a
// day), so that a run of some hours fills it; progress older than a day is
// left out, and a supplier without progress gets MinWindow of axis.
func TestSummarize_PerMinuteStartsAtTheFirstProgressWithinADay(t *testing.T) {
	t.Parallel()
	d, svc := seeded(t)
	now := time.Now()
	for _, ago := range []time.Duration{10 * time.Hour, 30 * time.Hour} {
		if _, err := d.Exec(`INSERT INTO progress_minutes (supplier_id, minute, completed, failed)
			SELECT id, date_trunc('minute', now() - $2::interval), 7, 0 FROM import_suppliers WHERE code = $1`,
			pt.Supplier, fmt.Sprintf("%d seconds", int(ago.Seconds()))); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := svc.Summarize(context.Background(), pt.Supplier, Filter{}, all, false)
	if err != nil {
		t.Fatal(err)
	}
	checkMinutes(t, sum.PerMinute, now)
	if first := sum.PerMinute[0]; first.Completed != 7 || now.Sub(first.Minute) < 10*time.Hour-time.Minute || now.Sub(first.Minute) > 10*time.Hour+time.Minute {
		t.Errorf("first point %+v, want the 7 completed of 10 hours ago", first)
	}
	var completed int64
	for _, m := range sum.PerMinute {
		completed += m.Completed
	}
	if completed != 4+7 {
		t.Errorf("%d completed over the chart, want the seeded 4 and the 7 of 10 hours ago (not the 7 of 30 hours ago)", completed)
	}

	fresh := dbtest.New(t)
	if _, err := fresh.Exec(`INSERT INTO import_suppliers (code) VALUES ('NEW')`); err != nil {
		t.Fatal(err)
	}
	sum, err = New(fresh, nil).Summarize(context.Background(), "NEW", Filter{}, all, false)
	if err != nil {
		t.Fatal(err)
	}
	checkMinutes(t, sum.PerMinute, time.Now())
	if len(sum.PerMinute) != int(MinWindow/time.Minute) {
		t.Errorf("a supplier without progress: %d points, want %v", len(sum.PerMinute), MinWindow.Minutes())
	}
}

// The counters' trigger runs one statement for each statement of the usual
// path: an account staged (an INSERT ... ON CONFLICT that inserts fires the
// INSERT trigger and the UPDATE trigger, whose transition tables are empty)
// and its IN_PROGRESS mark. Each statement a trigger runs costs executor
// start-up on every staging and every mark (migration 00049). Counted with
// pg_stat_statements, which tracks statements run inside functions with
// pg_stat_statements.track = all; the server loads it at start, as
// deploy/local/stack.sh starts it.
func TestCounters_StagingAndMarkRunOneTriggerStatementEach(t *testing.T) {
	t.Parallel()
	d, _ := seeded(t)
	ctx := context.Background()
	conn, err := d.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`,
		`SET pg_stat_statements.track = 'all'`,
		`SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)`,
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v (the server must load pg_stat_statements: deploy/local/stack.sh down, then up)", q, err)
		}
	}
	var id int64
	err = conn.GetContext(ctx, &id, `INSERT INTO import_processes AS p (supplier_id, external_account_number, payload)
		SELECT id, 'ACME-NEW', '{}' FROM import_suppliers WHERE code = $1
		ON CONFLICT (supplier_id, external_account_number) DO UPDATE SET payload = EXCLUDED.payload
		RETURNING id`, pt.Supplier)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `UPDATE import_processes SET status = 'IN_PROGRESS', task_id = 't', updated_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	var nested []struct {
		Query string `db:"query"`
		Calls int64  `db:"calls"`
	}
	err = conn.SelectContext(ctx, &nested, `SELECT query, calls FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND NOT toplevel
			AND query LIKE '%progress_%'`) // the trigger's statements, not the foreign keys' checks
	if err != nil {
		t.Fatal(err)
	}
	var calls int64
	for _, n := range nested {
		calls += n.Calls
	}
	// Three trigger runs (INSERT, the empty UPDATE, the mark): one statement each.
	if calls != 3 {
		t.Errorf("the counters' trigger ran %d statements for a staging and a mark, want 3: %+v", calls, nested)
	}
	if diff := cmp.Diff(recount(t, d), counters(t, d)); diff != "" {
		t.Errorf("counters against a recount (-want +got):\n%s", diff)
	}
}
