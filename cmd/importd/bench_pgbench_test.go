package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/creation"
)

// pgbenchScript is the pgbench form of account creation: the creation
// statement (creation.Statement) with the fixture's document as the
// pgbench variable doc, sent once per transaction as one parameter (-M
// prepared), and the account's own number, external account number and
// process set from pgbench's variables client_id and k (k counts each
// client's transactions from 1). The process is looked up by number, as the
// worker's locked re-read does.
func pgbenchScript(b *testing.B, acc *account.Account, supplierID, teamID int64) (script, doc string) {
	b.Helper()
	query, arg, err := creation.Statement(acc, creation.Options{OperationsTeamID: teamID, Now: time.Now()}, "A-00000000")
	if err != nil {
		b.Fatal(err)
	}
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

// pgbenchScriptFile is where BenchmarkE5 leaves the script it ran, so that
// it can be read and run by hand (the document: pgbench -D doc=...): in the
// checkout's .local, which git ignores, since the script names the ids of
// the benchmark's database.
const pgbenchScriptFile = "../../.local/e5_create.pgbench"

// findPgbench returns the path of pgbench: on PATH, else in PostgreSQL's
// Debian directories, as deploy/local/stack.sh finds the server.
func findPgbench() (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(found) == 0 {
		return "", fmt.Errorf("pgbench not found (package postgresql-client or postgresql)")
	}
	return found[len(found)-1], nil
}

// pgbenchConn turns the service's lib/pq URL into a libpq one for pgbench:
// libpq refuses server settings as URL parameters, so they go to PGOPTIONS.
func pgbenchConn(b *testing.B, dsn string) (conn string, env []string) {
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatal(err)
	}
	libpq := map[string]bool{"sslmode": true, "connect_timeout": true, "application_name": true}
	q := u.Query()
	var opts []string
	for k, v := range q {
		if !libpq[k] {
			opts = append(opts, "-c "+k+"="+v[0])
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	// pgbench's parameters (the number, from client_id and k) make the
	// planner's default keep planning this 30-part statement anew on every
	// execution (custom plans: about 5 times the cost of the account at
	// concurrency 1). The service's statement, whose one parameter is the
	// document, runs on the generic plan; so does the baseline.
	opts = append(opts, "-c plan_cache_mode=force_generic_plan")
	return u.String(), append(os.Environ(), "PGOPTIONS="+strings.Join(opts, " "))
}

// benchE5Pgbench runs pgbenchScript with pgbench at concurrency workers,
// about b.N accounts in all (a whole number per client), and reports its
// rate. Each pgbench client prepares the statement on its first
// transaction, as the worker's pool does once per connection.
func benchE5Pgbench(b *testing.B, workers int) e5Figures {
	if b.N == 1 {
		return e5Figures{}
	}
	pgbench, err := findPgbench()
	if err != nil {
		b.Skip(err)
	}
	s := startService(b, "api", map[string]string{"LOG_LEVEL": "error"})
	seedDemo(b, s, admin.Supplier{})
	supplierID, teamID := benchDemoIDs(b, s)
	perClient := (b.N + workers - 1) / workers
	var numbers, payloads []string
	payload, _ := json.Marshal(fixture(b, "PGB"))
	for c := range workers {
		for k := 1; k <= perClient; k++ {
			numbers = append(numbers, fmt.Sprintf("PGB-%d-%d", c, k))
			payloads = append(payloads, string(payload))
		}
	}
	if _, err := s.db.Exec(`INSERT INTO import_processes (supplier_id, external_account_number, payload, status)
		SELECT $1, u.ean, u.payload, 'IN_PROGRESS' FROM unnest($2::text[], $3::jsonb[]) AS u (ean, payload)`,
		supplierID, pq.Array(numbers), pq.Array(payloads)); err != nil {
		b.Fatal(err)
	}
	acc, err := account.Validator{Catalog: account.NewCatalog(s.db, nil)}.Validate(b.Context(), payload)
	if err != nil {
		b.Fatal(err)
	}
	script, doc := pgbenchScript(b, acc, supplierID, teamID)
	if err := os.MkdirAll(filepath.Dir(pgbenchScriptFile), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(pgbenchScriptFile, []byte(script), 0o644); err != nil {
		b.Fatal(err)
	}
	conn, env := pgbenchConn(b, s.env["DATABASE_URL"])
	cmd := exec.Command(pgbench, "-n", "-M", "prepared", "-c", strconv.Itoa(workers), "-j", "2",
		"-t", strconv.Itoa(perClient), "-D", "k=0", "-D", "doc="+doc, "-f", pgbenchScriptFile, conn)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	waits := startWaitSampler(b, s.db)
	b.ResetTimer()
	err = cmd.Run()
	b.StopTimer()
	waits.report(b)
	if err != nil {
		b.Fatalf("pgbench: %v\n%s", err, out.String())
	}
	if n := s.count(b, `SELECT count(*) FROM accounts`); n != workers*perClient {
		b.Fatalf("pgbench created %d accounts, want %d\n%s", n, workers*perClient, out.String())
	}
	tps := regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`).FindStringSubmatch(out.String())
	lat := regexp.MustCompile(`latency average = ([0-9.]+) ms`).FindStringSubmatch(out.String())
	if tps == nil || lat == nil {
		b.Fatalf("pgbench: no tps or latency in its output:\n%s", out.String())
	}
	f := e5Figures{}
	f.rate, _ = strconv.ParseFloat(tps[1], 64)
	avg, _ := strconv.ParseFloat(lat[1], 64)
	b.ReportMetric(f.rate, "accounts/s")
	b.ReportMetric(avg, "avg-ms")
	b.ReportMetric(0, "ns/op")
	return f
}
