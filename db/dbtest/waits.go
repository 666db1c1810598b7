package dbtest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkimport/bulkimport/db"
)

// WaitSampler samples pg_stat_activity of one database every 10 ms while a
// benchmark runs, and reports what its client backends were doing: running
// (CPU), idle in a transaction, or waiting, by wait event, and for heavyweight
// lock waits which lock (type and relation). It is on when E5_WAITS is set
// (E5_WAITS=1 make bench): a sample is a query on the same 2 cores. The
// benchmarks of account creation (jobs/creation, cmd/importd) use it.
//
// With E5_STATEMENTS set, it also reports pg_stat_statements for the
// database over the same span: each statement's share of the execution
// time, and its calls and time per account (see statementProfile): the
// first 12, or as many as E5_STATEMENTS says when it is a larger number.
type WaitSampler struct {
	stop chan struct{}
	done chan map[string]int
	d    *db.DB // for the statement profile; nil when E5_STATEMENTS is not set
}

// StartWaitSampler starts sampling d's database, or returns nil when
// neither E5_WAITS nor E5_STATEMENTS is set.
func StartWaitSampler(b *testing.B, d *db.DB) *WaitSampler {
	waits, statements := os.Getenv("E5_WAITS") != "", os.Getenv("E5_STATEMENTS") != ""
	if !waits && !statements {
		return nil
	}
	w := &WaitSampler{}
	if statements {
		resetStatements(b, d)
		w.d = d
	}
	if !waits {
		return w
	}
	conn, err := d.Connx(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	w.stop, w.done = make(chan struct{}), make(chan map[string]int, 1)
	go func() {
		defer conn.Close()
		seen := map[string]int{}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				w.done <- seen
				return
			case <-tick.C:
			}
			var rows []string
			// For a heavyweight lock wait, the relation: of the lock
			// awaited, or, for a row lock (a wait on the holder's
			// transaction id), of the tuple lock the waiter took first.
			err := conn.SelectContext(context.Background(), &rows, `
				SELECT CASE
					WHEN a.state = 'idle in transaction' THEN 'idle in transaction'
					WHEN a.wait_event_type IS NULL THEN 'running (CPU)'
					WHEN a.wait_event_type = 'Lock' THEN 'Lock:' || a.wait_event || coalesce(' on ' || (
						SELECT l.relation::regclass::text FROM pg_locks l
						WHERE l.pid = a.pid AND l.relation IS NOT NULL AND (NOT l.granted OR l.locktype = 'tuple')
						ORDER BY l.granted LIMIT 1), '')
					ELSE a.wait_event_type || ':' || a.wait_event
				END
				FROM pg_stat_activity a
				WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
					AND a.backend_type = 'client backend' AND a.state <> 'idle'`)
			if err != nil {
				continue
			}
			for _, r := range rows {
				seen[r]++
			}
		}
	}()
	return w
}

// Report stops sampling and logs the profile, most frequent first, as a
// share of all backend samples. A nil *WaitSampler reports nothing.
func (w *WaitSampler) Report(b *testing.B) {
	if w == nil {
		return
	}
	if w.d != nil {
		reportStatements(b, w.d)
	}
	if w.stop == nil {
		return
	}
	close(w.stop)
	seen := <-w.done
	total := 0
	keys := make([]string, 0, len(seen))
	for k, n := range seen {
		total += n
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return seen[keys[i]] > seen[keys[j]] })
	var sb strings.Builder
	fmt.Fprintf(&sb, "wait events of active backends (%d samples):\n", total)
	for _, k := range keys {
		fmt.Fprintf(&sb, "  %5.1f%%  %s\n", 100*float64(seen[k])/float64(total), k)
	}
	// Printed, not logged: a benchmark's log keeps only its first lines.
	fmt.Printf("%s: %s", b.Name(), sb.String())
}

// resetStatements empties pg_stat_statements for d's database, creating the
// extension first. The server must load the library at start
// (shared_preload_libraries), as deploy/local/stack.sh starts it.
func resetStatements(b *testing.B, d *db.DB) {
	if _, err := d.Exec(`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		b.Fatalf("E5_STATEMENTS: %v", err)
	}
	if _, err := d.Exec(`SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)`); err != nil {
		b.Fatalf("E5_STATEMENTS: %v (the server must be started with shared_preload_libraries = 'pg_stat_statements': deploy/local/stack.sh down, then up)", err)
	}
}

// statementRow is one statement of the profile.
type statementRow struct {
	Query string  `db:"query"`
	Calls int64   `db:"calls"`
	Total float64 `db:"total"` // ms
}

// reportStatements prints the statements of d's database since
// resetStatements, by execution time: their share of it, calls and
// milliseconds per account (b.N accounts). Planning is not tracked
// (pg_stat_statements.track_planning adds contention of its own).
func reportStatements(b *testing.B, d *db.DB) {
	var rows []statementRow
	if err := d.Select(&rows, `
		SELECT regexp_replace(left(query, 90), '\s+', ' ', 'g') AS query, calls, total_exec_time AS total
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND query NOT LIKE '%pg_stat_%'
		ORDER BY total_exec_time DESC`); err != nil {
		b.Fatalf("E5_STATEMENTS: %v", err)
	}
	var total float64
	for _, r := range rows {
		total += r.Total
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "statements by execution time (%.0f ms in all, %.3f ms per account):\n", total, total/float64(b.N))
	limit := 12
	if n, err := strconv.Atoi(os.Getenv("E5_STATEMENTS")); err == nil && n > 1 {
		limit = n // E5_STATEMENTS=40 prints 40 statements
	}
	for i, r := range rows {
		if i == limit {
			break
		}
		fmt.Fprintf(&sb, "  %5.1f%%  %6.2f calls/account  %6.3f ms/account  %s\n",
			100*r.Total/total, float64(r.Calls)/float64(b.N), r.Total/float64(b.N), r.Query)
	}
	fmt.Printf("%s: %s", b.Name(), sb.String())
}
