package creation

import (
	"context"
	"testing"

	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/db/dbtest"
)

// The locking read of a creation transaction runs on its prepared
// statement's generic plan once PostgreSQL has compared it with five custom
// plans: planning it anew for every transaction cost more than running it.
func TestLockProcesses_RunsOnTheGenericPlan(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	conn, err := d.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := conn.PreparexContext(ctx, lockProcessesSQL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 12 {
		ids := pq.Int64Array{int64(i)}
		if i%3 == 1 {
			ids = append(ids, int64(i+1), int64(i+2))
		}
		rows, err := st.QueryContext(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	var plans struct {
		Generic int64 `db:"generic_plans"`
		Custom  int64 `db:"custom_plans"`
	}
	err = conn.GetContext(ctx, &plans, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`, lockProcessesSQL)
	if err != nil {
		t.Fatal(err)
	}
	if plans.Generic == 0 || plans.Custom > 5 {
		t.Errorf("12 executions: %d on the generic plan, %d planned anew; want the generic plan after at most 5", plans.Generic, plans.Custom)
	}
}
