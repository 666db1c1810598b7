package migrate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
	"github.com/bulkimport/bulkimport/cmd/importctl/migrate"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/creation"
)

// BenchmarkMigrate runs the whole pipeline over HTTP (`make bench-migrate
// N=10000`): b.N generated accounts, each staged, processed, and given its
// notes, ten transactions and one statement, at the runner's default
// concurrency. It reports accounts/s end to end, each step's rate (its
// accounts over its request time divided by the concurrency), and, from
// the same run and service, accounts/s of the creation function called
// directly on as many accounts staged straight into PostgreSQL, and the
// ratio of the two.
//
// It also reports the CPU the pipeline cost per account, read from /proc
// around the run: cpu-ms/account is the whole machine's busy time less the
// runner's own (this process), that is what the service, PostgreSQL and
// Redis (and anything else running: run it on a quiet machine) spent, and
// pg-, importd-, redis- and runner-cpu-ms/account split it by process.
// Those count only the PostgreSQL and Redis servers the benchmark runs
// against (serversOf), and procs-cpu-ms/account is their sum with importd's:
// the figure that stays the pipeline's own when other work shares the
// machine (it leaves out the kernel's time that no process is charged).
//
// With MIGRATE_CPUPROFILE=file it also writes a CPU profile of importd over
// the first MIGRATE_PROFILE_SECONDS (default 20) of the run, read from its
// METRICS_PROFILES port: go tool pprof bin/importd file. E5_STATEMENTS=1
// prints PostgreSQL's statements over the run, and E5_WAITS=1 what its
// backends waited on (dbtest.WaitSampler).
//
// MIGRATE_IMPORTD_ENV="ACCOUNT_WRITERS=1 ACCOUNT_BATCH=32" runs importd with
// those settings, to compare them in the same conditions.
func BenchmarkMigrate(b *testing.B) {
	env := map[string]string{"LOG_LEVEL": "error"}
	for _, kv := range strings.Fields(os.Getenv("MIGRATE_IMPORTD_ENV")) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			b.Fatalf("MIGRATE_IMPORTD_ENV: %q is not NAME=value", kv)
		}
		env[k] = v
	}
	profile := os.Getenv("MIGRATE_CPUPROFILE")
	if profile != "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		env["METRICS_ADDR"], env["METRICS_PROFILES"] = l.Addr().String(), "true"
		l.Close()
	}
	s := startService(b, env)
	path, _ := writeCohort(b, cohort.Options{Accounts: b.N, Seed: 21, NoPayments: true})
	cfg := config(s, path, b.TempDir())
	srv := serversOf(b, s)
	before := sampleCPU(b, s.pid, srv)
	b.ResetTimer()
	var profiled chan error
	if profile != "" {
		profiled = make(chan error, 1)
		go func() { profiled <- fetchProfile(env["METRICS_ADDR"], profile) }()
	}
	waits := dbtest.StartWaitSampler(b, s.db)
	res, err := migrate.Run(context.Background(), cfg)
	b.StopTimer()
	waits.Report(b)
	if profiled != nil {
		if err := <-profiled; err != nil {
			b.Errorf("MIGRATE_CPUPROFILE: %v", err)
		}
	}
	used := sampleCPU(b, s.pid, srv).sub(before)
	if err != nil {
		b.Fatal(err)
	}
	if res.Succeeded != b.N {
		b.Fatalf("%d of %d accounts succeeded", res.Succeeded, b.N)
	}
	rate := float64(b.N) / res.Elapsed.Seconds()
	b.ReportMetric(rate, "accounts/s")
	perAccount := func(seconds float64) float64 { return seconds * 1000 / float64(b.N) }
	b.ReportMetric(perAccount(used.busy-used.runner), "cpu-ms/account")
	b.ReportMetric(perAccount(used.postgres+used.importd+used.redis), "procs-cpu-ms/account")
	b.ReportMetric(perAccount(used.postgres), "pg-cpu-ms/account")
	b.ReportMetric(perAccount(used.importd), "importd-cpu-ms/account")
	b.ReportMetric(perAccount(used.redis), "redis-cpu-ms/account")
	b.ReportMetric(perAccount(used.runner), "runner-cpu-ms/account")
	conc := float64(cfg.Concurrency)
	if conc == 0 {
		conc = 16
	}
	for _, st := range res.Steps {
		if st.Time > 0 && st.OK > 0 {
			b.ReportMetric(float64(st.OK)*conc/st.Time.Seconds(), "E"+string(st.Step[1])+"-accounts/s")
		}
	}
	direct := directCreate(b, s, b.N)
	b.ReportMetric(direct, "direct-create-accounts/s")
	b.ReportMetric(rate/direct, "e2e/direct")
}

// fetchProfile writes to path the CPU profile that importd's metrics port
// at addr takes over MIGRATE_PROFILE_SECONDS.
func fetchProfile(addr, path string) error {
	seconds := os.Getenv("MIGRATE_PROFILE_SECONDS")
	if seconds == "" {
		seconds = "20"
	}
	res, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=" + seconds)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: %s", res.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// directCreate stages n more generated accounts straight into PostgreSQL
// and creates them with the worker's creation function from 16 goroutines,
// returning accounts/s.
func directCreate(b *testing.B, s *service, n int) float64 {
	b.Helper()
	path, _ := writeCohort(b, cohort.Options{Accounts: n, Seed: 22, NoPayments: true})
	r, c, err := cohort.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var supplierID, teamID int64
	if err := s.db.Get(&supplierID, `SELECT id FROM import_suppliers WHERE code = 'DEMO'`); err != nil {
		b.Fatal(err)
	}
	if err := s.db.Get(&teamID, `SELECT id FROM operations_teams WHERE name = $1`, team); err != nil {
		b.Fatal(err)
	}
	type staged struct {
		id  int64
		ean string
	}
	var all []staged
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		var id int64
		if err := s.db.Get(&id, `INSERT INTO import_processes (supplier_id, external_account_number, payload)
			VALUES ($1, $2, $3) RETURNING id`, supplierID, rec.ExternalAccountNumber, json.RawMessage(rec.Account)); err != nil {
			b.Fatal(err)
		}
		all = append(all, staged{id, rec.ExternalAccountNumber})
	}
	opt, err := redis.ParseURL(s.redis)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	log := slog.New(slog.DiscardHandler)
	creator := creation.NewCreator(s.db, rdb, account.NewCatalog(s.db, nil), nil, creation.NewAnnouncer(rdb, log), log)
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(all) {
					return
				}
				if err := creator.Run(context.Background(), jobs.AccountProcessPayload{ProcessID: all[i].id, SupplierID: supplierID,
					SupplierCode: "DEMO", ExternalAccountNumber: all[i].ean, OperationsTeamID: teamID}, false); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	if failed.Load() > 0 {
		b.Fatalf("%d direct creations failed", failed.Load())
	}
	return float64(len(all)) / el.Seconds()
}
