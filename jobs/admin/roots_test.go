package admin_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
)

// Migration 00014 gives every existing supplier a root of its own: the
// oldest keeps a valid root, an empty, invalid or overlapping one becomes
// suppliers/<code> (suppliers_/<code> should that overlap too).
func TestMigration00014_GivesEverySupplierARootApart(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	raw, err := fs.ReadFile(db.Migrations(), "00014_document_roots.sql")
	if err != nil {
		t.Fatal(err)
	}
	up, down, ok := strings.Cut(string(raw), "-- +goose Down")
	if !ok {
		t.Fatal("no Down section")
	}
	// The state before the migration: any root may be stored.
	if _, err := d.Exec(down); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Exec(`INSERT INTO import_suppliers (code, document_root) VALUES
		('A', ''), ('B', 'shared'), ('C', 'shared/c'), ('D', '/shared/'), ('E', 'a/../b'),
		('F', 'suppliers/G'), ('G', ''), ('H', 'acme'), ('I', 'acme2/'), ('J', 'suppliers')`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Exec(up); err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Code string `db:"code"`
		Root string `db:"document_root"`
	}
	if err := d.Select(&rows, `SELECT code, document_root FROM import_suppliers ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.Code] = r.Root
	}
	want := map[string]string{
		"A": "suppliers/A", "B": "shared", "C": "suppliers/C", "D": "suppliers/D", "E": "suppliers/E",
		"F": "suppliers/G", "G": "suppliers_/G", "H": "acme", "I": "acme2", "J": "suppliers/J",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("roots after the migration (-want +got):\n%s", diff)
	}
	// And the rule holds from then on.
	if _, err := d.Exec(`UPDATE import_suppliers SET document_root = 'shared/x' WHERE code = 'A'`); err == nil {
		t.Error("a root inside another supplier's was stored")
	}
	if _, err := d.Exec(`UPDATE import_suppliers SET document_root = 'a/./b' WHERE code = 'A'`); err == nil {
		t.Error("a root with a . segment was stored")
	}
}
