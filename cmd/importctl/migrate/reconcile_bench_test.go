package migrate_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
	"github.com/bulkimport/bulkimport/cmd/importctl/migrate"
	"github.com/bulkimport/bulkimport/cmd/importctl/reconcile"
)

// BenchmarkReconcile times importctl reconcile over HTTP:
//
//	RECONCILE_ACCOUNTS=5000 go test ./cmd/importctl/migrate -run '^$' -bench '^BenchmarkReconcile$' -benchtime 3x -timeout 30m
//
// RECONCILE_ACCOUNTS generated accounts (default 2000) are imported once by
// the runner, outside the timing; each iteration then reconciles the whole
// cohort. It reports accounts/s and µs/account of
// the whole command, and of its two sides apart: the service's summary
// stream read whole, and the cohort's summaries computed from the lines
// (one goroutine), each once before the timing; the time the command
// spent sorting the cohort; and the whole command's time extrapolated to
// 200,000 accounts.
func BenchmarkReconcile(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("RECONCILE_ACCOUNTS")); err == nil && v > 0 {
		n = v
	}
	s := startService(b, map[string]string{"LOG_LEVEL": "error"})
	path, _ := writeCohort(b, cohort.Options{Accounts: n, Seed: 23})
	res, err := migrate.Run(context.Background(), config(s, path, b.TempDir()))
	if err != nil || res.Succeeded != n {
		b.Fatalf("import: %d of %d succeeded (%v)", res.Succeeded, n, err)
	}

	start := time.Now()
	got, country := serviceSummaries(b, s, "DEMO")
	stream := time.Since(start)
	if len(got) != n {
		b.Fatalf("the stream has %d accounts, want %d", len(got), n)
	}
	start = time.Now()
	if want := cohortSummaries(b, path, country); len(want) != n {
		b.Fatalf("the cohort gives %d summaries, want %d", len(want), n)
	}
	lines := time.Since(start)

	b.ResetTimer()
	var total, sorting time.Duration
	for b.Loop() {
		t0 := time.Now()
		rres, err := reconcile.Run(context.Background(), reconcile.Config{Cohort: path, BaseURL: s.base, APIKey: s.key,
			ReportDir: b.TempDir()})
		total += time.Since(t0)
		sorting += rres.Sorting
		if err != nil || rres.ExitCode() != 0 || rres.Matched != n {
			b.Fatalf("reconcile: exit %d, matched %d of %d (%v)", rres.ExitCode(), rres.Matched, n, err)
		}
	}
	perAccount := total / time.Duration(b.N*n)
	b.ReportMetric(float64(n)/(total.Seconds()/float64(b.N)), "accounts/s")
	b.ReportMetric(float64(perAccount.Nanoseconds())/1e3, "µs/account")
	b.ReportMetric(float64(stream.Nanoseconds())/1e3/float64(n), "stream-µs/account")
	b.ReportMetric(float64(lines.Nanoseconds())/1e3/float64(n), "cohort-µs/account")
	b.ReportMetric((perAccount * 200_000).Seconds(), "s-per-200k")
	b.ReportMetric(float64(sorting.Nanoseconds())/1e3/float64(b.N*n), "sort-µs/account")
}
