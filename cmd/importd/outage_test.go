package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/auth"
)

// With PostgreSQL stopped (a restart, as the chaos test makes), a request
// gets 500 database_unavailable with a Retry-After: a service failure that
// passes, not the internal_error that 50 requests of a chaos run got, which
// also names a worker's failure after its retries. It answers as before
// once the database is back.
func TestErrors_DatabaseOutOfReachIsAServiceFailureToRetry(t *testing.T) {
	t.Parallel()
	pg := startPostgres(t, t.TempDir())
	dbURL := pg.url("importd")
	if err := run(context.Background(), []string{"migrate"}, func(k string) string { return map[string]string{"DATABASE_URL": dbURL}[k] }, io.Discard, io.Discard, nil); err != nil {
		t.Fatal(err)
	}
	s := startService(t, "api", map[string]string{"DATABASE_URL": dbURL})
	d, err := db.Open(context.Background(), dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key, err := auth.CreateKey(context.Background(), d, "k", "", auth.AllSuppliers())
	if err != nil {
		t.Fatal(err)
	}
	if r := s.do(t, "GET", "/v1/data-import/whoami/", key, nil); r.Status != 200 {
		t.Fatalf("whoami with the database up: %d %s", r.Status, r.Raw)
	}

	pg.stop()
	r := s.do(t, "GET", "/v1/data-import/whoami/", key, nil)
	if r.Status != 500 || r.Body["code"] != "database_unavailable" {
		t.Fatalf("whoami with the database stopped: %d %s, want 500 database_unavailable", r.Status, r.Raw)
	}
	if r.Header.Get("Retry-After") == "" {
		t.Error("database_unavailable without Retry-After")
	}

	pg.start()
	waitFor(t, "whoami answering again", 20*time.Second, func() bool {
		return s.do(t, "GET", "/v1/data-import/whoami/", key, nil).Status == 200
	})
}
