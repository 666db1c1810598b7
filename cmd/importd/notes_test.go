package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/admin"
)

// referenceNotes are the notes of the reference's own E6 example
// (reference-api.md sections 7 and 10): a pinned note whose unpin_at is in
// the past and that has no created_at, and a note naming a document.
func referenceNotes() []any {
	return []any{
		map[string]any{"body": "Some important pinned note.", "is_pinned": true, "unpin_at": "2020-06-01T12:00:00Z"},
		map[string]any{"created_at": "2020-02-01T12:00:00Z", "body": "Some important note with an attachment.",
			"document_paths": []any{map[string]any{"document_path": "some/path/to/a/document.pdf"}}},
	}
}

// The reference's example notes inside an account payload pass E3 and E4
// and are created by E5, for a supplier with the default setting (the
// document is not looked up, and is not in the store).
func TestNotes_ReferenceExampleInsideAnAccountPayload(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	acc := fixture(t, "ACC-REFNOTES")
	acc["notes"] = referenceNotes()
	if r := s.do(t, "POST", pathValidateAccount, tok, acc); r.Status != 200 {
		t.Fatalf("E3: %d %s", r.Status, r.Raw)
	}
	s.stage(t, tok, acc)
	if r := s.do(t, "POST", processPath, tok, processBody("ACC-REFNOTES", false)); r.Status != 201 {
		t.Fatalf("E5: %d %s", r.Status, r.Raw)
	}
	var rows []string
	if err := s.db.Select(&rows, `SELECT n.body || '|' || n.is_pinned || '|' ||
			COALESCE(to_char(n.unpin_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), '-') || '|' ||
			COALESCE((SELECT string_agg(d.document_path, ',') FROM note_documents d WHERE d.note_id = n.id), '-')
		FROM notes n JOIN accounts a ON a.id = n.account_id WHERE a.external_account_number = 'ACC-REFNOTES' ORDER BY n.id`); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Some important pinned note.|true|2020-06-01 12:00:00|-",
		"Some important note with an attachment.|false|-|some/path/to/a/document.pdf",
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("notes stored (-want +got):\n%s", diff)
	}
}

// E5 looks a note's documents up only while the supplier requires
// documents: with the default a missing document is accepted, after
// set-option on it is refused at its attr, and a leading slash names the
// document under the root.
func TestProcess_NoteDocumentsAreLookedUpOnlyWhenTheSupplierRequiresThem(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{DocumentRoot: "demo/docs"})
	tok := s.accessToken(t, s.newKey(t, "k"))
	withDocument := func(ean, path string) map[string]any {
		acc := fixture(t, ean)
		acc["notes"].([]any)[1].(map[string]any)["document_paths"] = []any{map[string]any{"document_path": path}}
		return acc
	}

	s.stage(t, tok, withDocument("ACC-OFF", "letters/never-uploaded.pdf"))
	if r := s.do(t, "POST", processPath, tok, processBody("ACC-OFF", false)); r.Status != 201 {
		t.Fatalf("E5 with the setting off and a missing document: %d %s", r.Status, r.Raw)
	}

	if err := admin.SetSupplierOption(context.Background(), s.db, "DEMO", admin.OptionRequireDocuments, true); err != nil {
		t.Fatal(err)
	}
	s.stage(t, tok, withDocument("ACC-ON", "letters/never-uploaded.pdf"))
	r := s.do(t, "POST", processPath, tok, processBody("ACC-ON", false))
	errs, _ := r.Body["errors"].([]any)
	if r.Status != 400 || len(errs) != 1 {
		t.Fatalf("E5 with the setting on and a missing document: %d %s", r.Status, r.Raw)
	}
	got := errs[0].(map[string]any)
	if got["code"] != "path_does_not_exist_in_file_store" || got["attr"] != "notes.1.document_paths.0.document_path" {
		t.Errorf("problem %v", got)
	}

	s.stage(t, tok, withDocument("ACC-SLASH", "/"+fixtureDocument))
	if r := s.do(t, "POST", processPath, tok, processBody("ACC-SLASH", false)); r.Status != 201 {
		t.Errorf("E5 with a leading slash on a stored document: %d %s", r.Status, r.Raw)
	}
	if n := s.count(t, `SELECT count(*) FROM note_documents d JOIN notes n ON n.id = d.note_id JOIN accounts a ON a.id = n.account_id
		WHERE a.external_account_number = 'ACC-SLASH' AND d.document_path = $1`, fixtureDocument); n != 1 {
		t.Errorf("%d stored paths %s without the slash, want 1", n, fixtureDocument)
	}
}

// The reference's E6 example, as the reference sends it, is created over
// HTTP for a supplier with the default setting.
func TestNotes_ReferenceExampleOverE6(t *testing.T) {
	t.Parallel()
	e := newPostImportEnv(t)
	e.account(t, "OTHER", "EXTERNAL-1234", "")
	body := map[string]any{"import_supplier": "OTHER", "external_account_number": "EXTERNAL-1234", "notes": referenceNotes()}
	r := e.do(t, "POST", pathNotes, e.tok, body)
	var got []map[string]any
	if err := json.Unmarshal(r.Raw, &got); r.Status != 201 || err != nil || len(got) != 2 {
		t.Fatalf("E6: %d %s", r.Status, r.Raw)
	}
	for i, n := range got {
		if n["status"] != "NOTE_CREATION_SUCCESS" {
			t.Errorf("note %d: %v", i, n)
		}
	}
}

// E5 looks up the documents of the payload's statements as E8 does: while
// the supplier requires documents, a missing one refuses the account at its
// attr, and one in the store is accepted.
func TestProcess_StatementDocumentsAreLookedUpWhenTheSupplierRequiresThem(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{DocumentRoot: "demo/docs", RequireDocuments: true})
	tok := s.accessToken(t, s.newKey(t, "k"))
	withStatement := func(ean, path string) map[string]any {
		acc := fixture(t, ean)
		acc["statements"] = []any{map[string]any{"statement_id": "1", "bill_period_from_date": "2019-06-01",
			"bill_period_to_date": "2019-07-01", "statement_path": path}}
		return acc
	}

	s.stage(t, tok, withStatement("ACC-MISSING", "statements/never-uploaded.pdf"))
	r := s.do(t, "POST", processPath, tok, processBody("ACC-MISSING", false))
	errs, _ := r.Body["errors"].([]any)
	if r.Status != 400 || len(errs) != 1 {
		t.Fatalf("E5 with a missing statement document: %d %s", r.Status, r.Raw)
	}
	got := errs[0].(map[string]any)
	if got["code"] != "path_does_not_exist_in_file_store" || got["attr"] != "statements.0.statement_path" {
		t.Errorf("problem %v", got)
	}

	s.stage(t, tok, withStatement("ACC-STORED", fixtureDocument))
	if r := s.do(t, "POST", processPath, tok, processBody("ACC-STORED", false)); r.Status != 201 {
		t.Errorf("E5 with a stored statement document: %d %s", r.Status, r.Raw)
	}
}
