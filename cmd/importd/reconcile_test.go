package main

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/status"
)

func pathReconciliation(supplier string) string {
	return "/v1/data-import/reconciliation/" + supplier + "/"
}

// The reconciliation summaries are scoped like E11 to E13: a key that sees
// the supplier gets the list (staged accounts without an account are not
// in it) with the supplier's country, and a key that does not gets exactly
// the answer of a supplier that does not exist.
func TestReconcile_InvisibleSupplierAnswersExactlyLikeAMissingOne(t *testing.T) {
	t.Parallel()
	e := newImportsEnv(t)
	e.addSupplier(t, "HIDDEN", status.Ongoing)
	e.stageOK(t, accountDoc(t, "HIDDEN", "H-1"))
	without := newImportsEnv(t)

	r := e.s.do(t, "GET", pathReconciliation("HIDDEN"), e.tok, nil)
	if r.Status != http.StatusOK || string(r.Raw) != "[]" || r.Header.Get("Import-Supplier-Country") != "GB" {
		t.Fatalf("with a key that sees HIDDEN: %d %s %v, want 200 [] with country GB", r.Status, r.Raw, r.Header)
	}
	invisible := e.s.do(t, "GET", pathReconciliation("HIDDEN"), e.otherTok, nil)
	missing := without.s.do(t, "GET", pathReconciliation("HIDDEN"), without.tok, nil)
	if invisible.Status != http.StatusNotFound || missing.Status != http.StatusNotFound {
		t.Fatalf("status invisible %d, missing %d, want 404 both", invisible.Status, missing.Status)
	}
	if d := cmp.Diff(string(missing.Raw), string(invisible.Raw)); d != "" {
		t.Errorf("invisible supplier answers unlike a missing one (-missing +invisible):\n%s", d)
	}
	if r := e.s.do(t, "GET", pathReconciliation("HIDDEN"), "", nil); r.Status != http.StatusUnauthorized {
		t.Errorf("without a token: %d, want 401", r.Status)
	}
}
