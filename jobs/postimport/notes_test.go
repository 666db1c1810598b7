package postimport

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jmoiron/sqlx"

	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

func notesBody(t testing.TB, ean string, notes ...obj) []byte {
	return body(t, obj{"import_supplier": supplierCode, "external_account_number": ean, "notes": notes})
}

type noteRuleCase struct {
	name  string
	notes []obj
	raw   string
	want  []want
}

var noteRuleCases = []noteRuleCase{
	{name: "neither body nor documents", notes: []obj{{"is_pinned": true}}, want: []want{{note.CodeEmpty, "notes.0"}}},
	{name: "blank body without documents", notes: []obj{{"body": "  \n"}}, want: []want{{note.CodeEmpty, "notes.0"}}},
	{name: "empty document list and no body", notes: []obj{{"document_paths": []obj{}}}, want: []want{{note.CodeEmpty, "notes.0"}}},
	{name: "unpinned before it was created", notes: []obj{{"body": "b", "is_pinned": true, "created_at": "2024-05-01T10:00:00Z", "unpin_at": "2024-05-01T09:59:59Z"}},
		want: []want{{note.CodeUnpinBeforeCreation, "notes.0.unpin_at"}}},
	{name: "document path leaving the root", notes: []obj{{"document_paths": []obj{{"document_path": "a/../../b.pdf"}}}},
		want: []want{{CodeInvalidDocumentPath, "notes.0.document_paths.0.document_path"}}},
	{name: "document path within 1024 characters but over 1024 bytes", notes: []obj{{"document_paths": []obj{{"document_path": "a/" + strings.Repeat("é", 600)}}}},
		want: []want{{CodeInvalidDocumentPath, "notes.0.document_paths.0.document_path"}}},
	{name: "document path over 1024 characters is reported once", notes: []obj{{"document_paths": []obj{{"document_path": "a/" + strings.Repeat("a", 1100)}}}},
		want: []want{{"max_length", "notes.0.document_paths.0.document_path"}}},
	{name: "document path with a backslash", notes: []obj{{"body": "b", "document_paths": []obj{{"document_path": `a\b.pdf`}}}},
		want: []want{{CodeInvalidDocumentPath, "notes.0.document_paths.0.document_path"}}},
	{name: "document not in the store", notes: []obj{{"body": "b"}, {"document_paths": []obj{{"document_path": "letters/there.pdf"}, {"document_path": "letters/gone.pdf"}}}},
		want: []want{{note.CodeDocumentNotFound, "notes.1.document_paths.1.document_path"}}},
	{name: "wrong types and unknown fields", notes: []obj{{"body": 5, "created_at": "2025-06-01", "is_pinned": "yes", "colour": "red"}},
		want: []want{{"invalid", "notes.0.body"}, {"invalid_datetime", "notes.0.created_at"}, {"invalid", "notes.0.is_pinned"},
			{"unknown_field", "notes.0.colour"}}},
	{name: "notes missing", raw: `{"import_supplier": "ACME", "external_account_number": %q}`, want: []want{{"required", "notes"}}},
	{name: "too many notes", raw: `{"import_supplier": "ACME", "external_account_number": %q, "notes": [` +
		strings.TrimSuffix(strings.Repeat(`{"body": "x"},`, MaxNotes+1), ",") + `]}`, want: []want{{CodeTooManyItems, "notes"}}},
}

func noteCaseCodes() []want {
	var w []want
	for _, c := range noteRuleCases {
		w = append(w, c.want...)
	}
	return w
}

func TestNotes_RulesRefuseTheWholeRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.put(t, "letters/there.pdf")
	for _, tc := range noteRuleCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ean := b.newAccount(t, acct{})
			req := notesBody(t, ean, tc.notes...)
			if tc.raw != "" {
				req = []byte(fmt.Sprintf(tc.raw, ean))
			}
			res, err := b.svc.CreateNotes(context.Background(), req, visible)
			if err == nil {
				t.Fatalf("accepted: %+v", res)
			}
			if p := wantProblems(t, err, tc.want); p.Code != CodeNotesFailed {
				t.Errorf("top-level code %q", p.Code)
			}
			if n := b.count(t, `SELECT count(*) FROM notes n JOIN accounts a ON a.id = n.account_id WHERE a.external_account_number = $1`, ean); n != 0 {
				t.Errorf("%d notes written by a refused request", n)
			}
		})
	}
}

func TestNotes_CreatedWithDocumentsPinAndDefaultTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, acct{})
	b.put(t, "letters/welcome.pdf")
	b.put(t, "letters/terms.pdf")
	res, err := b.svc.CreateNotes(context.Background(), notesBody(t, ean,
		obj{"body": "Customer prefers letters.", "is_pinned": true, "unpin_at": "2025-12-31T00:00:00Z", "created_at": "2024-03-01T08:00:00Z"},
		obj{"document_paths": []obj{{"document_path": "letters/welcome.pdf"}, {"document_path": "letters/terms.pdf"}}},
		obj{"body": "Both", "document_paths": []obj{{"document_path": "letters/terms.pdf"}}},
	), visible)
	if err != nil {
		t.Fatal(err)
	}
	want := []note.Result{
		{CreatedAt: "2024-03-01T08:00:00Z", Body: "Customer prefers letters.", Status: note.StatusCreated},
		{CreatedAt: "2025-06-15T12:30:45Z", Body: "", Status: note.StatusCreated,
			DocumentPaths: []note.DocumentPath{{DocumentPath: "letters/welcome.pdf"}, {DocumentPath: "letters/terms.pdf"}}},
		{CreatedAt: "2025-06-15T12:30:45Z", Body: "Both", Status: note.StatusCreated, DocumentPaths: []note.DocumentPath{{DocumentPath: "letters/terms.pdf"}}},
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	var rows []string
	if err := b.db.Select(&rows, `SELECT n.body || '|' || to_char(n.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || '|' || n.is_pinned || '|' ||
			COALESCE(to_char(n.unpin_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), '-') || '|' ||
			COALESCE((SELECT string_agg(d.document_path, ',' ORDER BY d.position) FROM note_documents d WHERE d.note_id = n.id), '-')
		FROM notes n ORDER BY n.id`); err != nil {
		t.Fatal(err)
	}
	wantRows := []string{
		"Customer prefers letters.|2024-03-01 08:00:00|true|2025-12-31|-",
		"|2025-06-15 12:30:45|false|-|letters/welcome.pdf,letters/terms.pdf",
		"Both|2025-06-15 12:30:45|false|-|letters/terms.pdf",
	}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
}

// A note is the same as an existing one when the body matches (for a note
// without body: the document paths) and, if given, the creation time.
func TestNotes_DedupeByBodyAndCreatedAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.put(t, "a.pdf")
	b.put(t, "b.pdf")
	docs := func(p ...string) []obj {
		var o []obj
		for _, x := range p {
			o = append(o, obj{"document_path": x})
		}
		return o
	}
	existing := []obj{
		{"body": "Called about a refund.", "created_at": "2024-01-02T03:04:05Z"},
		{"document_paths": docs("a.pdf")},
	}
	cases := []struct {
		name   string
		posted []obj
		want   []string
	}{
		{"same body without created_at", []obj{{"body": "Called about a refund."}}, []string{note.StatusAlreadyExists}},
		{"same body and created_at", []obj{{"body": "Called about a refund.", "created_at": "2024-01-02T03:04:05Z"}}, []string{note.StatusAlreadyExists}},
		{"same body, other created_at", []obj{{"body": "Called about a refund.", "created_at": "2024-01-02T03:04:06Z"}}, []string{note.StatusCreated}},
		{"same body with documents", []obj{{"body": "Called about a refund.", "document_paths": docs("b.pdf")}}, []string{note.StatusAlreadyExists}},
		{"other body", []obj{{"body": "Called about a refund!"}}, []string{note.StatusCreated}},
		{"document-only note with the same documents", []obj{{"document_paths": docs("a.pdf")}}, []string{note.StatusAlreadyExists}},
		{"document-only note with other documents", []obj{{"document_paths": docs("a.pdf", "b.pdf")}}, []string{note.StatusCreated}},
		{"repeated within one request", []obj{{"body": "New"}, {"body": "New"}, {"body": "New", "created_at": "2020-01-01T00:00:00Z"}},
			[]string{note.StatusCreated, note.StatusAlreadyExists, note.StatusCreated}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ean := b.newAccount(t, acct{})
			if _, err := b.svc.CreateNotes(ctx, notesBody(t, ean, existing...), visible); err != nil {
				t.Fatal(err)
			}
			res, err := b.svc.CreateNotes(ctx, notesBody(t, ean, tc.posted...), visible)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			created := 0
			for _, r := range res {
				got = append(got, r.Status)
				if r.Status == note.StatusCreated {
					created++
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			n := b.count(t, `SELECT count(*) FROM notes n JOIN accounts a ON a.id = n.account_id WHERE a.external_account_number = $1`, ean)
			if n != len(existing)+created {
				t.Errorf("%d notes stored, want %d", n, len(existing)+created)
			}
		})
	}
}

// Notes that came with the staged payload were written by account creation;
// E6 sees them, and answers the stored creation time.
func TestNotes_DedupeSeesPayloadNotes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, acct{})
	if _, err := b.db.Exec(`INSERT INTO notes (account_id, body, created_at) SELECT id, 'From the payload', '2025-01-10 09:00:00.123456+00'
		FROM accounts WHERE external_account_number = $1`, ean); err != nil {
		t.Fatal(err)
	}
	res, err := b.svc.CreateNotes(context.Background(), notesBody(t, ean, obj{"body": "From the payload"}), visible)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != note.StatusAlreadyExists || res[0].CreatedAt != "2025-01-10T09:00:00Z" {
		t.Errorf("result %+v", res[0])
	}
}

func TestNotes_ConcurrentPostsCreateOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, acct{})
	req := notesBody(t, ean, obj{"body": "Once only"}, obj{"body": "And this", "created_at": "2025-01-01T00:00:00Z"})
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			<-start
			_, errs[i] = b.svc.CreateNotes(context.Background(), req, visible)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("post %d: %v", i, err)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM notes`); n != 2 {
		t.Errorf("%d notes, want 2", n)
	}
}

func TestNotes_AccountNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range notFoundCases(t, b) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := body(t, obj{"import_supplier": tc.supplier, "external_account_number": tc.ean, "notes": []obj{{"body": "hello"}}})
			_, err := b.svc.CreateNotes(context.Background(), req, visible)
			p := problemOf(t, err, problem.NotFound)
			if diff := cmp.Diff(notFoundCodes, problems(p)); diff != "" {
				t.Errorf("%s", diff)
			}
		})
	}
}

func TestNotes_DocumentsNeedAStore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := New(b.db, nil)
	svc.now = func() time.Time { return testNow }
	ean := b.newAccount(t, acct{})
	_, err := svc.CreateNotes(context.Background(), notesBody(t, ean, obj{"document_paths": []obj{{"document_path": "a.pdf"}}}), visible)
	if p := problemOf(t, err, problem.Unavailable); p.Code != CodeDocumentStoreNotConfigured {
		t.Errorf("code %q", p.Code)
	}
	if _, err := svc.CreateNotes(context.Background(), notesBody(t, ean, obj{"body": "plain"}), visible); err != nil {
		t.Errorf("note without documents: %v", err)
	}
}

// A request waits for another import on the same account and then sees
// its note.
func TestNotes_RequestWaitsForAnotherImportOnTheAccount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, acct{})
	var res []note.Result
	err := b.whileHeld(t, ean, func(tx *sqlx.Tx, id int64) {
		if _, err := tx.Exec(`INSERT INTO notes (account_id, body, created_at) VALUES ($1, 'Same', now())`, id); err != nil {
			t.Fatal(err)
		}
	}, func() (err error) {
		res, err = b.svc.CreateNotes(context.Background(), notesBody(t, ean, obj{"body": "Same"}), visible)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != note.StatusAlreadyExists || b.count(t, `SELECT count(*) FROM notes`) != 1 {
		t.Errorf("status %s with %d notes, want NOTE_ALREADY_EXISTS and 1", res[0].Status, b.count(t, `SELECT count(*) FROM notes`))
	}
}

// A request on a cold service whose pool has one connection completes: a
// query its transaction runs for the first time is prepared on the
// transaction's connection, not by waiting for a second one.
func TestNotes_ColdServiceOnAPoolOfOneConnectionDoesNotWaitForItself(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, acct{})
	b.db.SetMaxOpenConns(1)
	svc := New(b.db, nil)
	svc.now = func() time.Time { return testNow }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := svc.CreateNotes(ctx, notesBody(t, ean, obj{"body": "first"}), visible); err != nil {
		t.Fatalf("note on a cold pool of one: %v", err)
	}
}

// A request with a note the account has already is decided in the
// transaction that locks the account: that note is answered with the
// stored creation time, the others are created, those that repeat each
// other once, with their documents.
func TestNotes_ANoteTheAccountHasIsAnsweredAndTheRestCreated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ean := b.newAccount(t, acct{supplier: laxCode})
	if _, err := b.db.Exec(`INSERT INTO notes (account_id, body, created_at) SELECT id, 'Known', '2025-02-03 04:05:06+00'
		FROM accounts WHERE external_account_number = $1`, ean); err != nil {
		t.Fatal(err)
	}
	req := body(t, obj{"import_supplier": laxCode, "external_account_number": ean, "notes": []obj{
		{"body": "New", "document_paths": []obj{{"document_path": "letters/a.pdf"}}},
		{"body": "Known"},
		{"body": "New"},
		{"document_paths": []obj{{"document_path": "letters/b.pdf"}}},
	}})
	res, err := b.svc.CreateNotes(ctx, req, visible)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct{ Body, CreatedAt, Status string }
	var got []answer
	for _, r := range res {
		got = append(got, answer{r.Body, string(r.CreatedAt), r.Status})
	}
	want := []answer{
		{"New", "2025-06-15T12:30:45Z", note.StatusCreated},
		{"Known", "2025-02-03T04:05:06Z", note.StatusAlreadyExists},
		{"New", "2025-06-15T12:30:45Z", note.StatusAlreadyExists},
		{"", "2025-06-15T12:30:45Z", note.StatusCreated},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	var rows []string
	if err := b.db.Select(&rows, `SELECT n.body || '|' ||
			COALESCE((SELECT string_agg(d.document_path, ',' ORDER BY d.position) FROM note_documents d WHERE d.note_id = n.id), '-')
		FROM notes n ORDER BY n.id`); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Known|-", "New|letters/a.pdf", "|letters/b.pdf"}, rows); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
}

// Requests that post the same notes to one account at once create each
// note once: one of them creates all, and every other, which finds them
// once it holds the lock, answers that they exist.
func TestNotes_ConcurrentPostsOfTheSameNotesAnswerThatTheyExist(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, acct{})
	req := notesBody(t, ean, obj{"body": "Once only"}, obj{"body": "And this", "created_at": "2025-01-01T00:00:00Z"},
		obj{"body": "Once only"})
	const posts = 8
	answers := make([][]string, posts)
	errs := make([]error, posts)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range posts {
		wg.Go(func() {
			<-start
			res, err := b.svc.CreateNotes(context.Background(), req, visible)
			for _, r := range res {
				answers[i] = append(answers[i], r.Status)
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	created := []string{note.StatusCreated, note.StatusCreated, note.StatusAlreadyExists}
	existing := []string{note.StatusAlreadyExists, note.StatusAlreadyExists, note.StatusAlreadyExists}
	var creators int
	for i, got := range answers {
		if errs[i] != nil {
			t.Errorf("post %d: %v", i, errs[i])
			continue
		}
		if cmp.Equal(got, created) {
			creators++
		} else if diff := cmp.Diff(existing, got); diff != "" {
			t.Errorf("post %d: statuses (-want +got):\n%s", i, diff)
		}
	}
	if creators != 1 {
		t.Errorf("%d posts created the notes, want 1", creators)
	}
	if n := b.count(t, `SELECT count(*) FROM notes`); n != 2 {
		t.Errorf("%d notes, want 2", n)
	}
}
