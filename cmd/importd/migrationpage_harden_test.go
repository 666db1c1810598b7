package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/status"
)

// Each request of the migration page compacted the progress counters: 785
// requests a second of one key slowed another supplier's E10 from 1.5 to
// 41 ms, as each compaction rewrote the counter rows that every status
// change writes to. The page now only reads them (the worker's sweep
// folds them, and none runs here): after the page and its summary were
// read, the counters still hold every delta, and the page's counts are
// right without a compaction.
func TestHarden_MigrationPageRequestsDoNotCompactTheCounters(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", map[string]string{"MONITORING_USER": pageUser, "MONITORING_PASSWORD": pagePass})
	ctx := context.Background()
	if _, err := admin.CreateSupplier(ctx, s.db, admin.Supplier{Code: "DEMO", Status: status.Ongoing}); err != nil {
		t.Fatal(err)
	}
	// One statement each, so that each leaves a delta row of its own.
	const staged = 5
	for i := range staged {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO import_processes (supplier_id, external_account_number, payload)
			SELECT id, $1, '{}' FROM import_suppliers WHERE code = 'DEMO'`, fmt.Sprintf("A-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() int {
		t.Helper()
		var n int
		if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM progress_counts c JOIN import_suppliers s ON s.id = c.supplier_id
			WHERE s.code = 'DEMO'`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := rows()
	if before < staged {
		t.Fatalf("%d counter rows for %d statements: nothing to compact, the test proves nothing", before, staged)
	}
	for range 3 {
		for _, path := range []string{"/migration/", "/migration/DEMO/", "/migration/DEMO/summary.json"} {
			if r := s.basicGet(t, path, pageUser, pagePass); r.Status != 200 {
				t.Fatalf("%s: %d %.300s", path, r.Status, r.Raw)
			}
		}
	}
	if after := rows(); after != before {
		t.Errorf("the page's requests folded the counters: %d rows, %d before", after, before)
	}
	if got := decodeSummary(t, s.basicGet(t, "/migration/DEMO/summary.json", pageUser, pagePass)); got.Supplier.Counts["staged"] != staged {
		t.Errorf("staged %d, want %d", got.Supplier.Counts["staged"], staged)
	}
}
