//go:build chaos || scale

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

// `make chaos` (docs/operating.md, "Faults at volume"): a generated cohort
// of 10,000 accounts (CHAOS_ACCOUNTS, 1.5% invalid) with 100 businesses
// (CHAOS_BUSINESSES) through the built `importctl run` (concurrency
// CHAOS_CONCURRENCY, default 16), one API and three worker processes, on a
// PostgreSQL and a Redis of the run's own, with a vendor that answers at
// once and one that takes 1.5 s, while 50 workers (CHAOS_WORKER_KILLS),
// the API (3 times) and the runner (twice, resumed on its journal) are
// killed with SIGKILL and Redis (twice) and PostgreSQL (once) are
// restarted, with an E5 concurrency limit of 12. The table of what it
// measured is logged.
func TestChaos_Full(t *testing.T) {
	res := runPipeline(t, chaosConfig{
		Accounts: envInt(t, "CHAOS_ACCOUNTS", 10000), InvalidRate: 0.015, Seed: 40,
		Businesses: envInt(t, "CHAOS_BUSINESSES", 100), Concurrency: envInt(t, "CHAOS_CONCURRENCY", 16), Workers: 3,
		WorkerKills: envInt(t, "CHAOS_WORKER_KILLS", 50), APIKills: 3, RunnerKills: 2, RedisRestarts: 2, PostgresRestarts: 1,
		OwnPostgres: true, SlowVendor: 1500 * time.Millisecond,
		Deadline: 50 * time.Minute, Settle: 3 * time.Minute,
		Env: map[string]string{"PROCESS_CONCURRENCY_LIMIT": "12"},
	})
	t.Log("\n" + res.table())
}

// `make chaos` too (docs/operating.md, "Faults at volume"): 3,000 accounts
// (CHAOS_NETWORK_ACCOUNTS) and 30 businesses through the same pipeline,
// with every importd process reaching PostgreSQL and Redis through
// toxiproxy, while 30 network faults (CHAOS_NETWORK_FAULTS: latency
// spikes, bandwidth limits, connections reset, a blackhole that then cuts,
// each store unreachable; networkFaults) come in turn, and 2 workers are
// killed. The same checks; the table says what a user saw during each.
func TestChaos_Network(t *testing.T) {
	res := runPipeline(t, chaosConfig{
		Accounts: envInt(t, "CHAOS_NETWORK_ACCOUNTS", 3000), InvalidRate: 0.015, Seed: 41,
		Businesses: 30, Concurrency: envInt(t, "CHAOS_CONCURRENCY", 16), Workers: 3,
		WorkerKills: 2, NetworkFaults: envInt(t, "CHAOS_NETWORK_FAULTS", 30), Proxied: true,
		OwnPostgres: true, SlowVendor: 1500 * time.Millisecond,
		Deadline: 40 * time.Minute, Settle: 3 * time.Minute,
		Env: map[string]string{"PROCESS_CONCURRENCY_LIMIT": "12"},
	})
	t.Log("\n" + res.table())
}
