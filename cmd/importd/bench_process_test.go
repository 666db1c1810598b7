package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/lib/pq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/creation"
	"github.com/bulkimport/bulkimport/jobs/documents"
)

// benchConcurrency is the concurrency of the E5 targets (docs/performance.md);
// BenchmarkE5 also runs at 1, where latencies show what the queue itself
// adds rather than contention. E5_LEVELS=2,4,8 runs it at other
// concurrencies instead.
const benchConcurrency = 32

// stageForBench stages n copies of the fixture straight into PostgreSQL, in
// one statement (staging is measured by its own benchmark), and returns
// their numbers.
func stageForBench(b testing.TB, s *service, prefix string, n int) []string {
	b.Helper()
	eans := make([]string, n)
	payloads := make([]string, n)
	for i := range eans {
		eans[i] = fmt.Sprintf("%s-%07d", prefix, i)
		p, _ := json.Marshal(fixture(b, eans[i]))
		payloads[i] = string(p)
	}
	if _, err := s.db.Exec(`INSERT INTO import_processes (supplier_id, external_account_number, payload)
		SELECT s.id, u.ean, u.payload FROM import_suppliers s, unnest($1::text[], $2::jsonb[]) AS u (ean, payload)
		WHERE s.code = 'DEMO'`, pq.Array(eans), pq.Array(payloads)); err != nil {
		b.Fatal(err)
	}
	return eans
}

// benchDemoIDs returns the ids of supplier DEMO and team Ops that seedDemo
// wrote.
func benchDemoIDs(b *testing.B, s *service) (supplierID, teamID int64) {
	if err := s.db.Get(&supplierID, `SELECT id FROM import_suppliers WHERE code = 'DEMO'`); err != nil {
		b.Fatal(err)
	}
	if err := s.db.Get(&teamID, `SELECT id FROM operations_teams WHERE name = 'Ops'`); err != nil {
		b.Fatal(err)
	}
	return supplierID, teamID
}

// BenchmarkE5 measures account creation two ways, each at concurrency 1
// and benchConcurrency, in this order so that the second reports its ratio
// to the first from the same run:
//
//   - direct: the worker's creation function (re-validation, the account
//     transaction, the outcome) called in-process, no HTTP and no queue.
//     BenchmarkCreate in jobs/creation measures it beside the creation
//     statement alone, from Go and from pgbench.
//   - e2e: E5 over HTTP, through the queue and the worker, and the wait.
//     "vs-direct" is its rate over direct creation's (target ≥ 0.50); at
//     concurrency 1, "queue-p50-ms" is its p50 less direct creation's p50:
//     what the queue adds (target < 10 ms).
func BenchmarkE5(b *testing.B) {
	for _, c := range dbtest.EnvInts(b, "E5_LEVELS", 1, benchConcurrency) {
		var direct dbtest.Figures
		b.Run(fmt.Sprintf("direct/concurrency=%d", c), func(b *testing.B) { direct = benchE5Direct(b, c) })
		b.Run(fmt.Sprintf("e2e/concurrency=%d", c), func(b *testing.B) {
			e2e := benchE5Process(b, c)
			e2e.ReportRatio(b, direct, "vs-direct")
			if c == 1 && direct.P50 > 0 {
				b.ReportMetric(e2e.P50-direct.P50, "queue-p50-ms")
			}
		})
	}
}

// benchPool opens a pool of one connection per goroutine on the service's
// database, with every connection open before the clock starts.
func benchPool(b *testing.B, s *service, workers int) *db.DB {
	d, err := db.Open(context.Background(), s.env["DATABASE_URL"], workers)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	dbtest.RunConcurrently(b, workers, workers, func(int) error { _, err := d.Exec(`SELECT 1`); return err })
	return d
}

func benchE5Process(b *testing.B, workers int) dbtest.Figures {
	if b.N == 1 {
		return dbtest.Figures{} // the probe run before the -benchtime Nx run: a service start measures nothing
	}
	batching := benchBatching(b)
	s := startService(b, "serve", map[string]string{"WORKER_CONCURRENCY": fmt.Sprint(benchWorkerConcurrency(b)),
		"DB_MAX_CONNS": fmt.Sprint(benchDBConns(b)), "LOG_LEVEL": "error",
		"ACCOUNT_WRITERS": fmt.Sprint(batching.Writers), "ACCOUNT_BATCH": fmt.Sprint(batching.Size)})
	seedDemo(b, s, admin.Supplier{})
	tok := s.accessToken(b, s.newKey(b, "bench"))
	warm := stageForBench(b, s, "WARM", workers)
	eans := stageForBench(b, s, "E2E", b.N)
	// The first requests open the service's connections and prepare its
	// statements; they are not what a migration's millionth account costs.
	dbtest.RunConcurrently(b, workers, workers, func(i int) error { return e5Post(b, s, tok, warm[i]) })
	waits := dbtest.StartWaitSampler(b, s.db)
	b.ResetTimer()
	lat := dbtest.RunConcurrently(b, workers, b.N, func(i int) error { return e5Post(b, s, tok, eans[i]) })
	b.StopTimer()
	waits.Report(b)
	return dbtest.ReportLatency(b, lat)
}

// benchWorkerConcurrency is the end-to-end benchmark's WORKER_CONCURRENCY:
// benchConcurrency, or E5_WORKER_CONCURRENCY to measure how fewer accounts
// in flight, with the clients' concurrency unchanged, move the throughput
// (docs/operating.md, "Tuning a migration").
func benchWorkerConcurrency(b *testing.B) int {
	return dbtest.EnvInt(b, "E5_WORKER_CONCURRENCY", benchConcurrency)
}

// benchBatching is how direct creation and the end-to-end run share
// creation transactions: the defaults of ACCOUNT_WRITERS and ACCOUNT_BATCH,
// or E5_WRITERS and E5_BATCH to compare others (E5_BATCH=1 is an account per
// transaction, the slowest way).
func benchBatching(b *testing.B) creation.Batching {
	def, err := loadConfig(func(string) string { return "" }, 0)
	if err != nil {
		b.Fatal(err)
	}
	return creation.Batching{Writers: dbtest.EnvInt(b, "E5_WRITERS", def.AccountWriters),
		Size: dbtest.EnvInt(b, "E5_BATCH", def.AccountBatch)}
}

// benchDBConns is DB_MAX_CONNS of the end-to-end benchmark and the largest
// pool of direct creation: 8, four connections per core of this 2-core
// machine, as docs/operating.md "Tuning a migration" recommends, or E5_DB_CONNS to
// measure others. Creation needs only its ACCOUNT_WRITERS connections; more
// than a few per core only add backends for the same cores to switch
// between.
func benchDBConns(b *testing.B) int { return dbtest.EnvInt(b, "E5_DB_CONNS", 8) }

func e5Post(b *testing.B, s *service, tok, ean string) error {
	r := s.do(b, "POST", processPath, tok, processBody(ean, false))
	if r.Status != 201 {
		return fmt.Errorf("E5 %s: %d %s", ean, r.Status, r.Raw)
	}
	return nil
}

// stagedIDs returns the process ids of the staged accounts whose numbers
// start with prefix, in number order.
func stagedIDs(b *testing.B, s *service, prefix string) []int64 {
	var ids []int64
	if err := s.db.Select(&ids, `SELECT id FROM import_processes WHERE external_account_number LIKE $1 || '-%'
		ORDER BY external_account_number`, prefix); err != nil {
		b.Fatal(err)
	}
	return ids
}

func benchE5Direct(b *testing.B, workers int) dbtest.Figures {
	if b.N == 1 {
		return dbtest.Figures{} // the probe run before the -benchtime Nx run: a service start measures nothing
	}
	s := startService(b, "api", map[string]string{"LOG_LEVEL": "error"})
	seedDemo(b, s, admin.Supplier{})
	warm := stageForBench(b, s, "WARM", workers)
	eans := stageForBench(b, s, "DIRECT", b.N)
	warmIDs, ids := stagedIDs(b, s, "WARM"), stagedIDs(b, s, "DIRECT")
	supplierID, teamID := benchDemoIDs(b, s)
	opt, _ := redis.ParseURL(s.env["REDIS_URL"])
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	docs, err := documents.Open(context.Background(), s.env["DOCUMENTS_URL"], slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer docs.Close()
	pool := benchPool(b, s, min(workers, benchDBConns(b)))
	log := slog.New(slog.DiscardHandler)
	creator := creation.NewCreator(pool, rdb, account.NewCatalog(pool, nil), docs, creation.NewAnnouncer(rdb, log), log).
		WithBatching(benchBatching(b), nil)
	create := func(id int64, ean string) error {
		return creator.Run(context.Background(), jobs.AccountProcessPayload{
			ProcessID: id, SupplierID: supplierID, SupplierCode: "DEMO",
			ExternalAccountNumber: ean, OperationsTeamID: teamID,
		}, false)
	}
	dbtest.RunConcurrently(b, workers, workers, func(i int) error { return create(warmIDs[i], warm[i]) })
	waits := dbtest.StartWaitSampler(b, s.db)
	b.ResetTimer()
	lat := dbtest.RunConcurrently(b, workers, b.N, func(i int) error { return create(ids[i], eans[i]) })
	b.StopTimer()
	waits.Report(b)
	if n := s.count(b, `SELECT count(*) FROM accounts`); n != b.N+workers {
		b.Fatalf("%d accounts created, want %d", n, b.N+workers)
	}
	return dbtest.ReportLatency(b, lat)
}
