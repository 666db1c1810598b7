package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// require-documents is off by default, set at creation with a flag, and
// turned on or off later with set-option.
func TestSupplierSetOption_RequireDocuments(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	c.ok("supplier", "create", "PLAIN")
	c.ok("supplier", "create", "STRICT", "--require-documents")
	required := func() map[string]any {
		t.Helper()
		m := map[string]any{}
		for _, s := range c.jsonList("supplier", "list") {
			m[s["code"].(string)] = s["require_documents"]
		}
		return m
	}
	if diff := cmp.Diff(map[string]any{"PLAIN": false, "STRICT": true}, required()); diff != "" {
		t.Errorf("after create (-want +got):\n%s", diff)
	}
	c.ok("supplier", "set-option", "PLAIN", "require-documents", "on")
	c.ok("supplier", "set-option", "STRICT", "require-documents", "off")
	if diff := cmp.Diff(map[string]any{"PLAIN": true, "STRICT": false}, required()); diff != "" {
		t.Errorf("after set-option (-want +got):\n%s", diff)
	}
	c.fails("not on or off", "supplier", "set-option", "PLAIN", "require-documents", "yes")
	c.fails("not one of require-documents", "supplier", "set-option", "PLAIN", "migration-emails", "on")
	c.fails("does not exist", "supplier", "set-option", "NOPE", "require-documents", "on")
	c.fails("accepts 3 arg(s)", "supplier", "set-option", "PLAIN", "require-documents")
	// Nothing changed by the refusals.
	if diff := cmp.Diff(map[string]any{"PLAIN": true, "STRICT": false}, required()); diff != "" {
		t.Errorf("after refusals (-want +got):\n%s", diff)
	}
}

// Every supplier has a document root of its own: suppliers/<code> by
// default, and never inside or around another supplier's root, at creation
// or when changed, so that a key of one supplier can never reach another's
// documents.
func TestSupplierDocumentRoots_AreNeverEmptyNorNested(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	c.ok("supplier", "create", "ALPHA")
	c.ok("supplier", "create", "BETA", "--document-root", "/imports/beta/")
	c.ok("supplier", "create", "BETA2", "--document-root", "imports/beta2") // apart from imports/beta, segment by segment
	for _, tc := range []struct{ code, root, want string }{
		{"AROUND", "imports", "overlaps the root of supplier BETA"},
		{"INSIDE", "imports/beta/inside", "overlaps the root of supplier BETA"},
		{"SAME", "imports/beta", "overlaps the root of supplier BETA"},
		{"ALL", "suppliers", "overlaps the root of supplier ALPHA"},
		{"UP", "imports/../alpha", "normalised path"},
		{"DOT", "imports/./x", "normalised path"},
	} {
		c.fails(tc.want, "supplier", "create", tc.code, "--document-root", tc.root)
	}
	c.fails("overlaps the root of supplier ALPHA", "supplier", "set-document-root", "BETA", "suppliers/ALPHA/beta")
	c.fails("does not exist", "supplier", "set-document-root", "NOPE", "nope")
	c.ok("supplier", "set-document-root", "BETA", "imports/b/")
	c.ok("supplier", "set-document-root", "BETA", "imports/b") // its own root again is no overlap

	roots := map[string]any{}
	for _, s := range c.jsonList("supplier", "list") {
		roots[s["code"].(string)] = s["document_root"]
	}
	want := map[string]any{"ALPHA": "suppliers/ALPHA", "BETA": "imports/b", "BETA2": "imports/beta2"}
	if diff := cmp.Diff(want, roots); diff != "" {
		t.Errorf("roots (-want +got):\n%s", diff)
	}
	// The database holds the same rule for every writer.
	d := c.db()
	if _, err := d.Exec(`INSERT INTO import_suppliers (code, document_root) VALUES ('RAW', 'imports')`); err == nil {
		t.Error("an INSERT with a root around another supplier's was stored")
	}
	var root string
	if err := d.Get(&root, `INSERT INTO import_suppliers (code) VALUES ('RAW') RETURNING document_root`); err != nil || root != "suppliers/RAW" {
		t.Errorf("an INSERT without a root: %q %v, want suppliers/RAW", root, err)
	}
}

// purge-staged blanks the staged payloads of a supplier's created accounts
// only, refuses while the supplier is Ongoing unless --force, and says how
// many it purged.
func TestSupplierPurgeStaged_BlanksCompletedPayloadsOnly(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	c.ok("supplier", "create", "DONE")
	c.ok("supplier", "create", "OTHER")
	d := c.db()
	personal := `{"customers": [{"email": "ann@example.com", "date_of_birth": "1980-01-02", "mobile": "+447700900123"}]}`
	for _, row := range []struct{ supplier, ean, status, number string }{
		{"DONE", "A-1", "COMPLETED", "SA-1"},
		{"DONE", "A-2", "COMPLETED", "SA-2"},
		{"DONE", "A-3", "UNKNOWN", ""},
		{"DONE", "A-4", "IN_PROGRESS", ""},
		{"OTHER", "B-1", "COMPLETED", "SB-1"},
	} {
		if _, err := d.Exec(`INSERT INTO import_processes (supplier_id, external_account_number, payload, status, service_account_number)
			SELECT id, $2, $3, $4, NULLIF($5, '') FROM import_suppliers WHERE code = $1`, row.supplier, row.ean, personal, row.status, row.number); err != nil {
			t.Fatal(err)
		}
	}
	payloads := func() map[string]string {
		t.Helper()
		var rows []struct {
			EAN     string `db:"external_account_number"`
			Payload string `db:"payload"`
		}
		if err := d.Select(&rows, `SELECT external_account_number, payload::text AS payload FROM import_processes`); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range rows {
			m[r.EAN] = "kept"
			if r.Payload == "{}" {
				m[r.EAN] = "purged"
			}
		}
		return m
	}

	c.fails("Ongoing", "supplier", "purge-staged", "DONE")
	c.fails("does not exist", "supplier", "purge-staged", "NOPE")
	all := map[string]string{"A-1": "kept", "A-2": "kept", "A-3": "kept", "A-4": "kept", "B-1": "kept"}
	if diff := cmp.Diff(all, payloads()); diff != "" {
		t.Fatalf("after refusals (-want +got):\n%s", diff)
	}

	c.ok("supplier", "set-status", "DONE", "Complete")
	if out := c.ok("supplier", "purge-staged", "DONE"); !strings.Contains(out, "purged the staged payloads of 2 created account(s)") {
		t.Errorf("purge-staged printed %q", out)
	}
	want := map[string]string{"A-1": "purged", "A-2": "purged", "A-3": "kept", "A-4": "kept", "B-1": "kept"}
	if diff := cmp.Diff(want, payloads()); diff != "" {
		t.Errorf("after the purge (-want +got):\n%s", diff)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(c.ok("supplier", "purge-staged", "DONE", "--json")), &out); err != nil || out["purged"] != float64(0) {
		t.Errorf("second purge: %v %v, want 0 purged", out, err)
	}
	// --force purges an Ongoing supplier.
	if out := c.ok("supplier", "purge-staged", "OTHER", "--force"); !strings.Contains(out, " 1 created account") {
		t.Errorf("forced purge printed %q", out)
	}
}

// A supplier's time zone is UTC unless given at creation or set later, and
// a name that is no IANA zone is refused.
func TestSupplierTimeZone_SetAtCreationOrLater(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	c.ok("supplier", "create", "HOME")
	c.ok("supplier", "create", "AUS", "--time-zone", "Australia/Sydney")
	zones := func() map[string]any {
		t.Helper()
		m := map[string]any{}
		for _, s := range c.jsonList("supplier", "list") {
			m[s["code"].(string)] = s["time_zone"]
		}
		return m
	}
	if diff := cmp.Diff(map[string]any{"HOME": "UTC", "AUS": "Australia/Sydney"}, zones()); diff != "" {
		t.Errorf("after create (-want +got):\n%s", diff)
	}
	c.ok("supplier", "set-time-zone", "HOME", "Europe/London")
	c.fails("is not an IANA time zone name", "supplier", "set-time-zone", "AUS", "Sydney")
	c.fails("does not exist", "supplier", "set-time-zone", "NOPE", "UTC")
	if diff := cmp.Diff(map[string]any{"HOME": "Europe/London", "AUS": "Australia/Sydney"}, zones()); diff != "" {
		t.Errorf("after set-time-zone (-want +got):\n%s", diff)
	}
}
