package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	pt "github.com/bulkimport/bulkimport/jobs/progress/progresstest"
)

// browser starts a headless Chromium of the test's own (fresh profile) and
// returns a context driving one tab, and a function that reports what the
// page logged as errors. The test skips when Chromium is not installed:
// `make test` installs it (deploy/local/stack.sh chromium) where it can.
func browser(t *testing.T, extra ...chromedp.ExecAllocatorOption) (context.Context, func() []string) {
	t.Helper()
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("chromium is not installed: `make test` installs it with apt-get as root (deploy/local/stack.sh chromium); without root install the Debian package chromium")
	}
	// A fresh profile, removed after the browser has exited: Chromium may
	// still write to it while it shuts down, which t.TempDir's removal
	// reports as a failure.
	profile, err := os.MkdirTemp("", "chromium-profile-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1400),
	}
	opts = append(opts, extra...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the browser and waits for it
		cancelTimeout()
		cancelTab()
		cancelAlloc()
		for range 20 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	var mu sync.Mutex
	var problems []string
	chromedp.ListenTarget(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeWarning {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				problems = append(problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+ev.ExceptionDetails.Error())
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.LevelError || ev.Entry.Level == cdplog.LevelWarning {
				problems = append(problems, fmt.Sprintf("log %s: %s %s", ev.Entry.Level, ev.Entry.Text, ev.Entry.URL))
			}
		}
	})
	if err := chromedp.Run(ctx, cdplog.Enable(), runtime.Enable()); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), problems...)
	}
}

// basicAuth makes every request of the tab carry the login, as a browser
// does once the user has typed it.
func basicAuth(user, pass string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		if err := network.Enable().Do(ctx); err != nil {
			return err
		}
		token := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
		return network.SetExtraHTTPHeaders(network.Headers{"Authorization": "Basic " + token}).Do(ctx)
	})
}

// failedRows returns the external account numbers in the failed accounts table.
func failedRows(ctx context.Context) ([]string, error) {
	var rows []string
	err := chromedp.Evaluate(`Array.from(document.querySelectorAll("#failed-accounts tbody tr")).
		filter(tr => tr.cells.length > 1).map(tr => tr.cells[0].textContent)`, &rows).Do(ctx)
	return rows, err
}

// The page of the seeded cohort, with its accounts refused at staging, in
// headless Chromium: it loads without console errors, shows the cohort's
// counts (the refused ones beside the others), draws the chart, lists the
// refused accounts with their step among the failed ones, updates itself
// when an account fails meanwhile, and the filter by code narrows the
// failed accounts. A screenshot goes to the test's temporary directory (and
// to $MIGRATION_SCREENSHOT when set, which is how docs/migration-page.png is
// made).
func TestMigrationPage_InHeadlessChromium(t *testing.T) {
	t.Parallel()
	ctx, problems := browser(t)
	s := startPage(t)
	pt.SeedRefusals(t, s.db)
	if os.Getenv("MIGRATION_SCREENSHOT") != "" {
		seedHistory(t, s)
	}
	page := s.base + "/migration/" + pt.Supplier + "/"

	counts := map[string]string{}
	var chartCanvases int
	err := chromedp.Run(ctx,
		basicAuth(pageUser, pagePass),
		chromedp.Navigate(page),
		chromedp.WaitVisible(`#page[data-refreshed]`),
		chromedp.WaitVisible(`#chart canvas`),
		chromedp.Evaluate(`document.querySelectorAll("#chart canvas").length`, &chartCanvases),
		chromedp.ActionFunc(func(ctx context.Context) error {
			for _, k := range []string{"staged", "in_progress", "completed", "failed", "total", "refused", "refused_not_ongoing", "skip_marks"} {
				var v string
				if err := chromedp.Text(`[data-count="`+k+`"]`, &v, chromedp.ByQuery).Do(ctx); err != nil {
					return err
				}
				counts[k] = v
			}
			return nil
		}),
	)
	if err != nil {
		t.Fatalf("load %s: %v (page problems: %v)", page, err, problems())
	}
	// ACME-R2 was refused while the supplier was not Ongoing: the
	// supplier's refusal, counted apart from the accounts' own.
	want := map[string]string{"staged": "3", "in_progress": "2", "completed": "4", "failed": "5", "total": "14", "refused": "1", "refused_not_ongoing": "1", "skip_marks": "2"}
	if os.Getenv("MIGRATION_SCREENSHOT") == "" && fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("counts on the page %v, want %v", counts, want)
	}
	if chartCanvases != 1 {
		t.Errorf("%d chart canvases, want 1", chartCanvases)
	}
	shot := filepath.Join(t.TempDir(), "migration.png")
	var png []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if p := os.Getenv("MIGRATION_SCREENSHOT"); p != "" {
		// docs/migration-page.png: the window, not the whole table.
		if err := chromedp.Run(ctx, chromedp.CaptureScreenshot(&png)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))

	// An account fails while the page is open: the page shows it without
	// being reloaded (the marker set before survives only without a reload).
	if _, err := s.db.Exec(`UPDATE import_processes SET status = 'UNKNOWN', updated_at = now(),
		last_error = '{"code":"account_failed_validation","detail":"d","errors":[{"code":"invalid_postcode","attr":"x","detail":"Late."}]}'
		WHERE external_account_number = 'ACME-S1'`); err != nil {
		t.Fatal(err)
	}
	var marker bool
	err = chromedp.Run(ctx,
		chromedp.Evaluate(`window.notReloaded = true`, nil),
		chromedp.Poll(`document.querySelector('[data-count="failed"]').textContent === "6"`, nil, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Evaluate(`window.notReloaded === true`, &marker),
	)
	if err != nil || !marker {
		t.Errorf("the page did not update itself to 6 failed accounts without a reload: %v (marker %v)", err, marker)
	}

	var all []string
	if err := chromedp.Run(ctx, chromedp.ActionFunc(func(ctx context.Context) (err error) { all, err = failedRows(ctx); return err })); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(all) != "[ACME-S1 ACME-R2 ACME-R1 ACME-F5 ACME-F4 ACME-F3 ACME-F2 ACME-F1]" {
		t.Errorf("failed accounts %v", all)
	}
	var steps []string
	var refusedRed bool
	err = chromedp.Run(ctx,
		chromedp.Evaluate(`Array.from(document.querySelectorAll("#failed-accounts tbody tr")).
			filter(tr => tr.cells.length > 1).map(tr => tr.cells[1].textContent)`, &steps),
		chromedp.Evaluate(`document.getElementById("refused-card").classList.contains("bad")`, &refusedRed),
	)
	if err != nil || fmt.Sprint(steps) != "[process stage validate process process process process process]" || !refusedRed {
		t.Errorf("steps of the failed accounts %v (%v), refused card red %v; want the refusals' steps and a red card", steps, err, refusedRed)
	}
	// The filter form narrows the table to the code typed.
	var narrowed []string
	err = chromedp.Run(ctx,
		chromedp.SetValue(`input[name="code"]`, pt.CodePostcode, chromedp.ByQuery),
		chromedp.Submit(`form.filter`, chromedp.ByQuery),
		chromedp.WaitVisible(`a[href="./#failed"]`, chromedp.ByQuery),
		chromedp.ActionFunc(func(ctx context.Context) (err error) { narrowed, err = failedRows(ctx); return err }),
	)
	if err != nil || fmt.Sprint(narrowed) != "[ACME-S1 ACME-F1]" {
		t.Errorf("filtered by %s: %v (%v)", pt.CodePostcode, narrowed, err)
	}
	// So does a top error's link: code and attr.
	var byLink []string
	err = chromedp.Run(ctx,
		chromedp.Navigate(page),
		chromedp.WaitVisible(`#page[data-refreshed]`),
		chromedp.Click(`#top-errors a[href*="`+pt.CodeTariff+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`a[href="./#failed"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#page[data-refreshed]`),
		chromedp.ActionFunc(func(ctx context.Context) (err error) { byLink, err = failedRows(ctx); return err }),
	)
	if err != nil || fmt.Sprint(byLink) != "[ACME-F4]" {
		t.Errorf("top error link %s: %v (%v)", pt.CodeTariff, byLink, err)
	}
	// The listener hears the page's console: a probe logged now must show.
	if err := chromedp.Run(ctx, chromedp.Evaluate(`console.error("listener-probe")`, nil)); err != nil {
		t.Fatal(err)
	}
	var heard []string
	for range 50 {
		if heard = problems(); len(heard) > 0 && strings.Contains(heard[len(heard)-1], "listener-probe") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(heard) == 0 || !strings.Contains(heard[len(heard)-1], "listener-probe") {
		t.Fatalf("the console listener missed a console.error: %v", heard)
	}
	if p := heard[:len(heard)-1]; len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// seedHistory adds three hours of processing to the cohort, and refusals at
// staging over them, for the screenshot in docs/operating.md: rows written
// with the triggers off and counted with progress_rebuild, as migration
// 00015 says for bulk changes.
func seedHistory(t *testing.T, s *service) {
	t.Helper()
	for _, q := range []string{
		`ALTER TABLE import_processes DISABLE TRIGGER USER`,
		`INSERT INTO import_processes (supplier_id, external_account_number, payload, status, service_account_number, account_created_at, last_error, updated_at)
		 SELECT sup.id, 'ACME-H' || lpad(i::text, 5, '0'), '{}',
		        CASE WHEN i % 23 = 0 OR i % 31 = 0 THEN 'UNKNOWN' ELSE 'COMPLETED' END,
		        CASE WHEN i % 23 = 0 OR i % 31 = 0 THEN NULL ELSE 'A-' || lpad(to_hex(1000000 + i), 8, '0') END,
		        CASE WHEN i % 23 = 0 OR i % 31 = 0 THEN NULL ELSE t END,
		        CASE WHEN i % 23 = 0 THEN '{"code":"account_failed_validation","detail":"The account failed validation.","errors":[{"code":"invalid_phone_number","attr":"customers.0.mobile","detail":"Not a valid UK phone number."}]}'::jsonb
		             WHEN i % 31 = 0 THEN '{"code":"account_failed_validation","detail":"The account failed validation.","errors":[{"code":"tariff_code_not_found","attr":"supply_points.0.agreements.0.tariff_code","detail":"Tariff E-FIX-24 does not exist."}]}'::jsonb END,
		        t
		 FROM import_suppliers sup, generate_series(1, 6000) i,
		      LATERAL (SELECT now() - interval '171 minutes' + (i * interval '170 minutes' / 6000) + (sin(i / 300.0) * interval '30 seconds') AS t) ts
		 WHERE sup.code = 'ACME'`,
		`ALTER TABLE import_processes ENABLE TRIGGER USER`,
		// One line in fifty refused at E4 over the same hours.
		`ALTER TABLE staging_refusals DISABLE TRIGGER USER`,
		`INSERT INTO staging_refusals (supplier_id, external_account_number, step, error, refused_at)
		 SELECT sup.id, 'ACME-HR' || lpad(i::text, 5, '0'), 'stage',
		        '{"code":"account_failed_validation","detail":"The account failed validation.","errors":[{"code":"invalid_postcode","attr":"supply_addresses.0.supply_postcode","detail":"Not a postcode."}]}'::jsonb,
		        now() - interval '171 minutes' + (i * interval '170 minutes' / 120)
		 FROM import_suppliers sup, generate_series(1, 120) i
		 WHERE sup.code = 'ACME'`,
		`ALTER TABLE staging_refusals ENABLE TRIGGER USER`,
		`SELECT progress_rebuild()`,
	} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// Opened with the login in its URL (http://user:pass@host/...), as a
// bookmark or a link in a runbook does, the page still refreshes itself and
// draws its chart: the refresh asks for summary.json without the
// credentials, which fetch refuses. The legend shows the latest minute's
// figures without a hover, the time axis names UTC, and the Failed card is
// red only while an account has failed.
func TestMigrationPage_WithTheLoginInTheURLRefreshesAndShowsTheLatestMinute(t *testing.T) {
	t.Parallel()
	ctx, problems := browser(t)
	s := startPage(t)
	u, err := url.Parse(s.base + "/migration/" + pt.Supplier + "/")
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(pageUser, pagePass)

	var legend []string
	var title, lastMinute string
	var failedRed bool
	err = chromedp.Run(ctx,
		chromedp.Navigate(u.String()),
		// data-refreshed counts the refreshes that succeeded.
		chromedp.WaitVisible(`#page[data-refreshed]`),
		chromedp.WaitVisible(`#chart canvas`),
		chromedp.Evaluate(`Array.from(document.querySelectorAll("#chart .u-legend .u-value")).map(e => e.textContent)`, &legend),
		chromedp.Evaluate(`(() => { const u = new URL("summary.json", location.href); u.username = ""; u.password = ""; return fetch(u); })().then(r => r.json()).then(s => s.per_minute[s.per_minute.length - 1].minute)`, &lastMinute,
			func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }),
		chromedp.Text(`#chart-title`, &title, chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById("failed-card").classList.contains("bad")`, &failedRed),
	)
	if err != nil {
		t.Fatalf("load %s: %v (page problems: %v)", u.Redacted(), err, problems())
	}
	if len(legend) != 4 || slices.Contains(legend, "--") {
		t.Fatalf("legend values %q, want the latest minute's time and figures", legend)
	}
	last, err := time.Parse(time.RFC3339, lastMinute)
	if err != nil {
		t.Fatalf("the summary's last minute %q: %v", lastMinute, err)
	}
	// The minute may turn between the page's refresh and the test's fetch.
	if want, before := last.UTC().Format("2006-01-02 15:04")+" UTC", last.Add(-time.Minute).UTC().Format("2006-01-02 15:04")+" UTC"; legend[0] != want && legend[0] != before {
		t.Errorf("legend time %q, want the latest minute in UTC, %q", legend[0], want)
	}
	if !strings.HasPrefix(title, "Completed, failed and refused per minute, since ") || !strings.HasSuffix(title, " UTC") {
		t.Errorf("chart title %q, want it to say since when, in UTC", title)
	}
	if !failedRed {
		t.Error("the Failed card is not red while the cohort has failed accounts")
	}
	for _, p := range problems() {
		t.Errorf("the page logged: %s", p)
	}

	// With every failure cleared, the card turns plain at the next refresh.
	if _, err := s.db.Exec(`UPDATE import_processes SET status = 'COMPLETED', last_error = NULL, updated_at = now(),
		service_account_number = 'A-' || id WHERE last_error IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	err = chromedp.Run(ctx, chromedp.Poll(`document.querySelector('[data-count="failed"]').textContent === "0" &&
		!document.getElementById("failed-card").classList.contains("bad")`, nil, chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		t.Errorf("the Failed card with no failed account: %v", err)
	}
}

// A run of a few minutes fills the chart: the time axis starts at the
// run's first minute, not an hour back with the run in its last 8%, and
// the refusals at staging are plotted beside the completions. Hovering the
// chart's left edge shows the run's first minute, with its 40 completions
// and 2 refusals, in the legend.
func TestMigrationPage_ChartFitsTheRunAndPlotsItsRefusals(t *testing.T) {
	t.Parallel()
	ctx, problems := browser(t)
	s := startPage(t)
	var first time.Time
	if err := s.db.Get(&first, `SELECT date_trunc('minute', now() - interval '10 minutes')`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO progress_minutes (supplier_id, minute, completed)
		 SELECT id, $1, 40 FROM import_suppliers WHERE code = 'ACME'`,
		`INSERT INTO staging_refusals (supplier_id, external_account_number, step, error, refused_at)
		 SELECT id, n, 'validate', '{"code":"account_failed_validation","detail":"d","errors":[{"code":"invalid_phone_number","attr":"customers.0.mobile","detail":"d"}]}', $1::timestamptz + interval '20 seconds'
		 FROM import_suppliers, unnest(ARRAY['ACME-EARLY1', 'ACME-EARLY2']) n WHERE code = 'ACME'`,
	} {
		if _, err := s.db.Exec(q, first); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var labels, legend []string
	var box []float64
	err := chromedp.Run(ctx,
		basicAuth(pageUser, pagePass),
		chromedp.Navigate(s.base+"/migration/"+pt.Supplier+"/"),
		chromedp.WaitVisible(`#page[data-refreshed]`),
		chromedp.WaitVisible(`#chart .u-over`),
		chromedp.Evaluate(`Array.from(document.querySelectorAll("#chart .u-legend .u-label")).map(e => e.textContent)`, &labels),
		chromedp.Evaluate(`(() => { const r = document.querySelector("#chart .u-over").getBoundingClientRect(); return [r.left, r.top, r.height]; })()`, &box),
	)
	if err != nil {
		t.Fatalf("load the page: %v (page problems: %v)", err, problems())
	}
	if want := []string{"Minute", "Completed", "Failed", "Refused at staging"}; !slices.Equal(labels, want) {
		t.Errorf("chart series %q, want %q", labels, want)
	}
	err = chromedp.Run(ctx,
		chromedp.MouseEvent(input.MouseMoved, box[0]+1, box[1]+box[2]/2),
		chromedp.Evaluate(`Array.from(document.querySelectorAll("#chart .u-legend .u-value")).map(e => e.textContent)`, &legend),
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{first.UTC().Format("2006-01-02 15:04") + " UTC", "40", "0", "2"}
	if !slices.Equal(legend, want) {
		t.Errorf("legend at the chart's left edge %q, want the run's first minute %q", legend, want)
	}
	for _, p := range problems() {
		t.Errorf("the page logged: %s", p)
	}
}
