// Package dbtest gives each test its own PostgreSQL database and its own Redis
// database number on the servers named by DATABASE_URL and REDIS_URL (as
// started by `make test`), so that tests run in parallel without sharing state.
//
// Databases are cloned from a template that holds the migrated schema. The
// template's name carries a hash of the migration files, so a changed
// migration builds a fresh template instead of reusing a stale one.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // PostgreSQL driver

	"github.com/bulkimport/bulkimport/db"
)

// Default URLs match deploy/local/stack.sh.
const (
	defaultDatabaseURL = "postgres://importd@127.0.0.1:55432/importd?sslmode=disable"
	defaultRedisURL    = "redis://127.0.0.1:56379/0"
)

// DatabaseURL is the server tests use: DATABASE_URL or the local stack's.
func DatabaseURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return defaultDatabaseURL
}

// RedisURL is the server tests use: REDIS_URL or the local stack's.
func RedisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return defaultRedisURL
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

func withDatabase(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	q := u.Query()
	// Test data need not survive a crash; this roughly halves commit latency.
	q.Set("synchronous_commit", "off")
	u.RawQuery = q.Encode()
	return u.String()
}

func migrationsHash() string {
	h := sha256.New()
	var names []string
	_ = fs.WalkDir(db.Migrations(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	for _, n := range names {
		b, _ := fs.ReadFile(db.Migrations(), n)
		h.Write([]byte(n))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func ensureTemplate(ctx context.Context) (string, error) {
	templateOnce.Do(func() {
		name := "importd_tmpl_" + migrationsHash()
		admin, err := sqlx.Open("postgres", DatabaseURL())
		if err != nil {
			templateErr = err
			return
		}
		defer admin.Close()
		conn, err := admin.Connx(ctx)
		if err != nil {
			templateErr = fmt.Errorf("connect to %s (run `make test`, which starts the servers): %w", DatabaseURL(), err)
			return
		}
		defer conn.Close()
		// Test binaries of several packages start at once; one builds the
		// template while the others wait here.
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(727274)"); err != nil {
			templateErr = err
			return
		}
		defer conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock(727274)")
		var exists bool
		if err := conn.GetContext(ctx, &exists, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)", name); err != nil {
			templateErr = err
			return
		}
		if !exists {
			_, _ = conn.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name)
			if _, err := conn.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
				templateErr = err
				return
			}
			tdb, err := sqlx.Open("postgres", withDatabase(DatabaseURL(), name))
			if err != nil {
				templateErr = err
				return
			}
			_, err = db.Migrate(ctx, tdb.DB)
			tdb.Close()
			if err != nil {
				templateErr = fmt.Errorf("migrate template: %w", err)
				return
			}
			if _, err := conn.ExecContext(ctx, "ALTER DATABASE "+name+" WITH is_template true ALLOW_CONNECTIONS false"); err != nil {
				templateErr = err
				return
			}
		}
		templateName = name
	})
	return templateName, templateErr
}

func randomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// NewDatabase creates an empty, migrated database for the test, drops it when
// the test ends, and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	tmpl, err := ensureTemplate(ctx)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	name := randomName("importd_t_")
	admin, err := sqlx.Open("postgres", DatabaseURL())
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	admin.SetMaxOpenConns(1)
	if _, err := admin.ExecContext(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmpl)); err != nil {
		admin.Close()
		t.Fatalf("dbtest: create database: %v", err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("dbtest: drop %s: %v", name, err)
		}
	})
	return withDatabase(DatabaseURL(), name)
}

// New returns a connection pool to a fresh, migrated database of the test's
// own. The pool is closed before the database is dropped.
func New(t testing.TB) *sqlx.DB {
	t.Helper()
	u := NewDatabase(t)
	d, err := db.Open(context.Background(), u, 10)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// IsolatedURL reports whether s names one of the test databases, for
// assertions in tests that start the whole service.
func IsolatedURL(s string) bool { return strings.Contains(s, "importd_t_") }
