package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/process"
)

// benchConcurrency is the concurrency of the E5 targets (README.md,
// "Performance"); benchLevels adds 1, where latencies show what the queue
// itself adds rather than contention.
const benchConcurrency = 16

var benchLevels = []int{1, benchConcurrency}

// stageForBench stages n copies of the fixture straight into PostgreSQL
// (staging is measured by its own benchmark) and returns their numbers.
func stageForBench(b *testing.B, s *service, prefix string, n int) []string {
	b.Helper()
	eans := make([]string, n)
	for i := range eans {
		eans[i] = fmt.Sprintf("%s-%07d", prefix, i)
		payload, _ := json.Marshal(fixture(b, eans[i]))
		if _, err := s.db.Exec(`INSERT INTO import_processes (supplier_id, external_account_number, payload)
			SELECT id, $1, $2 FROM import_suppliers WHERE code = 'DEMO'`, eans[i], payload); err != nil {
			b.Fatal(err)
		}
	}
	return eans
}

// runConcurrently calls fn for every index from 16 goroutines and returns
// each call's latency.
func runConcurrently(b *testing.B, workers, n int, fn func(i int) error) []time.Duration {
	b.Helper()
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				start := time.Now()
				if err := fn(i); err != nil {
					failed.Store(err)
					return
				}
				lat[i] = time.Since(start)
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return lat
}

func reportLatency(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "accounts/s")
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op") // the per-op time of a concurrent run says nothing
}

// BenchmarkE5Process creates accounts end to end: HTTP, the queue, the
// worker, the completion signal. Compare with BenchmarkE5DirectCreate.
func BenchmarkE5Process(b *testing.B) {
	for _, c := range benchLevels {
		b.Run(fmt.Sprintf("concurrency=%d", c), func(b *testing.B) { benchE5Process(b, c) })
	}
}

func benchE5Process(b *testing.B, workers int) {
	s := startService(b, "serve", map[string]string{"WORKER_CONCURRENCY": fmt.Sprint(benchConcurrency), "LOG_LEVEL": "error"})
	seedDemo(b, s, admin.Supplier{})
	tok := s.accessToken(b, s.newKey(b, "bench"))
	eans := stageForBench(b, s, "E2E", b.N)
	b.ResetTimer()
	lat := runConcurrently(b, workers, b.N, func(i int) error {
		r := s.do(b, "POST", processPath, tok, processBody(eans[i], false))
		if r.Status != 201 {
			return fmt.Errorf("E5 %s: %d %s", eans[i], r.Status, r.Raw)
		}
		return nil
	})
	b.StopTimer()
	reportLatency(b, lat)
}

// BenchmarkE5DirectCreate is the baseline: the worker's creation function
// (re-validation, the account transaction, the outcome) called directly,
// with no HTTP and no queue, at the same concurrency.
func BenchmarkE5DirectCreate(b *testing.B) {
	for _, c := range benchLevels {
		b.Run(fmt.Sprintf("concurrency=%d", c), func(b *testing.B) { benchE5Direct(b, c) })
	}
}

func benchE5Direct(b *testing.B, workers int) {
	s := startService(b, "api", map[string]string{"LOG_LEVEL": "error"})
	seedDemo(b, s, admin.Supplier{})
	stageForBench(b, s, "DIRECT", b.N)
	var ids []struct {
		ID  int64  `db:"id"`
		EAN string `db:"external_account_number"`
	}
	if err := s.db.Select(&ids, `SELECT id, external_account_number FROM import_processes ORDER BY external_account_number`); err != nil {
		b.Fatal(err)
	}
	var supplierID, teamID int64
	_ = s.db.Get(&supplierID, `SELECT id FROM import_suppliers WHERE code = 'DEMO'`)
	_ = s.db.Get(&teamID, `SELECT id FROM operations_teams WHERE name = 'Ops'`)
	opt, _ := redis.ParseURL(s.env["REDIS_URL"])
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	docs, err := documents.Open(context.Background(), s.env["DOCUMENTS_URL"], slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer docs.Close()
	creator := process.NewCreator(s.db, rdb, account.NewCatalog(s.db, nil), docs, slog.New(slog.DiscardHandler))
	b.ResetTimer()
	lat := runConcurrently(b, workers, b.N, func(i int) error {
		return creator.Run(context.Background(), jobs.AccountProcessPayload{
			ProcessID: ids[i].ID, SupplierID: supplierID, SupplierCode: "DEMO",
			ExternalAccountNumber: ids[i].EAN, OperationsTeamID: teamID,
		}, false)
	})
	b.StopTimer()
	if n := s.count(b, `SELECT count(*) FROM accounts`); n != b.N {
		b.Fatalf("%d accounts created, want %d", n, b.N)
	}
	reportLatency(b, lat)
}
