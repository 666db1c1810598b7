package postimport

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/problem"
	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// NotesRequest is the body of E6.
type NotesRequest struct {
	ImportSupplier        string `json:"import_supplier"`
	ExternalAccountNumber string `json:"external_account_number"`
	Notes                 []Note `json:"notes"`
}

// Note is one note to create (spec 2.5). Optional fields stay nil when
// omitted.
type Note struct {
	Body          *string        `json:"body,omitzero"`
	DocumentPaths []DocumentPath `json:"document_paths,omitzero"`
	CreatedAt     *v.Datetime    `json:"created_at,omitzero"`
	IsPinned      *bool          `json:"is_pinned,omitzero"`
	UnpinAt       *v.Datetime    `json:"unpin_at,omitzero"`
}

// DocumentPath names a document under the supplier's document root.
type DocumentPath struct {
	DocumentPath string `json:"document_path"`
}

// NoteResult is the answer for one posted note, in the order posted. For a
// note that already existed, CreatedAt is the existing note's.
type NoteResult struct {
	CreatedAt     v.Datetime     `json:"created_at"`
	Body          string         `json:"body"`
	DocumentPaths []DocumentPath `json:"document_paths,omitzero"`
	Status        string         `json:"status"`
}

var documentPathSchema = v.NewObject(
	v.Req("document_path", v.StringValue, func(d *DocumentPath) *string { return &d.DocumentPath },
		v.MaxLength(documents.MaxPathLength), v.Codes(CodeInvalidDocumentPath, CodeDocumentNotFound),
		v.Note("Relative to the import supplier's document root; the document must be in the store.")),
)

var noteSchema = v.NewObject(
	v.Opt("body", v.StringValue, func(n *Note) **string { return &n.Body }, v.MaxLength(maxNoteBody), v.AllowBlank(),
		v.Codes(CodeNoteEmpty), v.Note("At least one of body or document_paths.")),
	v.List("document_paths", documentPathSchema, func(n *Note) *[]DocumentPath { return &n.DocumentPaths }, v.Codes(CodeNoteEmpty)),
	v.Opt("created_at", v.DatetimeValue, func(n *Note) **v.Datetime { return &n.CreatedAt },
		v.Note("Omitted: the note is created now.")),
	v.Opt("is_pinned", v.BooleanValue, func(n *Note) **bool { return &n.IsPinned },
		v.Note("Pins the note to the top of the account's support page.")),
	v.Opt("unpin_at", v.DatetimeValue, func(n *Note) **v.Datetime { return &n.UnpinAt },
		v.Codes(CodeNoteUnpinWithoutPin, CodeNoteUnpinBeforeCreation), v.Note("Only with is_pinned true.")),
)

var notesSchema = v.NewObject(
	v.Req("import_supplier", v.StringValue, func(r *NotesRequest) *string { return &r.ImportSupplier }, v.MaxLength(maxCode),
		v.Codes(CodeAccountNotFound)),
	v.Req("external_account_number", v.StringValue, func(r *NotesRequest) *string { return &r.ExternalAccountNumber },
		v.MaxLength(maxAccountRef), v.Codes(CodeAccountNotFound)),
	v.List("notes", noteSchema, func(r *NotesRequest) *[]Note { return &r.Notes }, v.Required(), v.Codes(CodeTooManyItems),
		v.Note(fmt.Sprintf("At most %d notes.", MaxNotes))),
)

// hasBody reports whether the note has a body with content.
func (n *Note) hasBody() bool { return n.Body != nil && strings.TrimSpace(*n.Body) != "" }

// ParseNotes decodes and checks the body of E6 with every rule that needs
// neither the database nor the document store; now is when a note without
// created_at would be created. It returns a *problem.Error of Kind Invalid
// with every problem: code parse_error (no field problems) for a body that
// is not a JSON object, else notes_failed_validation.
func ParseNotes(body []byte, now time.Time) (*NotesRequest, error) {
	r, errs, perr := parseNotes(body, now)
	if perr != nil {
		return nil, perr
	}
	if len(errs) > 0 {
		return nil, errs.Err(CodeNotesFailed, detailNotesFailed)
	}
	return r, nil
}

const detailNotesFailed = "Could not validate the notes; nothing was created."

func parseNotes(body []byte, now time.Time) (*NotesRequest, problem.List, *problem.Error) {
	root, perr := v.ParseBody(body)
	if perr != nil {
		return nil, nil, perr
	}
	var r NotesRequest
	var w v.Walker
	notesSchema.Bind(&w, root, &r)
	checkCount(&w.Errors, "notes", len(r.Notes), MaxNotes)
	nowDT := v.DatetimeOf(now)
	for i := range r.Notes {
		n := &r.Notes[i]
		if !n.hasBody() && len(n.DocumentPaths) == 0 &&
			!w.HasErrorAt(v.Attr("notes", i, "body")) && !w.HasErrorAt(v.Attr("notes", i, "document_paths")) {
			w.AddAt(v.Attr("notes", i), CodeNoteEmpty, "A note needs a body, at least one document path, or both.")
		}
		if n.UnpinAt != nil {
			if n.IsPinned == nil || !*n.IsPinned {
				w.AddAt(v.Attr("notes", i, "unpin_at"), CodeNoteUnpinWithoutPin,
					"unpin_at says when a pinned note stops being pinned; send is_pinned: true with it, or omit it.")
			}
			created := nowDT
			if n.CreatedAt != nil {
				created = *n.CreatedAt
			}
			if *n.UnpinAt < created {
				w.AddAt(v.Attr("notes", i, "unpin_at"), CodeNoteUnpinBeforeCreation,
					"unpin_at (%s) is earlier than the note's creation time (%s).", *n.UnpinAt, created)
			}
		}
		for k, d := range n.DocumentPaths {
			// A path the schema refused (blank, too many characters) is
			// left empty, so it is reported once.
			if d.DocumentPath == "" {
				continue
			}
			if msg := documents.PathProblem(d.DocumentPath); msg != "" {
				w.AddAt(v.Attr("notes", i, "document_paths", k, "document_path"), CodeInvalidDocumentPath, "%s", msg)
			}
		}
	}
	return &r, w.Errors, nil
}

// CreateNotes is E6. It creates each posted note that the account does not
// have yet and answers one NoteResult per posted note. A note is the same as
// an existing one when it has the same body (or, for a note without a body,
// the same document paths) and, when created_at is given, the same creation
// time. Notes of one request that repeat each other are created once.
//
// Errors: *problem.Error of Kind Invalid (400) with every problem, NotFound
// (404, account_not_found) when the account is not an imported account the
// caller may see, Unavailable (500) when documents cannot be checked.
func (s *Service) CreateNotes(ctx context.Context, body []byte, visible func(string) bool) ([]NoteResult, error) {
	// Whole seconds: created_at is answered in YYYY-MM-DDTHH:MM:SSZ, and
	// a re-sent note must compare equal to what was stored.
	now := s.now().UTC().Truncate(time.Second)
	r, errs, perr := parseNotes(body, now)
	if perr != nil {
		return nil, perr
	}
	if hasErrorAt(errs, "import_supplier", "external_account_number") {
		return nil, errs.Err(CodeNotesFailed, detailNotesFailed)
	}
	acc, err := s.findAccount(ctx, r.ImportSupplier, r.ExternalAccountNumber, visible)
	if err != nil {
		return nil, err
	}
	var refs []documents.Ref
	for i, n := range r.Notes {
		for k, d := range n.DocumentPaths {
			if documents.ValidPath(d.DocumentPath) {
				refs = append(refs, documents.Ref{Attr: v.Attr("notes", i, "document_paths", k, "document_path"), Path: d.DocumentPath})
			}
		}
	}
	if err := s.checkDocuments(ctx, acc.DocumentRoot, refs, &errs); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errs.Err(CodeNotesFailed, detailNotesFailed)
	}
	var out []NoteResult
	err = db.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		acc, err := lockAccount(ctx, tx, r.ImportSupplier, r.ExternalAccountNumber, visible)
		if err != nil {
			return err
		}
		out, err = createNotes(ctx, tx, acc.ID, r.Notes, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// noteIdentity is what makes two notes the same: the body, or for a note
// without one, its document paths. The prefix byte keeps the two kinds
// apart.
func noteIdentity(body string, paths []string) string {
	if strings.TrimSpace(body) != "" {
		return "b" + body
	}
	return "d" + strings.Join(paths, "\x00")
}

// existingNote is a stored note as dedupe needs it.
type existingNote struct {
	Body      string         `db:"body"`
	CreatedAt time.Time      `db:"created_at"`
	Paths     pq.StringArray `db:"paths"`
}

// createNotes writes the notes that are new to the account, which the
// caller has locked.
func createNotes(ctx context.Context, tx *sqlx.Tx, accountID int64, notes []Note, now time.Time) ([]NoteResult, error) {
	// Only notes whose body is one of the posted bodies can match; the
	// expression index on (account_id, md5(body)) finds them.
	var hashes []string
	for _, n := range notes {
		body := ""
		if n.Body != nil {
			body = *n.Body
		}
		sum := md5.Sum([]byte(body))
		hashes = append(hashes, hex.EncodeToString(sum[:]))
	}
	var rows []existingNote
	err := tx.SelectContext(ctx, &rows, `
		SELECT n.body, n.created_at,
			ARRAY(SELECT d.document_path FROM note_documents d WHERE d.note_id = n.id ORDER BY d.position) AS paths
		FROM notes n WHERE n.account_id = $1 AND md5(n.body) = ANY($2::text[])`, accountID, pq.Array(hashes))
	if err != nil {
		return nil, fmt.Errorf("create notes: read existing: %w", err)
	}
	existing := make(map[string][]time.Time, len(rows))
	for _, e := range rows {
		id := noteIdentity(e.Body, e.Paths)
		existing[id] = append(existing[id], e.CreatedAt)
	}

	out := make([]NoteResult, len(notes))
	var add []int // indexes of the notes to create
	for i, n := range notes {
		body := ""
		if n.Body != nil {
			body = *n.Body
		}
		paths := make([]string, len(n.DocumentPaths))
		for k, d := range n.DocumentPaths {
			paths[k] = d.DocumentPath
		}
		created := now
		if n.CreatedAt != nil {
			created = n.CreatedAt.Time()
		}
		id := noteIdentity(body, paths)
		res := NoteResult{CreatedAt: v.DatetimeOf(created), Body: body, DocumentPaths: n.DocumentPaths, Status: NoteCreated}
		matched := false
		for _, at := range existing[id] {
			if n.CreatedAt == nil || at.Equal(created) {
				res.CreatedAt, res.Status, matched = v.DatetimeOf(at), NoteAlreadyExists, true
				break
			}
		}
		if !matched {
			add = append(add, i)
			existing[id] = append(existing[id], created)
		}
		out[i] = res
	}
	if len(add) == 0 {
		return out, nil
	}

	// Ids are drawn first so that each note's documents can name it; the
	// order of RETURNING rows is not something to rely on.
	var ids []int64
	if err := tx.SelectContext(ctx, &ids, `SELECT nextval('notes_id_seq') FROM generate_series(1, $1)`, len(add)); err != nil {
		return nil, fmt.Errorf("create notes: ids: %w", err)
	}
	var (
		bodies, createdAts []string
		unpins             []*string
		pinned             []bool
		docNotes           []int64
		docPositions       []int
		docPaths           []string
	)
	for j, i := range add {
		n := notes[i]
		res := out[i]
		bodies = append(bodies, res.Body)
		createdAts = append(createdAts, string(res.CreatedAt))
		pinned = append(pinned, n.IsPinned != nil && *n.IsPinned)
		var unpin *string
		if n.UnpinAt != nil {
			s := string(*n.UnpinAt)
			unpin = &s
		}
		unpins = append(unpins, unpin)
		for k, d := range n.DocumentPaths {
			docNotes = append(docNotes, ids[j])
			docPositions = append(docPositions, k)
			docPaths = append(docPaths, d.DocumentPath)
		}
	}
	_, err = tx.ExecContext(ctx, `
		WITH n AS (
			INSERT INTO notes (id, account_id, body, created_at, is_pinned, unpin_at)
			SELECT u.id, $1, u.body, u.created_at, u.is_pinned, u.unpin_at
			FROM unnest($2::bigint[], $3::text[], $4::timestamptz[], $5::boolean[], $6::timestamptz[])
				AS u (id, body, created_at, is_pinned, unpin_at)
			RETURNING id)
		INSERT INTO note_documents (note_id, position, document_path)
		SELECT d.note_id, d.position, d.path FROM unnest($7::bigint[], $8::int[], $9::text[]) AS d (note_id, position, path)
		JOIN n ON n.id = d.note_id`,
		accountID, pq.Array(ids), pq.Array(bodies), pq.Array(createdAts), pq.Array(pinned), pq.Array(unpins),
		pq.Array(docNotes), pq.Array(docPositions), pq.Array(docPaths))
	if err != nil {
		return nil, fmt.Errorf("create notes: insert: %w", err)
	}
	return out, nil
}
