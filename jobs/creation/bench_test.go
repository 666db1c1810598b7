package creation

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/account"
)

// BenchmarkCreate measures account creation three ways, each at
// concurrency 1 and 32 (E5_LEVELS=2,4,8 runs other concurrencies), in this
// order so that direct creation reports its ratio to the two others from
// the same run:
//
//   - pgbench: the creation statement run by pgbench (benchPgbench), the
//     database's own speed for the same rows in one statement; it leaves the
//     script it ran in .local/e5_create.pgbench.
//   - baseline: the creation statement alone (the same rows in one
//     statement, autocommitted), its documents encoded before the clock
//     starts, issued from Go over a pool of one connection per goroutine.
//     This is the Go form of a pgbench script of the same statement, without
//     pgbench's dependence on a client binary.
//   - direct: the worker's creation (Creator.Run: re-validation, the account
//     transaction, the outcome) called in-process, no HTTP and no queue.
//     "vs-baseline" is its rate over the baseline's, "vs-pgbench" over
//     pgbench's (target ≥ 0.60).
//
// BenchmarkE5 in cmd/importd measures direct creation again beside E5 end
// to end. E5_WRITERS, E5_BATCH and E5_DB_CONNS set direct creation's
// ACCOUNT_WRITERS, ACCOUNT_BATCH and pool size, and E5_WAITS and
// E5_STATEMENTS profile each phase (dbtest.WaitSampler), as they do there.
func BenchmarkCreate(b *testing.B) {
	for _, c := range dbtest.EnvInts(b, "E5_LEVELS", 1, 32) {
		var pgbench, baseline dbtest.Figures
		b.Run(fmt.Sprintf("pgbench/concurrency=%d", c), func(b *testing.B) { pgbench = benchPgbench(b, c) })
		b.Run(fmt.Sprintf("baseline/concurrency=%d", c), func(b *testing.B) { baseline = benchBaseline(b, c) })
		b.Run(fmt.Sprintf("direct/concurrency=%d", c), func(b *testing.B) {
			direct := benchDirect(b, c)
			direct.ReportRatio(b, baseline, "vs-baseline")
			direct.ReportRatio(b, pgbench, "vs-pgbench")
		})
	}
}

// benchRig is a database of the benchmark's own with the creation
// catalogue, and the fixture account validated against it.
type benchRig struct {
	url                string
	d                  *db.DB
	supplierID, teamID int64
	payload            []byte
	acc                *account.Account
}

func newBenchRig(b *testing.B) *benchRig {
	b.Helper()
	r := &benchRig{url: dbtest.NewDatabase(b)}
	var err error
	if r.d, err = db.Open(context.Background(), r.url, 4); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.d.Close() })
	seedCatalogue(b, r.d)
	if err := r.d.Get(&r.supplierID, `SELECT id FROM import_suppliers WHERE code = 'DEMO'`); err != nil {
		b.Fatal(err)
	}
	if err := r.d.Get(&r.teamID, `SELECT id FROM operations_teams`); err != nil {
		b.Fatal(err)
	}
	r.payload = createFixtures(b)["fixture"].payload
	r.acc = validateForCreate(b, r.d, r.payload)
	return r
}

// stage stages n copies of the fixture as numbers prefix-0000000 on, with
// status, in one statement, and returns their numbers and process ids in
// number order.
func (r *benchRig) stage(b *testing.B, prefix string, n int, status string) (eans []string, ids []int64) {
	b.Helper()
	payloads := make([]string, n)
	eans = make([]string, n)
	for i := range eans {
		eans[i] = fmt.Sprintf("%s-%07d", prefix, i)
		var m map[string]any
		_ = json.Unmarshal(r.payload, &m)
		m["external_account_number"] = eans[i]
		p, _ := json.Marshal(m)
		payloads[i] = string(p)
	}
	if _, err := r.d.Exec(`INSERT INTO import_processes (supplier_id, external_account_number, payload, status)
		SELECT $1, u.ean, u.payload, $4 FROM unnest($2::text[], $3::jsonb[]) AS u (ean, payload)`,
		r.supplierID, pq.Array(eans), pq.Array(payloads), status); err != nil {
		b.Fatal(err)
	}
	if err := r.d.Select(&ids, `SELECT id FROM import_processes WHERE external_account_number LIKE $1 || '-%'
		ORDER BY external_account_number`, prefix); err != nil {
		b.Fatal(err)
	}
	return eans, ids
}

// pool opens a pool of one connection per goroutine, with every connection
// open before the clock starts.
func (r *benchRig) pool(b *testing.B, workers int) *db.DB {
	d, err := db.Open(context.Background(), r.url, workers)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	dbtest.RunConcurrently(b, workers, workers, func(int) error { _, err := d.Exec(`SELECT 1`); return err })
	return d
}

func (r *benchRig) accounts(b *testing.B) int {
	var n int
	if err := r.d.Get(&n, `SELECT count(*) FROM accounts`); err != nil {
		b.Fatal(err)
	}
	return n
}

func benchBaseline(b *testing.B, workers int) dbtest.Figures {
	if b.N == 1 {
		return dbtest.Figures{} // the probe run before the -benchtime Nx run
	}
	r := newBenchRig(b)
	_, ids := r.stage(b, "BASE", b.N+workers, "UNKNOWN")
	pool := r.pool(b, workers)
	// One document per account, each under its own process, external
	// account number and service account number, as the worker would write.
	args := make([][]byte, len(ids))
	acc := *r.acc
	for i, id := range ids {
		acc.ExternalAccountNumber = fmt.Sprintf("BASE-%07d", i)
		opt := options{ProcessID: id, OperationsTeamID: r.teamID, Now: time.Now()}
		var err error
		if args[i], err = createDocument(&acc, opt, createdAt(opt), fmt.Sprintf("A-%08X", i)); err != nil {
			b.Fatal(err)
		}
	}
	stmt, err := pool.Preparex(createSQL)
	if err != nil {
		b.Fatal(err)
	}
	defer stmt.Close()
	exec := func(i int) error {
		var accountID sql.NullInt64
		var contract bool
		var missing sql.NullString
		var outbox []byte
		if err := stmt.QueryRow(args[i]).Scan(&accountID, &contract, &missing, &outbox); err != nil {
			return err
		}
		if !accountID.Valid {
			return fmt.Errorf("account %d not created", i)
		}
		return nil
	}
	dbtest.RunConcurrently(b, workers, workers, func(i int) error { return exec(b.N + i) })
	waits := dbtest.StartWaitSampler(b, r.d)
	b.ResetTimer()
	lat := dbtest.RunConcurrently(b, workers, b.N, exec)
	b.StopTimer()
	waits.Report(b)
	return dbtest.ReportLatency(b, lat)
}

func benchDirect(b *testing.B, workers int) dbtest.Figures {
	if b.N == 1 {
		return dbtest.Figures{} // the probe run before the -benchtime Nx run
	}
	r := newBenchRig(b)
	warm, warmIDs := r.stage(b, "WARM", workers, "UNKNOWN")
	eans, ids := r.stage(b, "DIRECT", b.N, "UNKNOWN")
	opt, err := redis.ParseURL(dbtest.NewRedis(b))
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	pool := r.pool(b, min(workers, dbtest.EnvInt(b, "E5_DB_CONNS", 8)))
	log := slog.New(slog.DiscardHandler)
	batching := Batching{Writers: dbtest.EnvInt(b, "E5_WRITERS", DefaultBatching.Writers),
		Size: dbtest.EnvInt(b, "E5_BATCH", DefaultBatching.Size)}
	creator := NewCreator(pool, rdb, account.NewCatalog(pool, nil), nil, NewAnnouncer(rdb, log), log).
		WithBatching(batching, nil)
	create := func(id int64, ean string) error {
		return creator.Run(context.Background(), jobs.AccountProcessPayload{
			ProcessID: id, SupplierID: r.supplierID, SupplierCode: "DEMO",
			ExternalAccountNumber: ean, OperationsTeamID: r.teamID,
		}, false)
	}
	dbtest.RunConcurrently(b, workers, workers, func(i int) error { return create(warmIDs[i], warm[i]) })
	waits := dbtest.StartWaitSampler(b, r.d)
	b.ResetTimer()
	lat := dbtest.RunConcurrently(b, workers, b.N, func(i int) error { return create(ids[i], eans[i]) })
	b.StopTimer()
	waits.Report(b)
	if n := r.accounts(b); n != b.N+workers {
		b.Fatalf("%d accounts created, want %d", n, b.N+workers)
	}
	return dbtest.ReportLatency(b, lat)
}

// pgbenchScript is the pgbench form of account creation: createSQL with
// the account's document as the pgbench variable doc, sent once per
// transaction as one parameter (-M prepared), and the account's own
// number, external account number and process set from pgbench's variables
// client_id and k (k counts each client's transactions from 1). The
// process is looked up by number, as the worker's locked re-read does.
func pgbenchScript(b *testing.B, acc *account.Account, supplierID, teamID int64) (script, doc string) {
	b.Helper()
	opt := options{OperationsTeamID: teamID, Now: time.Now()}
	arg, err := createDocument(acc, opt, createdAt(opt), "A-00000000")
	if err != nil {
		b.Fatal(err)
	}
	query := createSQL
	// The document is read once, in a WITH item of its own; every use of
	// $1 reads it from there.
	if strings.Count(query, "$1::jsonb") != strings.Count(query, "$1") {
		b.Fatal("pgbench: the creation statement uses $1 other than as $1::jsonb")
	}
	number := `'PGB-' || :client_id || '-' || :k`
	head := fmt.Sprintf(`WITH pgb_doc AS MATERIALIZED (
	SELECT jsonb_set(jsonb_set(jsonb_set(:doc::jsonb,
		'{a,number}', to_jsonb('A-' || lpad(upper(to_hex(:client_id * 1048576 + :k)), 8, '0'))),
		'{a,external}', to_jsonb(%[1]s)),
		'{a,process_id}', to_jsonb((SELECT id FROM import_processes WHERE supplier_id = %[2]d AND external_account_number = %[1]s))) AS d),
`, number, supplierID)
	body, ok := strings.CutPrefix(strings.TrimSpace(query), "WITH")
	if !ok {
		b.Fatal("pgbench: the creation statement does not start with WITH")
	}
	stmt := head + strings.ReplaceAll(body, "$1::jsonb", "(SELECT d FROM pgb_doc)")
	// pgbench replaces every :name in a script with a variable; the
	// statement must name no other.
	for _, m := range regexp.MustCompile(`(^|[^:]):([A-Za-z0-9_]+)`).FindAllStringSubmatch(stmt, -1) {
		if m[2] != "doc" && m[2] != "client_id" && m[2] != "k" {
			b.Fatalf("pgbench: the creation statement contains :%s", m[2])
		}
	}
	// A script's SQL command ends at a semicolon at the end of a line.
	return "\\set k :k + 1\n" + stmt + ";\n", string(arg)
}

// pgbenchScriptFile is where BenchmarkCreate leaves the script it ran, so
// that it can be read and run by hand (the document: pgbench -D doc=...):
// in the checkout's .local, which git ignores, since the script names the
// ids of the benchmark's database.
const pgbenchScriptFile = "../../.local/e5_create.pgbench"

// benchPgbench runs pgbenchScript with pgbench at concurrency workers,
// about b.N accounts in all (a whole number per client), and reports its
// rate. Each pgbench client prepares the statement on its first
// transaction, as the worker's pool does once per connection.
func benchPgbench(b *testing.B, workers int) dbtest.Figures {
	if b.N == 1 {
		return dbtest.Figures{}
	}
	if _, err := dbtest.FindPgbench(); err != nil {
		b.Skip(err)
	}
	r := newBenchRig(b)
	perClient := (b.N + workers - 1) / workers
	var numbers, payloads []string
	for c := range workers {
		for k := 1; k <= perClient; k++ {
			numbers = append(numbers, fmt.Sprintf("PGB-%d-%d", c, k))
			payloads = append(payloads, string(r.payload))
		}
	}
	if _, err := r.d.Exec(`INSERT INTO import_processes (supplier_id, external_account_number, payload, status)
		SELECT $1, u.ean, u.payload, 'IN_PROGRESS' FROM unnest($2::text[], $3::jsonb[]) AS u (ean, payload)`,
		r.supplierID, pq.Array(numbers), pq.Array(payloads)); err != nil {
		b.Fatal(err)
	}
	script, doc := pgbenchScript(b, r.acc, r.supplierID, r.teamID)
	if err := os.MkdirAll(filepath.Dir(pgbenchScriptFile), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(pgbenchScriptFile, []byte(script), 0o644); err != nil {
		b.Fatal(err)
	}
	waits := dbtest.StartWaitSampler(b, r.d)
	tps, avg := dbtest.Pgbench(b, r.url, pgbenchScriptFile, workers, perClient, map[string]string{"k": "0", "doc": doc})
	waits.Report(b)
	if n := r.accounts(b); n != workers*perClient {
		b.Fatalf("pgbench created %d accounts, want %d", n, workers*perClient)
	}
	f := dbtest.Figures{Rate: tps}
	b.ReportMetric(f.Rate, "accounts/s")
	b.ReportMetric(avg, "avg-ms")
	b.ReportMetric(0, "ns/op")
	return f
}
