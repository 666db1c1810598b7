package dbtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jmoiron/sqlx"
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

// Tests find their servers through TEST_DATABASE_URL and TEST_REDIS_URL only,
// so that a shell whose DATABASE_URL names a real server does not send test
// data there. (t.Setenv rules out t.Parallel.)
func TestURLs_ComeFromTheTestVariablesOnly(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://prod@db.example:5432/prod")
	t.Setenv("REDIS_URL", "redis://cache.example:6379/0")
	for _, tc := range []struct {
		name            string
		testDB, testRDB string
		want            [2]string
	}{
		{"unset: the local stack", "", "", [2]string{
			"postgres://importd@127.0.0.1:55432/importd?sslmode=disable", "redis://127.0.0.1:56379/0"}},
		{"set", "postgres://t@127.0.0.1:1/t", "redis://127.0.0.1:2/0", [2]string{
			"postgres://t@127.0.0.1:1/t", "redis://127.0.0.1:2/0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TEST_DATABASE_URL", tc.testDB)
			t.Setenv("TEST_REDIS_URL", tc.testRDB)
			got := [2]string{dbtest.DatabaseURL(), dbtest.RedisURL()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("[database, redis] URLs (-want +got):\n%s", diff)
			}
		})
	}
}

// A test's database trades durability for speed; a benchmark's keeps
// PostgreSQL's durable defaults, as users run the service, unless
// BENCH_DURABILITY=tuned.
func TestNewDatabase_BenchmarksAreDurableTestsAreNot(t *testing.T) {
	t.Parallel()
	setting := func(tb testing.TB, url string) string {
		d, err := sqlx.Open("postgres", url)
		if err != nil {
			tb.Fatal(err)
		}
		defer d.Close()
		var v string
		if err := d.Get(&v, `SHOW synchronous_commit`); err != nil {
			tb.Fatal(err)
		}
		return v
	}
	inTest := setting(t, dbtest.NewDatabase(t))
	var inBench string
	testing.Benchmark(func(b *testing.B) {
		if inBench == "" {
			inBench = setting(b, dbtest.NewDatabase(b))
		}
	})
	want := "on"
	if os.Getenv(dbtest.BenchDurability) == "tuned" {
		want = "off"
	}
	if d := cmp.Diff(map[string]string{"test": "off", "benchmark": want}, map[string]string{"test": inTest, "benchmark": inBench}); d != "" {
		t.Errorf("synchronous_commit (-want +got):\n%s", d)
	}
}
