package postimport

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/note"
)

// The reference's own E6 example (reference-api.md sections 7 and 10): a
// pinned note whose unpin_at is in the past and that has no created_at, and
// a note naming a document. For a supplier with the default setting the
// document is not looked up.
const referenceNotesExample = `{
  "import_supplier": "LAX",
  "external_account_number": %q,
  "notes": [
    {
      "body": "Some important pinned note.",
      "is_pinned": true,
      "unpin_at": "2020-06-01T12:00:00Z"
    },
    {
      "created_at": "2020-02-01T12:00:00Z",
      "body": "Some important note with an attachment.",
      "document_paths": [
        {
          "document_path": "some/path/to/a/document.pdf"
        }
      ]
    }
  ]
}`

func TestNotes_ReferenceExamplePayloadIsAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, acct{supplier: laxCode})
	res, err := b.svc.CreateNotes(context.Background(), []byte(fmt.Sprintf(referenceNotesExample, ean)), visible)
	if err != nil {
		t.Fatal(err)
	}
	want := []note.Result{
		{CreatedAt: "2025-06-15T12:30:45Z", Body: "Some important pinned note.", Status: note.StatusCreated},
		{CreatedAt: "2020-02-01T12:00:00Z", Body: "Some important note with an attachment.", Status: note.StatusCreated,
			DocumentPaths: []note.DocumentPath{{DocumentPath: "some/path/to/a/document.pdf"}}},
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	var rows []string
	if err := b.db.Select(&rows, `SELECT n.body || '|' || n.is_pinned || '|' ||
			COALESCE(to_char(n.unpin_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), '-')
		FROM notes n JOIN accounts a ON a.id = n.account_id WHERE a.external_account_number = $1 ORDER BY n.id`, ean); err != nil {
		t.Fatal(err)
	}
	wantRows := []string{"Some important pinned note.|true|2020-06-01 12:00:00", "Some important note with an attachment.|false|-"}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
}

// unpin_at is compared with created_at only when created_at is given, and
// needs no is_pinned.
func TestNotes_UnpinAtIsComparedOnlyWithAGivenCreatedAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name string
		n    obj
	}{
		{"unpin_at in the past without created_at", obj{"body": "b", "is_pinned": true, "unpin_at": "2025-06-15T12:30:44Z"}},
		{"unpin_at without is_pinned", obj{"body": "b", "unpin_at": "2025-07-01T00:00:00Z"}},
		{"unpin_at with is_pinned false", obj{"body": "b", "is_pinned": false, "unpin_at": "2025-07-01T00:00:00Z"}},
		{"unpin_at equal to created_at", obj{"body": "b", "is_pinned": true, "created_at": "2024-05-01T10:00:00Z", "unpin_at": "2024-05-01T10:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ean := b.newAccount(t, acct{})
			res, err := b.svc.CreateNotes(context.Background(), notesBody(t, ean, tc.n), visible)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if res[0].Status != note.StatusCreated {
				t.Errorf("status %s", res[0].Status)
			}
		})
	}
}

// "/letters/a.pdf" is "letters/a.pdf": it is checked at that key, stored
// and answered without the slash, and is the same note's document.
func TestNotes_LeadingSlashNamesTheSameDocument(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.put(t, "letters/a.pdf")
	ean := b.newAccount(t, acct{}) // ACME requires documents
	ctx := context.Background()
	res, err := b.svc.CreateNotes(ctx, notesBody(t, ean, obj{"document_paths": []obj{{"document_path": "/letters/a.pdf"}}}), visible)
	if err != nil {
		t.Fatal(err)
	}
	wantRes := []note.Result{{CreatedAt: "2025-06-15T12:30:45Z", Status: note.StatusCreated,
		DocumentPaths: []note.DocumentPath{{DocumentPath: "letters/a.pdf"}}}}
	if diff := cmp.Diff(wantRes, res); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	if n := b.count(t, `SELECT count(*) FROM note_documents WHERE document_path = 'letters/a.pdf'`); n != 1 {
		t.Errorf("%d stored paths letters/a.pdf, want 1", n)
	}
	res, err = b.svc.CreateNotes(ctx, notesBody(t, ean, obj{"document_paths": []obj{{"document_path": "letters/a.pdf"}}}), visible)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != note.StatusAlreadyExists {
		t.Errorf("the same document without the slash: %s, want %s", res[0].Status, note.StatusAlreadyExists)
	}
	// A leading slash does not make a way out of the root.
	_, err = b.svc.CreateNotes(ctx, notesBody(t, ean, obj{"document_paths": []obj{{"document_path": "/../acme/letters/a.pdf"}}}), visible)
	wantProblems(t, err, []want{{note.CodeInvalidDocumentPath, "notes.0.document_paths.0.document_path"}})
}

// A missing document is refused only for a supplier that requires
// documents; otherwise the store is not read at all, so a service without
// one accepts the reference.
func TestNotesAndStatements_MissingDocumentIsRefusedOnlyWhenTheSupplierRequiresDocuments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	noStore := New(b.db, nil)
	noStore.now = func() time.Time { return testNow }
	stmt := func(ean, supplier, path string) []byte {
		st := statement("S1", "2025-01-01", "2025-01-31")
		st["statement_path"] = path
		return body(t, obj{"import_supplier": supplier, "external_account_number": ean, "statements": []obj{st}})
	}
	nt := func(ean, supplier, path string) []byte {
		return body(t, obj{"import_supplier": supplier, "external_account_number": ean,
			"notes": []obj{{"document_paths": []obj{{"document_path": path}}}}})
	}
	b.put(t, "statements/s1.pdf")
	cases := []struct {
		name     string
		svc      *Service
		supplier string
		path     string
		code     string // "": accepted
	}{
		{"required and missing", b.svc, supplierCode, "letters/missing.pdf", note.CodeDocumentNotFound},
		{"required and there, with a leading slash", b.svc, supplierCode, "/statements/s1.pdf", ""},
		{"not required and missing", b.svc, laxCode, "letters/missing.pdf", ""},
		{"not required, no store at all", noStore, laxCode, "letters/missing.pdf", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, e := range []struct {
				attr string
				run  func(ean string) error
			}{
				{"notes.0.document_paths.0.document_path", func(ean string) error {
					_, err := tc.svc.CreateNotes(context.Background(), nt(ean, tc.supplier, tc.path), visible)
					return err
				}},
				{"statements.0.statement_path", func(ean string) error {
					_, err := tc.svc.CreateStatements(context.Background(), stmt(ean, tc.supplier, tc.path), visible)
					return err
				}},
			} {
				ean := b.newAccount(t, acct{supplier: tc.supplier})
				err := e.run(ean)
				if tc.code == "" {
					if err != nil {
						t.Errorf("%s: refused: %v", e.attr, err)
					}
					continue
				}
				wantProblems(t, err, []want{{tc.code, e.attr}})
			}
		})
	}
}
