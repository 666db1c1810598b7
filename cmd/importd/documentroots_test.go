package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/documents"
)

// Every supplier's document root is its own: a path can only name a
// document under it. A root that was the whole bucket would let a key of
// that supplier link, and probe for, another supplier's documents by their
// full key.
func TestDocumentRoots_KeyOfOneSupplierCannotLinkOrProbeAnothersDocuments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startService(t, "api", map[string]string{"DOCUMENTS_URL": "file://" + dir})
	ctx := context.Background()
	// ALPHA takes the default root; BETA chooses one, which may not lie
	// inside ALPHA's.
	if _, err := admin.CreateSupplier(ctx, s.db, admin.Supplier{Code: "ALPHA", RequireDocuments: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateSupplier(ctx, s.db, admin.Supplier{Code: "BETA", DocumentRoot: "suppliers/ALPHA/beta"}); err == nil {
		t.Fatal("BETA's root inside ALPHA's was accepted")
	}
	beta, err := admin.CreateSupplier(ctx, s.db, admin.Supplier{Code: "BETA", DocumentRoot: "beta-docs"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTeam(ctx, s.db, "ops"); err != nil {
		t.Fatal(err)
	}
	docs, err := documents.Open(ctx, "file://"+dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer docs.Close()
	for root, path := range map[string]string{beta.DocumentRoot: "secret.pdf", documents.DefaultRoot("ALPHA"): "mine.pdf"} {
		if _, err := docs.Put(ctx, root, path, strings.NewReader("%PDF")); err != nil {
			t.Fatal(err)
		}
	}
	e := &postImportEnv{service: s, docs: docs, tok: s.accessToken(t, s.newKey(t, "alpha-team", "ALPHA"))}
	e.account(t, "ALPHA", "ACC-1", "")

	note := func(path string) attempt {
		r := e.do(t, "POST", pathNotes, e.tok, map[string]any{"import_supplier": "ALPHA", "external_account_number": "ACC-1",
			"notes": []any{map[string]any{"document_paths": []any{map[string]any{"document_path": path}}}}})
		a := attempt{Status: r.Status}
		if errs, _ := r.Body["errors"].([]any); len(errs) == 1 {
			a.Code, _ = errs[0].(map[string]any)["code"].(string)
		}
		return a
	}
	got := map[string]attempt{}
	for _, p := range []string{"mine.pdf", "beta-docs/secret.pdf", "/beta-docs/secret.pdf", "../../beta-docs/secret.pdf", "secret.pdf"} {
		got[p] = note(p)
	}
	missing := attempt{400, documents.CodeNotFound}
	want := map[string]attempt{
		"mine.pdf":                   {201, ""},
		"beta-docs/secret.pdf":       missing, // was found under the bucket-wide root
		"/beta-docs/secret.pdf":      missing,
		"../../beta-docs/secret.pdf": {400, documents.CodeInvalidPath},
		"secret.pdf":                 missing,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("E6 notes of ALPHA naming documents (-want +got):\n%s", diff)
	}
}
