package dbtest_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db/dbtest"
)

func TestNew_GivesEachTestItsOwnMigratedDatabase(t *testing.T) {
	t.Parallel()
	a, b := dbtest.New(t), dbtest.New(t)
	if _, err := a.Exec(`INSERT INTO operations_teams (name) VALUES ('only-in-a')`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.Get(&n, `SELECT count(*) FROM operations_teams`); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database b sees %d teams written to database a", n)
	}
}

func TestNewRedis_GivesDistinctDatabases(t *testing.T) {
	t.Parallel()
	u1, u2 := dbtest.NewRedis(t), dbtest.NewRedis(t)
	if u1 == u2 {
		t.Fatalf("two calls returned the same database %s", u1)
	}
	o1, _ := redis.ParseURL(u1)
	o2, _ := redis.ParseURL(u2)
	c1, c2 := redis.NewClient(o1), redis.NewClient(o2)
	defer c1.Close()
	defer c2.Close()
	ctx := context.Background()
	if err := c1.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, _ := c2.Exists(ctx, "k").Result(); n != 0 {
		t.Fatal("a key written in one test database is visible in another")
	}
}
