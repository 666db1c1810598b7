// Package dbtest gives each test its own PostgreSQL database and its own Redis
// database number on the servers named by TEST_DATABASE_URL and
// TEST_REDIS_URL (as started by `make test`), so that tests run in parallel
// without sharing state. Tests never read DATABASE_URL or REDIS_URL: a shell
// pointed at a real server does not make the tests write to it.
//
// Databases come from github.com/peterldowns/pgtestdb: it clones each test's
// database from a template holding the migrated schema, names the template
// after a hash of the migrations (a changed migration builds a fresh
// template instead of reusing a stale one), builds it once across test
// binaries that start together (under an advisory lock) and drops a test's
// database when the test passes. A failed test's database is kept for
// inspection; the test's log names it.
package dbtest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"testing"

	_ "github.com/lib/pq" // PostgreSQL driver
	"github.com/peterldowns/pgtestdb"

	"github.com/bulkimport/bulkimport/db"
)

// Default URLs match deploy/local/stack.sh.
const (
	defaultDatabaseURL = "postgres://importd@127.0.0.1:55432/importd?sslmode=disable"
	defaultRedisURL    = "redis://127.0.0.1:56379/0"
)

// DatabaseURL is the server tests use: TEST_DATABASE_URL or the local stack's.
func DatabaseURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return defaultDatabaseURL
}

// RedisURL is the server tests use: TEST_REDIS_URL or the local stack's.
func RedisURL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return defaultRedisURL
}

// migrator builds the template with the service's own migration code, so the
// tests' schema is the one `importd migrate` makes. (pgtestdb's goose
// migrator is a module of its own that the Go module proxy does not serve.)
type migrator struct{}

// Hash covers the migrations' names as well as their contents: goose takes a
// migration's version from its file name.
func (migrator) Hash() (string, error) {
	h := sha256.New()
	var names []string
	err := fs.WalkDir(db.Migrations(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := fs.ReadFile(db.Migrations(), n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (migrator) Migrate(ctx context.Context, d *sql.DB, _ pgtestdb.Config) error {
	_, err := db.Migrate(ctx, d)
	return err
}

// config is the pgtestdb configuration for the server at DatabaseURL.
func config(t testing.TB) pgtestdb.Config {
	t.Helper()
	u, err := url.Parse(DatabaseURL())
	if err != nil || u.Host == "" {
		t.Fatalf("dbtest: TEST_DATABASE_URL %q is not a postgres:// URL", DatabaseURL())
	}
	user, password := "", ""
	if u.User != nil {
		user = u.User.Username()
		password, _ = u.User.Password()
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	q := u.Query()
	return pgtestdb.Config{
		DriverName: "postgres",
		Host:       u.Hostname(),
		Port:       port,
		User:       user,
		Password:   password,
		Database:   u.Path[min(1, len(u.Path)):],
		Options:    q.Encode(),
		// The tests connect as the service does, with the server's own
		// user rather than pgtestdb's restricted role: some tests create
		// databases of their own.
		TestRole: &pgtestdb.Role{Username: user, Password: password},
		// Services started by a test may still hold connections (the API key
		// listener reconnects on its own) when the database is dropped.
		ForceTerminateConnections: true,
	}
}

// BenchDurability is the variable that sets how a benchmark's database
// keeps its commits: "durable" (the default) or "tuned".
const BenchDurability = "BENCH_DURABILITY"

// Durable reports whether t's databases keep PostgreSQL's durable defaults.
// A test's do not: its data need not survive a crash, and
// synchronous_commit=off roughly halves its commits' latency. A
// benchmark's do, as users run the service, unless BENCH_DURABILITY=tuned
// asks for the tuned mode (synchronous_commit=off) for comparison. (The
// soak and the chaos runs start clusters of their own, at PostgreSQL's
// defaults.)
func Durable(t testing.TB) bool {
	if _, measured := t.(*testing.B); !measured {
		return false
	}
	return os.Getenv(BenchDurability) != "tuned"
}

// DurabilityMode names the mode t's databases run in, for a benchmark to
// print beside its figures.
func DurabilityMode(t testing.TB) string {
	if Durable(t) {
		return "durable (synchronous_commit=on, PostgreSQL's default)"
	}
	return "tuned (synchronous_commit=off: a crash may lose the last commits)"
}

// NewDatabase creates an empty, migrated database for the test, drops it when
// the test ends, and returns its URL. A benchmark's is durable (Durable)
// and says so in the benchmark's output.
func NewDatabase(t testing.TB) string {
	t.Helper()
	if b, ok := t.(*testing.B); ok {
		b.Logf("database: %s", DurabilityMode(b))
	}
	c := pgtestdb.Custom(t, config(t), migrator{})
	if Durable(t) {
		return c.URL()
	}
	// Set on the URL each test gets, not in pgtestdb's Config: pgtestdb
	// keeps the Config of the first database made from a template for the
	// ones made after it, benchmarks' too.
	u, err := url.Parse(c.URL())
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	q := u.Query()
	// Test data need not survive a crash; this roughly halves commit
	// latency.
	q.Set("synchronous_commit", "off")
	u.RawQuery = q.Encode()
	return u.String()
}

// New returns a connection pool, as the service opens it (db.Open), to a
// fresh, migrated database of the test's own. The pool is closed before the
// database is dropped.
func New(t testing.TB) *db.DB {
	t.Helper()
	u := NewDatabase(t)
	d, err := db.Open(context.Background(), u, 10)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
