package prepared

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"

	"github.com/bulkimport/bulkimport/db/dbtest"
)

// A transaction that holds the pool's only connection gets a statement it
// has not seen without waiting for a second connection, and the statement
// is prepared on the pool for the next transactions once one is free.
func TestIn_NewQueryNeverWaitsForASecondConnection(t *testing.T) {
	t.Parallel()
	d, err := sqlx.Open("postgres", dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.SetMaxOpenConns(1)
	s := New(d)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tx, err := d.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	const query = `SELECT $1::int + 1`
	st, err := s.In(ctx, tx, query)
	if err != nil {
		t.Fatalf("In with the only connection held: %v", err)
	}
	var n int
	if err := st.GetContext(ctx, &n, 1); err != nil || n != 2 {
		t.Fatalf("statement in the transaction: %d, %v", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, ok := s.lookup(query); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the query was not prepared on the pool once the connection was free")
		}
	}
}
