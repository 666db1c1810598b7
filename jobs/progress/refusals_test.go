package progress

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/imports"
	"github.com/bulkimport/bulkimport/jobs/problem"
	pt "github.com/bulkimport/bulkimport/jobs/progress/progresstest"
)

// Accounts refused at staging are counted apart from the processes' total,
// are among the top errors, and are listed with the failed processes, with
// their step and without a task; another supplier's never show. A refusal
// because the supplier was not Ongoing (ACME-R2) is the supplier's, and is
// counted apart from the accounts' own refusals (migration 00056).
func TestSummarize_RefusedAccountsAreCountedListedAndAmongTheTopErrors(t *testing.T) {
	t.Parallel()
	d, svc := seeded(t)
	pt.SeedRefusals(t, d)
	ctx := context.Background()
	sum, err := svc.Summarize(ctx, pt.Supplier, Filter{}, all, false)
	if err != nil {
		t.Fatal(err)
	}
	want := SupplierProgress{Code: pt.Supplier, Status: "Ongoing",
		Counts: Counts{Staged: 3, InProgress: 2, Completed: 4, Failed: 5, Total: 14, Refused: 1, RefusedNotOngoing: 1, SkipMarks: 2}}
	if diff := gocmp.Diff(want, sum.Supplier); diff != "" {
		t.Errorf("supplier (-want +got):\n%s", diff)
	}
	wantTop := []ErrorCount{
		{Code: pt.CodePhone, Attr: pt.AttrPhone, Accounts: 4},
		{Code: pt.CodeNotOngoing, Attr: pt.AttrNotOngoing, Accounts: 1},
		{Code: problem.CodeInternal, Attr: "", Accounts: 1},
		{Code: pt.CodePostcode, Attr: pt.AttrPostcode, Accounts: 1},
		{Code: pt.CodeTariff, Attr: pt.AttrTariff, Accounts: 1},
	}
	if diff := gocmp.Diff(wantTop, sum.TopErrors); diff != "" {
		t.Errorf("top errors (-want +got):\n%s", diff)
	}

	type row struct{ EAN, Step, Code, Attr, TaskID string }
	process := func(ean, code, attr string) row {
		return row{ean, StepProcess, code, attr, jobs.AccountTaskID(pt.Supplier, ean, false)}
	}
	cases := []struct {
		name   string
		filter Filter
		want   []row
	}{
		{"no filter: refusals are the newest", Filter{}, []row{
			{"ACME-R2", imports.StepStage, pt.CodeNotOngoing, pt.AttrNotOngoing, ""},
			{"ACME-R1", imports.StepValidate, pt.CodePhone, pt.AttrPhone, ""},
			process("ACME-F5", problem.CodeInternal, ""), process("ACME-F4", pt.CodeTariff, pt.AttrTariff),
			process("ACME-F3", pt.CodePhone, pt.AttrPhone), process("ACME-F2", pt.CodePhone, pt.AttrPhone),
			process("ACME-F1", pt.CodePhone, pt.AttrPhone)}},
		{"a refusal's code", Filter{Code: pt.CodeNotOngoing}, []row{
			{"ACME-R2", imports.StepStage, pt.CodeNotOngoing, pt.AttrNotOngoing, ""}}},
		{"a code of both", Filter{Code: pt.CodePhone, Attr: pt.AttrPhone}, []row{
			{"ACME-R1", imports.StepValidate, pt.CodePhone, pt.AttrPhone, ""},
			process("ACME-F3", pt.CodePhone, pt.AttrPhone), process("ACME-F2", pt.CodePhone, pt.AttrPhone),
			process("ACME-F1", pt.CodePhone, pt.AttrPhone)}},
		{"a refusal's top-level code", Filter{Code: "account_failed_validation"}, []row{
			{"ACME-R1", imports.StepValidate, pt.CodePhone, pt.AttrPhone, ""},
			process("ACME-F4", pt.CodeTariff, pt.AttrTariff),
			process("ACME-F3", pt.CodePhone, pt.AttrPhone), process("ACME-F2", pt.CodePhone, pt.AttrPhone),
			process("ACME-F1", pt.CodePhone, pt.AttrPhone)}},
		{"another supplier's refusal", Filter{Code: pt.CodeOther}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sum, err := svc.Summarize(ctx, pt.Supplier, tc.filter, all, false)
			if err != nil {
				t.Fatal(err)
			}
			var got []row
			for _, a := range sum.Failed.Accounts {
				got = append(got, row{a.ExternalAccountNumber, a.Step, a.Code, a.Attr, a.TaskID})
				if a.FailedAt.IsZero() {
					t.Errorf("%s: no time", a.ExternalAccountNumber)
				}
			}
			if diff := gocmp.Diff(tc.want, got); diff != "" {
				t.Errorf("failed accounts (-want +got):\n%s", diff)
			}
		})
	}

	onlyOther := func(c string) bool { return c == pt.Other }
	list, err := svc.Suppliers(ctx, onlyOther)
	if err != nil {
		t.Fatal(err)
	}
	wantOther := []SupplierProgress{{Code: pt.Other, Status: "Paused", Counts: Counts{Completed: 1, Failed: 1, Total: 2, Refused: 1}}}
	if diff := gocmp.Diff(wantOther, list); diff != "" {
		t.Errorf("suppliers (-want +got):\n%s", diff)
	}
}

// The failed accounts are paged across both sources by one cursor: every
// failed process and refused account once, newest first, also when many
// share a time (refusals first, then by id, newest first).
func TestSummarize_FailedAndRefusedAccountsArePagedTogether(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	const at = "2026-01-01T00:00:00Z"
	for _, q := range []string{
		`INSERT INTO import_suppliers (code) VALUES ('BIG')`,
		// 70 failed processes: 60 at the shared time, 10 a second before.
		`INSERT INTO import_processes (supplier_id, external_account_number, payload)
		 SELECT s.id, 'BIG-P' || lpad(i::text, 3, '0'), '{}' FROM import_suppliers s, generate_series(1, 70) i`,
		`UPDATE import_processes SET last_error = '{"code":"x","detail":"d","errors":[]}',
			updated_at = CASE WHEN external_account_number <= 'BIG-P060' THEN '` + at + `'::timestamptz
				ELSE '` + at + `'::timestamptz - interval '1 second' END`,
		// 70 refused accounts: 60 at the shared time, 10 a second after.
		`INSERT INTO staging_refusals (supplier_id, external_account_number, step, error, refused_at)
		 SELECT s.id, 'BIG-R' || lpad(i::text, 3, '0'), 'stage', '{"code":"y","detail":"d","errors":[]}',
			CASE WHEN i <= 60 THEN '` + at + `'::timestamptz ELSE '` + at + `'::timestamptz + interval '1 second' END
		 FROM import_suppliers s, generate_series(1, 70) i`,
	} {
		if _, err := d.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	type key struct {
		at  time.Time
		src int
		id  int64
		ean string
	}
	var keys []key
	for _, src := range []struct {
		src int
		q   string
	}{
		{srcProcess, `SELECT updated_at, id, external_account_number FROM import_processes`},
		{srcRefusal, `SELECT refused_at, id, external_account_number FROM staging_refusals`},
	} {
		rows, err := d.QueryContext(ctx, src.q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			k := key{src: src.src}
			if err := rows.Scan(&k.at, &k.id, &k.ean); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(b.at.Compare(a.at), cmp.Compare(b.src, a.src), cmp.Compare(b.id, a.id))
	})
	var want []string
	for _, k := range keys {
		want = append(want, k.ean)
	}

	svc := New(d, nil)
	for _, filter := range []Filter{{}, {Code: "x"}, {Code: "y"}} {
		var seen []string
		before := ""
		for pages := 1; ; pages++ {
			if pages > 10 {
				t.Fatalf("%+v: more than 10 pages", filter)
			}
			sum, err := svc.Summarize(ctx, "BIG", Filter{Code: filter.Code, Before: before}, all, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range sum.Failed.Accounts {
				seen = append(seen, a.ExternalAccountNumber)
			}
			if before = sum.Failed.Next; before == "" {
				break
			}
		}
		wantHere := slices.DeleteFunc(slices.Clone(want), func(ean string) bool {
			return filter.Code == "x" && ean[4] != 'P' || filter.Code == "y" && ean[4] != 'R'
		})
		if diff := gocmp.Diff(wantHere, seen); diff != "" {
			t.Errorf("filter %+v: accounts over the pages (-want +got):\n%s", filter, diff)
		}
	}
	if want[0] != "BIG-R070" || want[10] != "BIG-R060" || want[70] != "BIG-P060" || want[139] != "BIG-P061" {
		t.Errorf("the expected order is not the one the test means: %v", want)
	}
}

// A refusal cursor past year 9999 or with a zero id is refused like a
// process cursor.
func TestSummarize_RefusalCursorIsCheckedLikeAProcessCursor(t *testing.T) {
	t.Parallel()
	_, svc := seeded(t)
	for _, before := range []string{"1.r0", "999999999999999999.r1", "1.r", "1.rx"} {
		_, err := svc.Summarize(context.Background(), pt.Supplier, Filter{Before: before}, all, false)
		p, ok := problem.As(err)
		if !ok || p.Kind != problem.Invalid || len(p.Errors) != 1 || p.Errors[0].Attr != "before" {
			t.Errorf("before %q: %v, want one invalid error at before", before, err)
		}
	}
	sum, err := svc.Summarize(context.Background(), pt.Supplier, Filter{Before: fmt.Sprintf("%d.r1", time.Now().Add(time.Hour).UnixMicro())}, all, false)
	if err != nil || len(sum.Failed.Accounts) != 5 {
		t.Errorf("a refusal cursor after every failure: %v, %d accounts, want the 5 failed", err, len(sum.Failed.Accounts))
	}
}

// A page of failed accounts reads from the database only what its rows
// show: the shown error's texts, cut to the bounds of a stored refusal,
// and the count of the others, the ones a bounded refusal left out among
// them. A row stored whole before refusals were bounded, or a process's
// record, is no longer read whole.
func TestSummarize_AFailedAccountReadsOnlyWhatItShows(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	pt.Seed(t, d)
	svc := New(d, nil)
	ctx := context.Background()
	huge := strings.Repeat("x", 1<<20)
	var errs []problem.FieldError
	for i := range 30 {
		errs = append(errs, problem.FieldError{Code: fmt.Sprintf("code_%d", i), Attr: fmt.Sprintf("f%d.", i) + huge, Detail: huge})
	}
	whole, _ := json.Marshal(problem.Record{Code: "account_failed_validation", Detail: huge, Errors: errs})
	bounded, _ := json.Marshal(problem.Record{Code: "account_failed_validation", Detail: "d", Errors: errs[:2],
		Extra: map[string]any{imports.ErrorsOmitted: 970}})
	for _, r := range []struct {
		ean string
		rec []byte
	}{{"WHOLE", whole}, {"BOUNDED", bounded}} {
		if _, err := d.Exec(`INSERT INTO staging_refusals (supplier_id, external_account_number, step, error)
			SELECT id, $2, 'validate', $3 FROM import_suppliers WHERE code = $1`, pt.Supplier, r.ean, string(r.rec)); err != nil {
			t.Fatal(err)
		}
	}
	type row struct {
		EAN, Code          string
		AttrLen, DetailLen int
		Others             int
	}
	for _, tc := range []struct {
		name   string
		filter Filter
		want   map[string]row
	}{
		{"no filter", Filter{}, map[string]row{
			"WHOLE":   {"WHOLE", "code_0", imports.MaxRefusalAttr, imports.MaxRefusalDetail, 29},
			"BOUNDED": {"BOUNDED", "code_0", imports.MaxRefusalAttr, imports.MaxRefusalDetail, 971},
		}},
		{"filtered by the second error's code", Filter{Code: "code_1"}, map[string]row{
			"WHOLE":   {"WHOLE", "code_1", imports.MaxRefusalAttr, imports.MaxRefusalDetail, 29},
			"BOUNDED": {"BOUNDED", "code_1", imports.MaxRefusalAttr, imports.MaxRefusalDetail, 971},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sum, err := svc.Summarize(ctx, pt.Supplier, tc.filter, all, false)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]row{}
			for _, a := range sum.Failed.Accounts {
				if _, ok := tc.want[a.ExternalAccountNumber]; ok {
					got[a.ExternalAccountNumber] = row{a.ExternalAccountNumber, a.Code, len(a.Attr), len(a.Detail), a.OtherErrors}
				}
			}
			if diff := gocmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
		})
	}
}

// The chart's axis is the run's: a run of four minutes that started ten
// minutes ago starts the series at its first minute, not an hour back,
// and its refusals are plotted per minute beside the completions, each
// refusal of an account again counted again; a refusal because the
// supplier was not Ongoing is not plotted.
func TestSummarize_PerMinuteFitsTheRunAndPlotsItsRefusals(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	refuse := func(ean, code, ago string) {
		t.Helper()
		rec, _ := json.Marshal(problem.Record{Code: code, Detail: "d", Errors: []problem.FieldError{{Code: code, Attr: "a", Detail: "d"}}})
		if _, err := d.Exec(`INSERT INTO staging_refusals (supplier_id, external_account_number, step, error, refused_at)
			SELECT id, $1, 'stage', $2, now() - $3::interval FROM import_suppliers WHERE code = 'RUN'
			ON CONFLICT (supplier_id, external_account_number) DO UPDATE
				SET step = EXCLUDED.step, error = EXCLUDED.error, refused_at = EXCLUDED.refused_at`, ean, rec, ago); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`INSERT INTO import_suppliers (code) VALUES ('RUN')`,
		`INSERT INTO progress_minutes (supplier_id, minute, completed)
		 SELECT id, date_trunc('minute', now() - interval '10 minutes'), 40 FROM import_suppliers WHERE code = 'RUN'`,
		`INSERT INTO progress_minutes (supplier_id, minute, completed)
		 SELECT id, date_trunc('minute', now() - interval '7 minutes'), 60 FROM import_suppliers WHERE code = 'RUN'`,
	} {
		if _, err := d.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	refuse("R-1", pt.CodePhone, "10 minutes")
	refuse("R-2", pt.CodePhone, "10 minutes")
	refuse("R-1", pt.CodePhone, "8 minutes") // sent again, refused again
	refuse("R-3", pt.CodeNotOngoing, "9 minutes")
	if _, err := Compact(ctx, d); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sum, err := New(d, nil).Summarize(ctx, "RUN", Filter{}, all, false)
	if err != nil {
		t.Fatal(err)
	}
	checkMinutes(t, sum.PerMinute, now)
	type point struct {
		Ago                        int
		Completed, Failed, Refused int64
	}
	var got []point
	for _, m := range sum.PerMinute {
		got = append(got, point{int(now.Truncate(time.Minute).Sub(m.Minute) / time.Minute), m.Completed, m.Failed, m.Refused})
	}
	// The minute may turn during the test: compare the points with figures
	// and the length of the series.
	var nonZero []point
	for _, p := range got {
		if p.Completed+p.Failed+p.Refused > 0 {
			nonZero = append(nonZero, p)
		}
	}
	want := []point{{10, 40, 0, 2}, {8, 0, 0, 1}, {7, 60, 0, 0}}
	if first := got[0]; len(got) < 11 || len(got) > 12 || first.Completed != 40 {
		t.Errorf("series of %d points from %d minutes ago (%+v), want it to start at the run's first minute, 10 minutes ago", len(got), first.Ago, first)
	}
	shift := 0
	if len(nonZero) > 0 {
		shift = nonZero[0].Ago - 10
	}
	for i := range want {
		want[i].Ago += shift
	}
	if diff := gocmp.Diff(want, nonZero); diff != "" {
		t.Errorf("points with figures (-want +got):\n%s", diff)
	}
	wantCounts := Counts{Refused: 2, RefusedNotOngoing: 1}
	if diff := gocmp.Diff(wantCounts, sum.Supplier.Counts); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
}

// A skip mark deletes the account's refusal (migration 00056): the team
// decided to leave the account out, so the refusal no longer asks for
// anything; its count and its errors go with it, and the account is not
// listed. Another account's refusal stays.
func TestSkipMark_DeletesTheAccountsRefusal(t *testing.T) {
	t.Parallel()
	d, svc := seeded(t)
	pt.SeedRefusals(t, d)
	ctx := context.Background()
	if _, err := d.Exec(`INSERT INTO skipped_accounts (supplier_id, external_account_number)
		SELECT id, 'ACME-R1' FROM import_suppliers WHERE code = $1`, pt.Supplier); err != nil {
		t.Fatal(err)
	}
	sum, err := svc.Summarize(ctx, pt.Supplier, Filter{}, all, false)
	if err != nil {
		t.Fatal(err)
	}
	want := Counts{Staged: 3, InProgress: 2, Completed: 4, Failed: 5, Total: 14, Refused: 0, RefusedNotOngoing: 1, SkipMarks: 3}
	if diff := gocmp.Diff(want, sum.Supplier.Counts); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	for _, a := range sum.Failed.Accounts {
		if a.ExternalAccountNumber == "ACME-R1" {
			t.Errorf("the skip-marked ACME-R1 is still listed: %+v", a)
		}
	}
	for _, e := range sum.TopErrors {
		if e.Code == pt.CodePhone && e.Accounts != 3 {
			t.Errorf("%s counted for %d accounts, want the 3 failed processes without ACME-R1's refusal", pt.CodePhone, e.Accounts)
		}
	}
	var rows int
	if err := d.Get(&rows, `SELECT count(*) FROM staging_refusals WHERE external_account_number = 'ACME-R1'`); err != nil || rows != 0 {
		t.Errorf("ACME-R1's refusal rows: %d (%v), want 0", rows, err)
	}
}
