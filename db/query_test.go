package db_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jmoiron/sqlx"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
)

// onePool returns a pool of one connection to a database of the test's
// own, so that what a test reads from pg_prepared_statements is what the
// pool's only connection holds; max bounds the texts held prepared.
func onePool(t *testing.T, max int) *db.DB {
	t.Helper()
	x, err := sqlx.Open("postgres", dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	x.SetMaxOpenConns(1)
	d := db.NewBounded(x, max)
	t.Cleanup(func() { d.Close() })
	return d
}

// runs is what a connection holds prepared of one text: how many
// statements, and how many times they ran.
type runs struct {
	Statements int `db:"statements"`
	Executions int `db:"executions"`
}

// preparedRuns reads runs of query from the connection that q runs on.
func preparedRuns(t *testing.T, ctx context.Context, q sqlx.QueryerContext, query string) runs {
	t.Helper()
	var r runs
	err := sqlx.GetContext(ctx, q, &r, `SELECT count(*) AS statements, coalesce(sum(generic_plans + custom_plans), 0) AS executions
		FROM pg_prepared_statements WHERE statement = $1`, query)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitHeld waits until d holds query prepared on the pool.
func waitHeld(t *testing.T, d *db.DB, query string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !d.Held(query); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%q was not prepared on the pool", query)
		}
	}
}

// A text run twice through a DB, on the pool or inside a transaction, is
// prepared once and executed twice, whichever query method runs it.
func TestDB_AStatementRunTwiceIsPreparedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want := runs{Statements: 1, Executions: 2}

	t.Run("on the pool", func(t *testing.T) {
		t.Parallel()
		d := onePool(t, db.MaxStatements)
		const query = `SELECT $1::int + 1`
		var n int
		if err := d.GetContext(ctx, &n, query, 1); err != nil || n != 2 {
			t.Fatalf("GetContext: %d, %v", n, err)
		}
		if err := d.QueryRowxContext(ctx, query, 2).Scan(&n); err != nil || n != 3 {
			t.Fatalf("QueryRowxContext: %d, %v", n, err)
		}
		if diff := cmp.Diff(want, preparedRuns(t, ctx, d, query)); diff != "" {
			t.Errorf("prepared statements (-want +got):\n%s", diff)
		}
	})

	t.Run("in a transaction", func(t *testing.T) {
		t.Parallel()
		d := onePool(t, db.MaxStatements)
		const query = `SELECT $1::int + 2`
		// The first transaction meets the text before the pool has it;
		// the second finds it prepared on the pool.
		for i := range 2 {
			tx, err := d.BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			if err := tx.SelectContext(ctx, &got, query, 1); err != nil || !cmp.Equal(got, []int{3}) {
				t.Fatalf("transaction %d: SelectContext: %v, %v", i+1, got, err)
			}
			if _, err := tx.ExecContext(ctx, query, 2); err != nil {
				t.Fatalf("transaction %d: ExecContext: %v", i+1, err)
			}
			if diff := cmp.Diff(want, preparedRuns(t, ctx, tx, query)); diff != "" {
				t.Errorf("transaction %d: prepared statements (-want +got):\n%s", i+1, diff)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			waitHeld(t, d, query)
		}
	})
}

// SelectPlannedForArgs never prepares its text, so PostgreSQL plans it for
// the values of each call.
func TestDB_SelectPlannedForArgsIsNeverPrepared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := onePool(t, db.MaxStatements)
	const query = `SELECT g FROM generate_series(1, $1::int) AS g`
	for n := range 7 {
		var got []int
		if err := d.SelectPlannedForArgs(ctx, &got, query, n+1); err != nil || len(got) != n+1 {
			t.Fatalf("call %d: %v, %v", n+1, got, err)
		}
	}
	if diff := cmp.Diff(runs{}, preparedRuns(t, ctx, d, query)); diff != "" {
		t.Errorf("prepared statements (-want +got):\n%s", diff)
	}
	if d.Held(query) {
		t.Error("the text is held prepared")
	}
}

// A transaction that holds the pool's only connection runs a text the pool
// has not prepared without waiting for a second connection, and the text is
// prepared on the pool for the next transactions once one is free.
func TestTx_NewQueryNeverWaitsForASecondConnection(t *testing.T) {
	t.Parallel()
	d := onePool(t, db.MaxStatements)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tx, err := d.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	const query = `SELECT $1::int + 3`
	var n int
	if err := tx.GetContext(ctx, &n, query, 1); err != nil || n != 4 {
		t.Fatalf("statement in the transaction: %d, %v", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, d, query)
}

// Texts beyond the bound run unprepared, on the pool and in a transaction,
// and are counted; the texts within it stay prepared.
func TestDB_TextsBeyondTheBoundRunUnprepared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := onePool(t, 2)
	within := []string{`SELECT $1::int + 10`, `SELECT $1::int + 20`}
	const beyond = `SELECT $1::int + 30`
	for _, q := range append(within, beyond, beyond) {
		var n int
		if err := d.GetContext(ctx, &n, q, 1); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tx, err := d.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	const beyondInTx = `SELECT $1::int + 40`
	if _, err := tx.ExecContext(ctx, beyondInTx, 1); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, q := range append(within, beyond, beyondInTx) {
		got[q] = preparedRuns(t, ctx, tx.Tx, q).Statements
	}
	want := map[string]int{within[0]: 1, within[1]: 1, beyond: 0, beyondInTx: 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prepared statements by text (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(db.StatementStats{Prepared: 2, Unprepared: 3}, d.StatementStats()); diff != "" {
		t.Errorf("StatementStats (-want +got):\n%s", diff)
	}
}

// A migration that changes what a prepared statement answers (a column
// added to a table it reads with *) makes PostgreSQL refuse the statement
// ("cached plan must not change result type"). On the pool, the statement
// is prepared again and answers at once; in a transaction, which the
// refusal has aborted, the next transaction runs it.
func TestDB_AStatementWhoseResultChangedIsPreparedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := onePool(t, db.MaxStatements)
	d.MustExec(`CREATE TABLE t (a int); INSERT INTO t VALUES (1)`)
	const query = `SELECT * FROM t`
	var before []struct {
		A int `db:"a"`
	}
	if err := d.SelectContext(ctx, &before, query); err != nil {
		t.Fatal(err)
	}

	d.MustExec(`ALTER TABLE t ADD COLUMN b int DEFAULT 2`)
	var onPool []struct {
		A int `db:"a"`
		B int `db:"b"`
	}
	if err := d.SelectContext(ctx, &onPool, query); err != nil {
		t.Fatalf("on the pool after the migration: %v", err)
	}
	if diff := cmp.Diff(1, len(onPool)); diff != "" || onPool[0].B != 2 {
		t.Errorf("on the pool after the migration: %+v", onPool)
	}

	d.MustExec(`ALTER TABLE t ADD COLUMN c int DEFAULT 3`)
	var inTx []struct {
		A int `db:"a"`
		B int `db:"b"`
		C int `db:"c"`
	}
	attempts := 0
	err := func() error {
		for ; attempts < 2; attempts++ {
			err := db.InTx(ctx, d, func(tx *db.Tx) error { return tx.SelectContext(ctx, &inTx, query) })
			if err == nil {
				return nil
			}
			t.Logf("transaction %d: %v", attempts+1, err)
		}
		return fmt.Errorf("%d transactions failed", attempts)
	}()
	if err != nil || len(inTx) != 1 || inTx[0].C != 3 {
		t.Fatalf("in a transaction after the migration: %+v, %v", inTx, err)
	}
}

// A statement prepared on a connection that the server then ends runs on
// the next call, prepared on a new connection.
func TestDB_AStatementOutlivesItsConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := onePool(t, db.MaxStatements)
	const query = `SELECT pg_backend_pid() + $1::int`
	var pid int
	if err := d.GetContext(ctx, &pid, query, 0); err != nil {
		t.Fatal(err)
	}
	other := dbtest.New(t)
	var ended bool
	if err := other.GetContext(ctx, &ended, `SELECT pg_terminate_backend($1)`, pid); err != nil || !ended {
		t.Fatalf("terminate the pool's connection: %v, %v", ended, err)
	}
	var again int
	err := d.GetContext(ctx, &again, query, 0)
	if err != nil {
		t.Fatalf("the call after the connection ended: %v", err)
	}
	if again == pid {
		t.Fatalf("ran on the ended connection %d", pid)
	}
	if diff := cmp.Diff(runs{Statements: 1, Executions: 1}, preparedRuns(t, ctx, d, query)); diff != "" {
		t.Errorf("prepared statements on the new connection (-want +got):\n%s", diff)
	}
}

// Callers running one text at once share one prepared statement.
func TestDB_ConcurrentCallersShareOneStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	const query = `SELECT $1::int * 2`
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Go(func() {
			var n int
			if err := d.GetContext(ctx, &n, query, i); err != nil || n != 2*i {
				errs <- fmt.Errorf("caller %d: %d, %v", i, n, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if diff := cmp.Diff(db.StatementStats{Prepared: 1}, d.StatementStats()); diff != "" {
		t.Errorf("StatementStats (-want +got):\n%s", diff)
	}
}

// No code outside db chooses whether a statement is prepared: the
// service's Go files (tests aside) name neither sqlx's pool, transaction
// or statement types nor the methods that prepare by hand.
func TestCallSites_RunQueriesThroughDBAlone(t *testing.T) {
	t.Parallel()
	types := map[string]bool{"DB": true, "Tx": true, "Stmt": true, "NamedStmt": true}
	methods := map[string]bool{"Preparex": true, "PreparexContext": true, "PrepareContext": true,
		"StmtxContext": true, "StmtContext": true, "PrepareNamed": true, "PrepareNamedContext": true}
	var found []string
	for _, dir := range []string{"../jobs", "../api", "../worker", "../cmd"} {
		err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "sqlx" && types[sel.Sel.Name] {
					found = append(found, path+": sqlx."+sel.Sel.Name)
				} else if methods[sel.Sel.Name] {
					found = append(found, path+": ."+sel.Sel.Name)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(found) > 0 {
		t.Errorf("code that runs queries around db.DB and db.Tx:\n%s", strings.Join(found, "\n"))
	}
}

// A Get that finds no row answers db.ErrNotFound, the one "no such row" the
// domain branches on, on the pool and in a transaction alike; code that asks
// database/sql's question (sql.ErrNoRows) gets the same answer.
func TestGetContext_NoRowIsErrNotFound(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := t.Context()
	var n int
	err := d.GetContext(ctx, &n, `SELECT 1 WHERE false`)
	if !errors.Is(err, db.ErrNotFound) || !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("DB.GetContext of no row: %v, want db.ErrNotFound and sql.ErrNoRows", err)
	}
	err = db.InTx(ctx, d, func(tx *db.Tx) error { return tx.GetContext(ctx, &n, `SELECT 1 WHERE false`) })
	if !errors.Is(err, db.ErrNotFound) || !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("Tx.GetContext of no row: %v, want db.ErrNotFound and sql.ErrNoRows", err)
	}
	if err := d.GetContext(ctx, &n, `SELECT 1`); err != nil || n != 1 {
		t.Errorf("DB.GetContext of a row: %d, %v", n, err)
	}
}
