package progress

import (
	"context"
	"strings"
	"testing"
	"time"
)

// scaleBudget is the bound on the page's answer at a million accounts, short
// enough for a page that refreshes itself every 5 seconds; the summary is all of its database work.
const scaleBudget = 300 * time.Millisecond

// With 1,000,000 accounts for one supplier, and 1,000,000 more refused at
// staging, a summary, filtered or not and on a later page, answers within
// scaleBudget. The rows are inserted in their final states, through the
// triggers, so the counters are the ones the service would have kept. The plans are logged (go test -v) for the
// figure in docs/operating.md ("Migration progress page").
func TestSummarize_MillionAccountsAnswerWithinBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 1,000,000 accounts; run with make test-long")
	}
	t.Parallel()
	d, svc := seeded(t)
	ctx := context.Background()
	seeding := time.Now()
	start := seeding
	// 60% completed, 20% staged, 10% in progress, 10% failed with one of
	// twenty (code, attr) pairs; failures spread over the last 3 hours. One
	// statement, through the triggers: they run once per statement, over
	// its million rows at once.
	_, err := d.ExecContext(ctx, `
		INSERT INTO import_processes (supplier_id, external_account_number, payload, status,
			service_account_number, account_created_at, last_error, updated_at)
		SELECT s.id, 'M-' || lpad(i::text, 7, '0'), '{}',
			CASE WHEN i % 10 < 6 THEN 'COMPLETED' WHEN i % 10 = 6 THEN 'IN_PROGRESS' ELSE 'UNKNOWN' END,
			CASE WHEN i % 10 < 6 THEN 'A-' || lpad(to_hex(i), 8, '0') END,
			CASE WHEN i % 10 < 6 THEN now() - (i % 180) * interval '1 minute' END,
			CASE WHEN i % 10 = 9 THEN jsonb_build_object('code', 'account_failed_validation', 'detail', 'd',
				'errors', jsonb_build_array(jsonb_build_object('code', 'code_' || (i / 10) % 20, 'attr', 'customers.0.f' || (i / 10) % 20, 'detail', 'x'))) END,
			now() - (i % 180) * interval '1 minute'
		FROM import_suppliers s, generate_series(1, 1000000) i
		WHERE s.code = 'ACME'`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("inserted 1,000,000 accounts through the triggers in %v", time.Since(start).Round(time.Millisecond))
	// A bulk update of 100,000 of them, through the triggers as well.
	start = time.Now()
	if _, err := d.ExecContext(ctx, `UPDATE import_processes SET status = 'UNKNOWN', last_error = NULL
		WHERE status = 'IN_PROGRESS'`); err != nil {
		t.Fatal(err)
	}
	t.Logf("updated 100,000 through the triggers in %v", time.Since(start).Round(time.Millisecond))
	if _, err := d.ExecContext(ctx, `UPDATE import_processes SET status = 'IN_PROGRESS'
		WHERE external_account_number LIKE 'M-%6' AND status = 'UNKNOWN' AND last_error IS NULL`); err != nil {
		t.Fatal(err)
	}
	// 1,000,000 refused accounts, half at E3 and half at E4, with one of
	// twenty (code, attr) pairs of their own, refused over the same 3
	// hours. Their triggers run per row, so the statement leaves a counter
	// delta per row, which compaction (the worker's sweep) folds.
	start = time.Now()
	if _, err := d.ExecContext(ctx, `
		INSERT INTO staging_refusals (supplier_id, external_account_number, step, error, refused_at)
		SELECT s.id, 'R-' || lpad(i::text, 7, '0'), CASE WHEN i % 2 = 0 THEN 'validate' ELSE 'stage' END,
			jsonb_build_object('code', 'account_failed_validation', 'detail', 'd',
				'errors', jsonb_build_array(jsonb_build_object('code', 'refused_' || (i / 10) % 20, 'attr', 'customers.0.r' || (i / 10) % 20, 'detail', 'x'))),
			now() - (i % 180) * interval '1 minute'
		FROM import_suppliers s, generate_series(1, 1000000) i
		WHERE s.code = 'ACME'`); err != nil {
		t.Fatal(err)
	}
	t.Logf("inserted 1,000,000 refusals through the triggers in %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	folded, err := Compact(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted %d counter rows in %v", folded, time.Since(start).Round(time.Millisecond))
	// The compaction left as many dead counter rows, which the summaries
	// would visit until autovacuum removes them: once, after this bulk
	// load (the service writes a refusal per statement, and the sweep
	// folds a few deltas at a time). The budget is for the steady state.
	start = time.Now()
	if _, err := svc.Summarize(ctx, "ACME", Filter{}, all, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("summary before the dead counter rows are vacuumed: %v", time.Since(start).Round(time.Microsecond))
	if _, err := d.ExecContext(ctx, `VACUUM ANALYZE`); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded in %v", time.Since(seeding).Round(time.Millisecond))

	first, err := svc.Summarize(ctx, "ACME", Filter{}, all, false)
	if err != nil {
		t.Fatal(err)
	}
	if c := first.Supplier.Counts; c.Total != 1000014 || c.Failed != 100005 || c.Refused != 1000000 {
		t.Fatalf("counts %+v", c)
	}
	for _, f := range []Filter{
		{},
		{Before: first.Failed.Next},
		{Code: "code_7"},
		{Code: "code_7", Attr: "customers.0.f7"},
		{Code: "account_failed_validation"},
		{Code: "no_such_code"},
		{Code: "refused_7"},
		{Code: "refused_7", Attr: "customers.0.r7"},
	} {
		best := time.Hour
		for range 3 {
			start := time.Now()
			sum, err := svc.Summarize(ctx, "ACME", f, all, false)
			if err != nil {
				t.Fatal(err)
			}
			best = min(best, time.Since(start))
			if (f.Code == "code_7" || f.Code == "refused_7") && len(sum.Failed.Accounts) != PageSize {
				t.Fatalf("%+v: %d accounts", f, len(sum.Failed.Accounts))
			}
		}
		t.Logf("summary %+v: %v", f, best.Round(time.Microsecond))
		if best > scaleBudget {
			t.Errorf("summary %+v took %v, over %v", f, best, scaleBudget)
		}
	}
	for _, q := range []string{
		`SELECT state, sum(n) FROM progress_counts WHERE supplier_id = 1 GROUP BY state`,
		`SELECT id, external_account_number, updated_at, last_error FROM import_processes
		 WHERE supplier_id = 1 AND status = 'UNKNOWN' AND last_error IS NOT NULL
		   AND (last_error @> '{"errors":[{"code":"code_7"}]}' OR last_error @> '{"code":"code_7"}')
		 ORDER BY updated_at DESC, id DESC LIMIT 51`,
		`SELECT id, external_account_number, updated_at, last_error FROM import_processes
		 WHERE supplier_id = 1 AND status = 'UNKNOWN' AND last_error IS NOT NULL
		   AND (updated_at, id) < (now() - interval '1 hour', 500000)
		 ORDER BY updated_at DESC, id DESC LIMIT 51`,
		`SELECT id, external_account_number, refused_at, error FROM staging_refusals
		 WHERE supplier_id = 1
		   AND (error @> '{"errors":[{"code":"refused_7"}]}' OR error @> '{"code":"refused_7"}')
		 ORDER BY refused_at DESC, id DESC LIMIT 51`,
	} {
		var plan []string
		if err := d.SelectContext(ctx, &plan, `EXPLAIN (ANALYZE, BUFFERS OFF, COSTS OFF) `+q); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s\n%s", q, strings.Join(plan, "\n"))
	}
}
