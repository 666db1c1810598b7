package dbtest

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// FindPgbench returns the path of PostgreSQL's pgbench, the baseline that
// measures the database's own speed at a statement.
func FindPgbench() (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(found) == 0 {
		return "", fmt.Errorf("pgbench not found (package postgresql-client or postgresql)")
	}
	return found[len(found)-1], nil
}

// PgbenchConn turns the service's lib/pq URL into a libpq one for pgbench:
// libpq refuses server settings as URL parameters (synchronous_commit,
// when a benchmark is tuned), so they go to PGOPTIONS, and pgbench runs
// with the same settings as the service's connections.
func PgbenchConn(b *testing.B, dsn string) (conn string, env []string) {
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
	// pgbench's parameters make the planner's default keep planning a
	// statement anew on every execution (custom plans); the service's
	// statements run on their generic plans, and so does pgbench then.
	opts = append(opts, "-c plan_cache_mode=force_generic_plan")
	return u.String(), append(os.Environ(), "PGOPTIONS="+strings.Join(opts, " "))
}

// Pgbench runs pgbench's script file at concurrency clients, each
// transactions times, on the database at dsn with the variables vars
// (-D), and returns its transactions per second and average latency (ms).
func Pgbench(b *testing.B, dsn, script string, clients, transactions int, vars map[string]string) (tps, avgMS float64) {
	b.Helper()
	bin, err := FindPgbench()
	if err != nil {
		b.Skip(err)
	}
	conn, env := PgbenchConn(b, dsn)
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", "2", "-t", strconv.Itoa(transactions)}
	for k, v := range vars {
		args = append(args, "-D", k+"="+v)
	}
	cmd := exec.Command(bin, append(args, "-f", script, conn)...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	b.ResetTimer()
	err = cmd.Run()
	b.StopTimer()
	if err != nil {
		b.Fatalf("pgbench: %v\n%s", err, out.String())
	}
	t := regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`).FindStringSubmatch(out.String())
	l := regexp.MustCompile(`latency average = ([0-9.]+) ms`).FindStringSubmatch(out.String())
	if t == nil || l == nil {
		b.Fatalf("pgbench: no tps or latency in its output:\n%s", out.String())
	}
	tps, _ = strconv.ParseFloat(t[1], 64)
	avgMS, _ = strconv.ParseFloat(l[1], 64)
	return tps, avgMS
}
