package taskwait_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// An outcome written to PostgreSQL whose announcement never comes is noticed
// within a poll interval or two, not at the end of the whole wait.
func TestWaitOrCheck_NoticesUnannouncedOutcomeInPostgreSQL(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE outcome (done boolean NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	w, err := taskwait.Subscribe(ctx, rdb, "task-without-announcement")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	time.AfterFunc(300*time.Millisecond, func() {
		_, _ = db.ExecContext(context.Background(), `INSERT INTO outcome VALUES (true)`)
	})
	done := func(ctx context.Context) (bool, error) {
		var n int
		err := db.GetContext(ctx, &n, `SELECT count(*) FROM outcome`)
		return n > 0, err
	}
	start := time.Now()
	_, ok, err := w.WaitOrCheck(ctx, 30*time.Second, time.Second, done)
	elapsed := time.Since(start)
	if err != nil || ok {
		t.Fatalf("WaitOrCheck = ok %v, err %v; want a wait ended by the check", ok, err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("outcome noticed after %v, want at most 2s", elapsed)
	}
}
