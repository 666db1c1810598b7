package auth

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// A key's scope is explicit: all suppliers is a flag, a scoped key sees
// exactly its suppliers, and nothing can make a scoped key see more (were
// all suppliers read from an empty list, a key whose suppliers were all
// deleted would see every supplier).
func TestScope_ScopedKeyNeverWidens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	if _, err := d.Exec(`INSERT INTO import_suppliers (code) VALUES ('ALPHA'), ('BETA')`); err != nil {
		t.Fatal(err)
	}
	s := New(d, []byte(headerTestSecret))
	alpha, err := CreateKey(ctx, d, "alpha", "", OnlySuppliers("ALPHA"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := CreateKey(ctx, d, "all", "", AllSuppliers())
	if err != nil {
		t.Fatal(err)
	}
	sees := func(key string) map[string]bool {
		t.Helper()
		p, err := s.AuthenticateKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]bool{"ALPHA": p.CanSee("ALPHA"), "BETA": p.CanSee("BETA"), "LATER": p.CanSee("LATER")}
	}
	if diff := cmp.Diff(map[string]bool{"ALPHA": true, "BETA": false, "LATER": false}, sees(alpha)); diff != "" {
		t.Errorf("scoped key (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"ALPHA": true, "BETA": true, "LATER": true}, sees(all)); diff != "" {
		t.Errorf("all-suppliers key (-want +got):\n%s", diff)
	}

	// The supplier of a scoped key cannot be deleted.
	if _, err := d.Exec(`DELETE FROM import_suppliers WHERE code = 'ALPHA'`); err == nil {
		t.Fatal("the supplier of a scoped key was deleted")
	}
	// A supplier no key names can be.
	if _, err := d.Exec(`DELETE FROM import_suppliers WHERE code = 'BETA'`); err != nil {
		t.Errorf("deleting a supplier no key names: %v", err)
	}
	// Should a scoped key lose its suppliers some other way, it sees none.
	if _, err := d.Exec(`DELETE FROM api_key_suppliers`); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{"ALPHA": false, "BETA": false, "LATER": false}, sees(alpha)); diff != "" {
		t.Errorf("scoped key without suppliers (-want +got):\n%s", diff)
	}
}

func TestCreateKey_ScopeMustBeExplicit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	if _, err := d.Exec(`INSERT INTO import_suppliers (code) VALUES ('ALPHA')`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		scope Scope
		code  string
	}{
		{"no scope", Scope{}, "invalid_scope"},
		{"empty list", OnlySuppliers(), "invalid_scope"},
		{"both", Scope{All: true, Suppliers: []string{"ALPHA"}}, "invalid_scope"},
		{"unknown supplier", OnlySuppliers("NOPE"), "import_supplier_not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := CreateKey(ctx, d, "k-"+tc.name, "", tc.scope)
			p, _ := problem.As(err)
			if p == nil || p.Code != tc.code {
				t.Errorf("CreateKey(%+v) = %v, want %s", tc.scope, err, tc.code)
			}
		})
	}
	var n int
	if err := d.Get(&n, `SELECT count(*) FROM api_keys`); err != nil || n != 0 {
		t.Errorf("refused keys stored: %d %v", n, err)
	}
}
