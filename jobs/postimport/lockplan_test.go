package postimport

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/lib/pq"
)

// TestAccountLookups_ReadAFewPagesOnAFreshTable runs every lookup of an
// account by supplier code and external account number, on the generic
// plan (what a prepared statement or a PL/pgSQL function keeps) of a table
// of 20,000 accounts never analysed, the first minutes of a migration into
// a new database, and counts the pages each reads. Found by both columns of
// its unique key, an account costs a few pages; planned accounts first,
// with the account number alone as the index condition, it cost a walk of
// the whole index, a hundred pages and more.
func TestAccountLookups_ReadAFewPagesOnAFreshTable(t *testing.T) {
	t.Parallel()
	// One supplier, as in most migrations: with more, the planner finds
	// them a dearer first step, and plans accounts last.
	d := dbtest.New(t)
	ctx := context.Background()
	addAccounts := func(from, to int) {
		t.Helper()
		_, err := d.ExecContext(ctx, `
			WITH p AS (
				INSERT INTO import_processes (supplier_id, external_account_number, payload, status, service_account_number)
				SELECT s.id, 'EXT-' || i, '{}', 'COMPLETED', 'A-' || upper(lpad(to_hex(i), 8, '0'))
				FROM import_suppliers s, generate_series($2::int, $3::int) i WHERE s.code = $1
				RETURNING id, supplier_id, external_account_number, service_account_number),
			a AS (
				INSERT INTO accounts (service_account_number, supplier_id, external_account_number, import_process_id,
					operations_team_id, billing_country)
				SELECT p.service_account_number, p.supplier_id, p.external_account_number, p.id,
					(SELECT id FROM operations_teams), 'GB' FROM p
				RETURNING id)
			INSERT INTO ledgers (account_id) SELECT id FROM a`, supplierCode, from, to)
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`INSERT INTO import_suppliers (code, document_root) VALUES ('` + supplierCode + `', 'imports/acme')`,
		`INSERT INTO operations_teams (name) VALUES ('ops')`,
		// No autoanalyze: its statistics would have the plans made again.
		`ALTER TABLE accounts SET (autovacuum_enabled = off)`,
	} {
		if _, err := d.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	addAccounts(1, 3)
	conn, err := d.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lookups := []struct {
		name, sql string
		args      []string
	}{
		{"findAccount", findAccountSQL, []string{supplierCode, "%[1]s"}},
		{"lockAccount", findAccountSQL + ` FOR NO KEY UPDATE OF a`, []string{supplierCode, "%[1]s"}},
		{"lockLookup", lockLookupSQL, []string{supplierCode, "%[1]s", "{}", "{}"}},
		{"existing statements", existingStatementsSQL, []string{supplierCode, "%[1]s", "{x}"}},
		{"post_transactions", `SELECT post_transactions($1, $2, '{"transactions": [], "delta": "0"}', NULL, true)`,
			[]string{supplierCode, "%[1]s"}},
		{"post_notes", `SELECT post_notes($1, $2, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}')`, []string{supplierCode, "%[1]s"}},
		{"post_statements", `SELECT post_statements($1, $2, '{}', '{}', '{}', '{}', '{}', '{}', '{}')`, []string{supplierCode, "%[1]s"}},
	}
	// Each is planned while the account is alone (a function plans its
	// statements at its first call)...
	explain := make([]string, len(lookups))
	for i, l := range lookups {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PREPARE lookup%d AS %s`, i, l.sql)); err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		// EXPLAIN takes no parameters: the values are written in, the
		// account number at each run.
		args := make([]string, len(l.args))
		for j, a := range l.args {
			args[j] = pq.QuoteLiteral(a)
		}
		explain[i] = fmt.Sprintf(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE lookup%d (%s)`, i, strings.Join(args, ", "))
		// Planned anew the first five times, then (plan_cache_mode auto)
		// on the generic plan, as a pool connection runs it.
		for range 6 {
			if _, err := conn.ExecContext(ctx, fmt.Sprintf(explain[i], "EXT-3")); err != nil {
				t.Fatalf("%s: %v", l.name, err)
			}
		}
	}
	// ... and runs again, on the same plan, for the last of 20,000 (a
	// PL/pgSQL SELECT INTO stops at the first row: a scan in the table's
	// order would find an early account at once).
	addAccounts(4, 20_000)
	for i, l := range lookups {
		var plan []byte
		if err := conn.GetContext(ctx, &plan, fmt.Sprintf(explain[i], "EXT-20000")); err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		var p []struct {
			Plan struct {
				Hit  int64 `json:"Shared Hit Blocks"`
				Read int64 `json:"Shared Read Blocks"`
			}
		}
		if err := json.Unmarshal(plan, &p); err != nil {
			t.Fatal(err)
		}
		pages := p[0].Plan.Hit + p[0].Plan.Read
		t.Logf("%s: %d pages", l.name, pages)
		if pages > 30 {
			t.Errorf("%s read %d pages for one account among 20,000; want a few", l.name, pages)
		}
	}
}
