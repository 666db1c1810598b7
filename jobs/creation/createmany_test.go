package creation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
)

// manyRig stages the three creation fixtures, each under an external
// account number of its own, in a database of its own.
type manyRig struct {
	d    *db.DB
	team int64
	in   []toCreate
}

func newManyRig(t *testing.T) *manyRig {
	t.Helper()
	d := dbtest.New(t)
	seedCatalogue(t, d)
	var team int64
	if err := d.Get(&team, `SELECT id FROM operations_teams`); err != nil {
		t.Fatal(err)
	}
	r := &manyRig{d: d, team: team}
	for x, name := range []string{"fixture", "reference", "lights"} {
		r.stage(t, name, fmt.Sprintf("M-%d", x))
	}
	return r
}

// stage stages the creation fixture name as external account number
// external, and adds it to r.in.
func (r *manyRig) stage(t *testing.T, name, external string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(createFixtures(t)[name].payload, &m); err != nil {
		t.Fatal(err)
	}
	m["external_account_number"] = external
	payload, _ := json.Marshal(m)
	var id int64
	if err := r.d.Get(&id, `INSERT INTO import_processes (supplier_id, external_account_number, payload, status)
		SELECT id, $2, $3, 'IN_PROGRESS' FROM import_suppliers WHERE code = $1 RETURNING id`,
		m["import_supplier"], external, payload); err != nil {
		t.Fatal(err)
	}
	r.in = append(r.in, toCreate{validateForCreate(t, r.d, payload),
		options{ProcessID: id, OperationsTeamID: r.team, Now: createToday}})
}

// create runs createAccounts for the accounts of r at positions xs, in one
// transaction, with numbers drawn from draws, in order.
func (r *manyRig) create(t *testing.T, draws []string, xs ...int) ([]created, []error) {
	t.Helper()
	in := make([]toCreate, len(xs))
	for i, x := range xs {
		in[i] = r.in[x]
	}
	var (
		cs   []created
		errs []error
	)
	err := db.InTx(context.Background(), r.d, func(tx *db.Tx) error {
		var err error
		cs, errs, err = createAccounts(context.Background(), tx, in, func() string {
			if len(draws) == 0 {
				t.Fatal("more numbers drawn than the test planned")
			}
			n := draws[0]
			draws = draws[1:]
			return n
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(draws) != 0 {
		t.Errorf("numbers %v not drawn", draws)
	}
	return cs, errs
}

// dump returns every row of createTables as JSON, ids and numbers included.
func (r *manyRig) dump(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for table, skip := range createTables {
		var rows []string
		q := `SELECT (to_jsonb(t) - $1::text[])::text AS r FROM ` + table + ` t ORDER BY 1`
		if err := r.d.Select(&rows, q, skipColumns(skip)); err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		out[table] = rows
	}
	return out
}

func skipColumns(skip []string) string {
	b, _ := json.Marshal(skip)
	return "{" + string(b[1:len(b)-1]) + "}"
}

// statementsOf maps each external account number to the transaction and
// command within it that wrote its account: accounts written by one
// execution share them.
func (r *manyRig) statementsOf(t *testing.T) map[string]string {
	t.Helper()
	var rows []struct {
		External string `db:"external_account_number"`
		Cmin     string `db:"cmin"`
	}
	if err := r.d.Select(&rows, `SELECT external_account_number, xmin || '/' || cmin AS cmin FROM accounts`); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, row := range rows {
		out[row.External] = row.Cmin
	}
	return out
}

// progressMatchesARecount fails t when the progress counters kept by the
// triggers differ from a recount of the processes.
func progressMatchesARecount(t *testing.T, d *db.DB) {
	t.Helper()
	var kept, recount []string
	if err := d.Select(&kept, `SELECT supplier_id || ' ' || state || ' ' || sum(n) FROM progress_counts
		GROUP BY supplier_id, state HAVING sum(n) <> 0 ORDER BY 1`); err != nil {
		t.Fatal(err)
	}
	if err := d.Select(&recount, `SELECT supplier_id || ' ' || progress_state(status, last_error) || ' ' || count(*)
		FROM import_processes GROUP BY supplier_id, progress_state(status, last_error) ORDER BY 1`); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(recount, kept); diff != "" {
		t.Errorf("progress counters (-recount +kept):\n%s", diff)
	}
	var minutes, completed int
	if err := d.Get(&minutes, `SELECT coalesce(sum(completed), 0) FROM progress_minutes`); err != nil {
		t.Fatal(err)
	}
	if err := d.Get(&completed, `SELECT count(*) FROM import_processes WHERE status = 'COMPLETED'`); err != nil {
		t.Fatal(err)
	}
	if minutes != completed {
		t.Errorf("progress_minutes counts %d completions, want %d", minutes, completed)
	}
}

// One execution of the creation statement for several accounts writes,
// ids and numbers included, exactly the rows that one execution per
// account writes, account after account; each account's answer is its
// own; the progress counters follow.
func TestCreateAccounts_OneExecutionWritesTheRowsOfOnePerAccount(t *testing.T) {
	t.Parallel()
	draws := []string{"A-0000000A", "A-0000000B", "A-0000000C"}
	var (
		want, got         map[string][]string
		wantOut, gotOut   []created
		wantCmds, gotCmds map[string]string
	)
	t.Run("one per account", func(t *testing.T) {
		r := newManyRig(t)
		for x := range r.in {
			cs, errs := r.create(t, draws[x:x+1], x)
			if errs[0] != nil {
				t.Fatalf("account %d: %v", x, errs[0])
			}
			wantOut = append(wantOut, cs[0])
		}
		want, wantCmds = r.dump(t), r.statementsOf(t)
		progressMatchesARecount(t, r.d)
	})
	t.Run("one for all", func(t *testing.T) {
		r := newManyRig(t)
		cs, errs := r.create(t, draws, 0, 1, 2)
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		gotOut = cs
		got, gotCmds = r.dump(t), r.statementsOf(t)
		progressMatchesARecount(t, r.d)
	})
	if t.Failed() {
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-one per account +one for all):\n%s", diff)
	}
	if diff := cmp.Diff(wantOut, gotOut); diff != "" {
		t.Errorf("answers (-one per account +one for all):\n%s", diff)
	}
	for table, fills := range map[string]int{"accounts": 3, "email_outbox": 1, "notes": 1, "light_pole_supply_points": 1} {
		if len(got[table]) < fills {
			t.Errorf("%d rows in %s, want at least %d: the batch no longer checks that table", len(got[table]), table, fills)
		}
	}
	for _, fx := range createFixtures(t) {
		for _, table := range fx.fills {
			if len(got[table]) == 0 {
				t.Errorf("the batch writes no row in %s: it no longer checks that table", table)
			}
		}
	}
	if distinct(wantCmds) != 3 || distinct(gotCmds) != 1 {
		t.Errorf("accounts written by %d and %d statements, want 3 and 1", distinct(wantCmds), distinct(gotCmds))
	}
}

func distinct(m map[string]string) int {
	seen := map[string]bool{}
	for _, v := range m {
		seen[v] = true
	}
	return len(seen)
}

// A service account number that is taken, or that another account of the
// same execution drew, is drawn again for that account alone, by a further
// execution in the same transaction; every account is created.
func TestCreateAccounts_ATakenNumberIsDrawnAgainForItsAccountOnly(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		draws  []string
		want   []string // each account's number
		second string   // the external account number written by a second execution
	}{
		{"taken by an existing account", []string{"A-00000001", "A-0000000F", "A-00000003", "A-00000004"},
			[]string{"A-00000001", "A-00000004", "A-00000003"}, "M-1"},
		{"drawn twice in one execution", []string{"A-00000001", "A-00000001", "A-00000002", "A-00000003"},
			[]string{"A-00000001", "A-00000002", "A-00000003"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newManyRig(t)
			// An account that holds A-0000000F, outside the batch.
			r.stage(t, "reference", "OTHER")
			if _, errs := r.create(t, []string{"A-0000000F"}, 3); errs[0] != nil {
				t.Fatal(errs[0])
			}

			cs, errs := r.create(t, tc.draws, 0, 1, 2)
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range cs {
				got = append(got, c.ServiceAccountNumber)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("numbers (-want +got):\n%s", diff)
			}
			var stored []string
			if err := r.d.Select(&stored, `SELECT p.service_account_number FROM import_processes p
				JOIN accounts a ON a.import_process_id = p.id AND a.service_account_number = p.service_account_number
				WHERE p.status = 'COMPLETED' AND p.external_account_number LIKE 'M-%' ORDER BY p.external_account_number`); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, stored); diff != "" {
				t.Errorf("processes COMPLETED with their account's number (-want +got):\n%s", diff)
			}
			cmds := r.statementsOf(t)
			var second []string
			for _, ext := range []string{"M-0", "M-1", "M-2"} {
				if cmds[ext] != cmds["M-0"] {
					second = append(second, ext)
				}
			}
			sort.Strings(second)
			if want := []string{tc.second}; tc.second == "" && len(second) != 0 || tc.second != "" && !cmp.Equal(want, second) {
				t.Errorf("accounts written by a second execution: %v, want %q", second, tc.second)
			}
			progressMatchesARecount(t, r.d)
		})
	}
}

// A business contract removed after validation refuses its account, which
// wrote nothing, while the other accounts of its transaction commit: no
// account runs again alone.
func TestBatch_AMissingBusinessContractRefusesOnlyItsAccountWithoutSplitting(t *testing.T) {
	t.Parallel()
	r := newBatchRig(t, 16)
	if _, err := r.d.Exec(`INSERT INTO business_contracts (business_id, supplier_id, identifier)
		SELECT business_id, supplier_id, 'BC-GONE' FROM business_contracts`); err != nil {
		t.Fatal(err)
	}
	gone := func(m map[string]any) { m["business"] = map[string]any{"business_contract_identifier": "BC-GONE"} }
	ps, numbers := stageNumbered(r, 5, map[int]func(map[string]any){2: gone})
	errs := r.runQueued(ps, nil, func() {
		if _, err := r.d.Exec(`DELETE FROM business_contracts WHERE identifier = 'BC-GONE'`); err != nil {
			t.Fatal(err)
		}
	})
	var refused *jobs.Refused
	if !errors.As(errs[2], &refused) || refused.Code != "business_contract_not_found" {
		t.Errorf("B-02: %v, want refused with business_contract_not_found", errs[2])
	}
	if code := r.lastErrorCode("B-02"); code != "business_contract_not_found" || r.created("B-02") {
		t.Errorf("B-02 recorded %q, created %v; want business_contract_not_found and no account", code, r.created("B-02"))
	}
	var others []string
	for i, n := range numbers {
		if i == 2 {
			continue
		}
		others = append(others, n)
		if errs[i] != nil || !r.created(n) {
			t.Errorf("account %s: error %v, created %v; want it created", n, errs[i], r.created(n))
		}
	}
	// The first account had a transaction of its own (it held the writer
	// while the others queued); the three others shared one.
	if n := r.transactions(others[1:]); n != 1 {
		t.Errorf("the queued accounts were written by %d transactions, want 1 (no split)", n)
	}
	var traces int
	if err := r.d.Get(&traces, `SELECT (SELECT count(*) FROM accounts WHERE external_account_number = 'B-02')
		+ (SELECT count(*) FROM import_processes WHERE external_account_number = 'B-02' AND service_account_number IS NOT NULL)`); err != nil || traces != 0 {
		t.Errorf("B-02 left %d traces (%v)", traces, err)
	}
}

// A worker prepares the statement for several accounts before any
// transaction, with the others: inside a shared transaction it costs one
// round trip, not a preparation of its 30 parts for every batch.
func TestRun_PreparesTheStatementForSeveralAccountsAhead(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	x, err := sqlx.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	plain := db.New(x)
	defer plain.Close()
	seedCatalogue(t, plain)
	r := &manyRig{d: plain}
	if err := plain.Get(&r.team, `SELECT id FROM operations_teams`); err != nil {
		t.Fatal(err)
	}
	for x, name := range []string{"fixture", "reference", "lights"} {
		r.stage(t, name, fmt.Sprintf("M-%d", x))
	}
	c, writes := countedCreator(t, url)
	ctx := context.Background()
	var supplierID int64
	if err := plain.Get(&supplierID, `SELECT id FROM import_suppliers WHERE code = 'DEMO'`); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx, jobs.AccountProcessPayload{ProcessID: r.in[0].opt.ProcessID, SupplierID: supplierID,
		SupplierCode: "DEMO", ExternalAccountNumber: "M-0", OperationsTeamID: r.team}, true); err != nil {
		t.Fatal(err)
	}
	tx, err := c.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	before := writes.Load()
	_, errs, err := createAccounts(ctx, tx, r.in[1:], newServiceAccountNumber)
	if err := errors.Join(append(errs, err)...); err != nil {
		t.Fatal(err)
	}
	if n := writes.Load() - before; n != 1 {
		t.Errorf("creating two accounts in a transaction cost %d round trips, want 1", n)
	}
}

// TestCreateAccounts_ExplainOneExecutionAgainstOnePerAccount logs EXPLAIN
// ANALYZE of 16 fixture accounts written by one execution of createManySQL
// against one execution of createSQL, both prepared and on their generic
// plans, each run a few times first (rolled back), for README "Inside
// PostgreSQL". It measures and asserts nothing, so it runs only with
// E5_EXPLAIN=1 (E5_EXPLAIN=1 go test ./jobs/creation -run Explain -v).
func TestCreateAccounts_ExplainOneExecutionAgainstOnePerAccount(t *testing.T) {
	if os.Getenv("E5_EXPLAIN") == "" {
		t.Skip("a measurement: set E5_EXPLAIN=1")
	}
	r := newManyRig(t)
	const n = 16
	for i := 0; i < n; i++ {
		r.stage(t, "fixture", fmt.Sprintf("E-%02d", i))
	}
	docs := make([][]byte, n)
	for i, c := range r.in[3:] {
		var err error
		if docs[i], err = createDocument(c.acc, c.opt, createdAt(c.opt), fmt.Sprintf("A-%08X", i)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	conn, err := r.d.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		`SET plan_cache_mode = force_generic_plan`,
		`PREPARE one (jsonb) AS ` + createSQL,
		`PREPARE many (jsonb) AS ` + createManySQL,
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// explain runs EXPLAIN ANALYZE of stmt with arg in a transaction it
	// rolls back, six times, and answers the last: execution time and the
	// progress trigger's line.
	explain := func(stmt string, arg []byte) string {
		var out []string
		for range 6 {
			tx, err := conn.BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			// EXECUTE takes no bind parameters: the document goes in as a
			// literal.
			err = tx.SelectContext(ctx, &plan, "EXPLAIN (ANALYZE) EXECUTE "+stmt+" ("+pq.QuoteLiteral(string(arg))+")")
			_ = tx.Rollback()
			if err != nil {
				t.Fatal(err)
			}
			out = out[:0]
			for _, l := range plan {
				if strings.Contains(l, "Execution Time") || strings.Contains(l, "Trigger progress_track") {
					out = append(out, strings.TrimSpace(l))
				}
			}
		}
		return strings.Join(out, "; ")
	}
	t.Logf("one execution for %d accounts: %s", n, explain("many", append(append([]byte{'['}, bytes.Join(docs, []byte{','})...), ']')))
	t.Logf("one account alone: %s", explain("one", docs[0]))
}
