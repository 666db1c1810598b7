package creation

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/account"
)

// maxRoundTrips is what the worker may spend on PostgreSQL for one account
// once its connection has prepared its statements: the read of the staged
// row, the catalogue lookup of validation, BEGIN, the locked read, the
// creation statement, COMMIT. Writing row by row cost about 65.
const maxRoundTrips = 6

// Creating an account costs a handful of round trips to PostgreSQL, however
// many rows it writes.
func TestRun_CreatesAnAccountInAHandfulOfRoundTrips(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	x, err := sqlx.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	plain := db.New(x)
	defer plain.Close()
	seedCatalogue(t, plain)
	payload := createFixtures(t)["fixture"].payload
	ids := []int64{stageProcess(t, plain, "DEMO", payload)}
	var m map[string]any
	_ = json.Unmarshal(payload, &m)
	m["external_account_number"] = "X-2"
	second, _ := json.Marshal(m)
	var id2 int64
	if err := plain.Get(&id2, `INSERT INTO import_processes (supplier_id, external_account_number, payload, status)
		SELECT id, 'X-2', $1, 'IN_PROGRESS' FROM import_suppliers WHERE code = 'DEMO' RETURNING id`, second); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, id2)
	var supplierID, teamID int64
	if err := plain.Get(&supplierID, `SELECT id FROM import_suppliers WHERE code = 'DEMO'`); err != nil {
		t.Fatal(err)
	}
	if err := plain.Get(&teamID, `SELECT id FROM operations_teams`); err != nil {
		t.Fatal(err)
	}

	c, writes := countedCreator(t, url)
	ctx := context.Background()

	var got []int64
	for i, id := range ids {
		before := writes.Load()
		err := c.Run(ctx, jobs.AccountProcessPayload{ProcessID: id, SupplierID: supplierID, SupplierCode: "DEMO",
			ExternalAccountNumber: fmt.Sprintf("X-%d", i+1), OperationsTeamID: teamID}, true)
		if err != nil {
			t.Fatalf("account %d: %v", i+1, err)
		}
		got = append(got, writes.Load()-before)
	}
	var n int
	if err := plain.Get(&n, `SELECT count(*) FROM import_processes WHERE status = 'COMPLETED'`); err != nil || n != 2 {
		t.Fatalf("%d accounts completed (%v), want 2", n, err)
	}
	t.Logf("round trips per account: %v", got)
	if got[1] > maxRoundTrips {
		t.Errorf("the second account cost %d round trips, want at most %d", got[1], maxRoundTrips)
	}
}

// countedCreator returns a Creator on a pool of one connection to url whose
// writes, that is round trips, are counted in writes.
func countedCreator(t *testing.T, url string) (c *Creator, writes *atomic.Int64) {
	t.Helper()
	counted, writes := dbtest.Counted(t, url)
	counted.SetMaxOpenConns(1) // one connection, whose statements the first account prepares
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	log := slog.New(slog.DiscardHandler)
	c = NewCreator(counted, rdb, account.NewCatalog(counted, nil), nil, NewAnnouncer(rdb, log), log)
	c.now = func() time.Time { return createToday }
	return c, writes
}
