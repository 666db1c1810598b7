//go:build soak

package main

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// soakEnvInt is the positive integer in the environment variable name, or
// def.
func soakEnvInt(t *testing.T, name string, def int) int {
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

// `make soak` (docs/performance.md, "Soak"): a cohort of 200,000 accounts
// (SOAK_ACCOUNTS) with 1.5% invalid lines, one business account in ten and
// a payment instruction on one in four, through the built `importctl run`
// (concurrency SOAK_CONCURRENCY, default 16), one API and two worker
// processes. It samples every tenth of the cohort, writes soak.csv and
// soak-relations.csv into SOAK_REPORT (default .local/soak at the
// repository's root), and fails on a missed target as on a failed check.
func TestSoak_Full(t *testing.T) {
	dir := os.Getenv("SOAK_REPORT")
	if dir == "" {
		dir = "../../.local/soak"
	}
	runSoak(t, soakConfig{
		Accounts: soakEnvInt(t, "SOAK_ACCOUNTS", 200000), InvalidRate: 0.015, Seed: 20,
		Concurrency: soakEnvInt(t, "SOAK_CONCURRENCY", 16), ReportDir: dir,
		Deadline: time.Duration(soakEnvInt(t, "SOAK_HOURS", 12)) * time.Hour, AssertTargets: true,
	})
}
