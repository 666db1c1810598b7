package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// waitSampler samples pg_stat_activity of one database every 10 ms while a
// benchmark runs, and reports what its client backends were doing: running
// (CPU), idle in a transaction, or waiting, by wait event, and for heavyweight
// lock waits which lock (type and relation). It is on when E5_WAITS is set
// (E5_WAITS=1 make bench): a sample is a query on the same 2 cores.
type waitSampler struct {
	stop chan struct{}
	done chan map[string]int
}

// startWaitSampler starts sampling d's database, or returns nil when
// E5_WAITS is not set.
func startWaitSampler(b *testing.B, d *sqlx.DB) *waitSampler {
	if os.Getenv("E5_WAITS") == "" {
		return nil
	}
	conn, err := d.Connx(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	w := &waitSampler{stop: make(chan struct{}), done: make(chan map[string]int, 1)}
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

// report stops sampling and logs the profile, most frequent first, as a
// share of all backend samples.
func (w *waitSampler) report(b *testing.B) {
	if w == nil {
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
