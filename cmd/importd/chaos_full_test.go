//go:build chaos

package main

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// envInt is the integer in the environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// `make chaos` (docs/operating.md, "Faults at volume"): a cohort of 5,000 accounts
// (CHAOS_ACCOUNTS) driven by 48 clients (CHAOS_CLIENTS) through one API and
// three worker processes, on a PostgreSQL and a Redis of the run's own,
// while 20 workers and the API (3 times) are killed with SIGKILL and Redis
// (twice) and PostgreSQL (once) are restarted, with an E5 concurrency limit
// of 40. Nothing may be lost or
// created twice, and what the clients were told must agree with the
// database; the table of what it measured is logged.
func TestChaos_Full(t *testing.T) {
	res := runChaos(t, chaosConfig{
		Accounts: envInt(t, "CHAOS_ACCOUNTS", 5000), Clients: envInt(t, "CHAOS_CLIENTS", 48), Workers: 3,
		WorkerKills: 20, APIKills: 3, RedisRestarts: 2, PostgresRestarts: 1, OwnPostgres: true,
		Deadline: 40 * time.Minute, Settle: 3 * time.Minute,
		Env: map[string]string{"PROCESS_CONCURRENCY_LIMIT": "40"},
	})
	t.Log("\n" + res.table())
}
