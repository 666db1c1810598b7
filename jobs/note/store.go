package note

import (
	"context"
	"crypto/md5"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/db"
	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// Status values of E6's answer (spec 2.5).
const (
	StatusCreated       = "NOTE_CREATION_SUCCESS"
	StatusAlreadyExists = "NOTE_ALREADY_EXISTS"
)

// Result is E6's answer for one posted note, in the order posted. For a note
// that already existed, CreatedAt is the existing note's.
type Result struct {
	CreatedAt     v.Datetime     `json:"created_at"`
	Body          string         `json:"body"`
	DocumentPaths []DocumentPath `json:"document_paths,omitzero"`
	Status        string         `json:"status"`
}

// Insert writes notes, with their documents, onto the account inside tx, in
// one statement built from InsertCTE, as account creation (E5) writes them
// inside its own statement. A note without created_at is created at now.
// E6 and E7's pinned note write through Add; the row-by-row writer that the
// creation statement's tests compare with writes through Insert.
func Insert(ctx context.Context, tx *db.Tx, accountID int64, notes []Note, now time.Time) error {
	if len(notes) == 0 {
		return nil
	}
	rows, err := InsertRows(notes, now)
	if err != nil {
		return fmt.Errorf("insert notes: %w", err)
	}
	if _, err := tx.ExecContext(ctx, insertSQL, accountID, rows); err != nil {
		return fmt.Errorf("insert notes: %w", err)
	}
	return nil
}

// insertSQL is Insert's statement: the items of InsertCTE for one account,
// rendered once.
var insertSQL = `WITH note_account AS (SELECT 1 AS x, $1::bigint AS id), note_src AS (SELECT 1 AS x, $2::jsonb AS notes), ` +
	InsertCTE("note_src", "notes", "note_account", false) + ` SELECT 1`

// addSQL calls add_notes (db/migrations), the one home of the statement
// that writes notes and their documents.
const addSQL = `SELECT add_notes($1, $2, $3, $4, $5, $6, $7, $8)`

// Add writes notes, with their documents, onto the account in one
// statement run through q (a *db.Tx). A note without created_at is created
// at now. E7's pinned note and Create use it; E6's usual request writes
// through post_notes (Post), which calls add_notes too.
func Add(ctx context.Context, q sqlx.ExecerContext, accountID int64, notes []Note, now time.Time) error {
	if len(notes) == 0 {
		return nil
	}
	if _, err := q.ExecContext(ctx, addSQL, append([]any{accountID}, addArgs(notes, now)...)...); err != nil {
		return fmt.Errorf("add notes: %w", err)
	}
	return nil
}

// addArgs returns the arrays add_notes takes after the account: the notes'
// bodies, creation times (now for a note without one), pins and unpin
// times, then their documents as the note's position (from 1), the
// document's position and its path.
func addArgs(notes []Note, now time.Time) []any {
	n := len(notes)
	bodies, createdAts := make([]string, n), make([]string, n)
	unpins, pinned := make([]*string, n), make([]bool, n)
	var (
		docNotes, docPositions []int64
		docPaths               []string
	)
	for j, nt := range notes {
		if nt.Body != nil {
			bodies[j] = *nt.Body
		}
		createdAts[j] = now.UTC().Format(time.RFC3339Nano)
		if nt.CreatedAt != nil {
			createdAts[j] = string(*nt.CreatedAt)
		}
		if nt.UnpinAt != nil {
			s := string(*nt.UnpinAt)
			unpins[j] = &s
		}
		pinned[j] = nt.IsPinned != nil && *nt.IsPinned
		for k, d := range nt.DocumentPaths {
			// WITH ORDINALITY counts from 1.
			docNotes = append(docNotes, int64(j+1))
			docPositions = append(docPositions, int64(k))
			docPaths = append(docPaths, d.DocumentPath)
		}
	}
	return []any{pq.Array(bodies), pq.Array(createdAts), pq.Array(pinned), pq.Array(unpins),
		pq.Array(docNotes), pq.Array(docPositions), pq.Array(docPaths)}
}

// insertNote and insertDocument are the rows InsertCTE reads: a note's
// index in the payload links its documents to it.
type insertNote struct {
	I         int     `json:"i"`
	Body      string  `json:"body"`
	CreatedAt string  `json:"created_at"`
	IsPinned  bool    `json:"is_pinned"`
	UnpinAt   *string `json:"unpin_at"`
}

type insertDocument struct {
	Note     int    `json:"note"`
	Position int    `json:"position"`
	Path     string `json:"path"`
}

// InsertRows encodes notes as the JSON document that InsertCTE reads. A
// note without created_at is created at now.
func InsertRows(notes []Note, now time.Time) (json.RawMessage, error) {
	var doc struct {
		Notes     []insertNote     `json:"n,omitempty"`
		Documents []insertDocument `json:"d,omitempty"`
	}
	doc.Notes = make([]insertNote, len(notes))
	for j, n := range notes {
		r := insertNote{I: j, CreatedAt: now.UTC().Format(time.RFC3339Nano), IsPinned: n.IsPinned != nil && *n.IsPinned}
		if n.Body != nil {
			r.Body = *n.Body
		}
		if n.CreatedAt != nil {
			r.CreatedAt = string(*n.CreatedAt)
		}
		if n.UnpinAt != nil {
			s := string(*n.UnpinAt)
			r.UnpinAt = &s
		}
		doc.Notes[j] = r
		for k, d := range n.DocumentPaths {
			doc.Documents = append(doc.Documents, insertDocument{Note: j, Position: k, Path: d.DocumentPath})
		}
	}
	return json.Marshal(doc)
}

// InsertCTE returns the items of a WITH clause that insert the notes of
// one or more accounts, rendered from sql/insert.sql. src is a relation (a
// table or an earlier WITH item) with a column x that names an account and
// the columns that notes, a jsonb expression holding what InsertRows
// encoded for that account, reads; account is a relation with the columns x
// and id, the id of the account that x names (an x without a row there
// inserts nothing). The items are named note_*.
//
// single says that src holds one account: the conditions that match rows
// of the same account by x then always hold, and are written as true, so
// that the planner joins the items without hashing on x.
//
// It renders the template on every call: build statements with it once,
// not per query.
func InsertCTE(src, notes, account string, single bool) string {
	var b strings.Builder
	err := insertCTETemplate.Execute(&b, insertCTE{Src: src, Notes: notes, Account: account, Single: single})
	if err != nil {
		panic(fmt.Sprintf("note: render sql/insert.sql: %v", err)) // the template is fixed: a bug
	}
	return strings.TrimSpace(b.String())
}

//go:embed sql/insert.sql
var insertCTESource string

var insertCTETemplate = template.Must(template.New("insert.sql").Parse(insertCTESource))

// insertCTE is what sql/insert.sql reads.
type insertCTE struct {
	Src, Notes, Account string
	Single              bool
}

// SameAccount is cond, a condition that matches rows of the same account
// by x, or true when there is a single account.
func (c insertCTE) SameAccount(cond string) string {
	if c.Single {
		return "true"
	}
	return cond
}

// identity is what makes two notes the same: the body, or for a note
// without one, its document paths. The prefix byte keeps the two kinds
// apart.
func identity(body string, paths []string) string {
	if strings.TrimSpace(body) != "" {
		return "b" + body
	}
	return "d" + strings.Join(paths, "\x00")
}

// existing is a stored note as Create needs it.
type existing struct {
	Body      string         `db:"body"`
	CreatedAt time.Time      `db:"created_at"`
	Paths     pq.StringArray `db:"paths"`
}

// bodyHashes returns the md5 of each note's body (of "" for a note
// without one), in hex: only a stored note whose body has one of them can
// be the same as a posted one, and the expression index on (account_id,
// md5(body)) finds those.
func bodyHashes(notes []Note) []string {
	hashes := make([]string, len(notes))
	for i, n := range notes {
		body := ""
		if n.Body != nil {
			body = *n.Body
		}
		sum := md5.Sum([]byte(body))
		hashes[i] = hex.EncodeToString(sum[:])
	}
	return hashes
}

// Create is E6's write: it inserts the notes that the account, which the
// caller has locked in tx, does not have yet, and answers one Result per
// note (see decide). now should be whole seconds: answers carry seconds,
// and a re-sent note must compare equal to what was stored. tx is a *db.Tx.
func Create(ctx context.Context, tx sqlx.ExtContext, accountID int64, notes []Note, now time.Time) ([]Result, error) {
	var rows []existing
	err := sqlx.SelectContext(ctx, tx, &rows, `
		SELECT n.body, n.created_at,
			ARRAY(SELECT d.document_path FROM note_documents d WHERE d.note_id = n.id ORDER BY d.position) AS paths
		FROM notes n WHERE n.account_id = $1 AND md5(n.body) = ANY($2::text[])`, accountID, pq.Array(bodyHashes(notes)))
	if err != nil {
		return nil, fmt.Errorf("create notes: read existing: %w", err)
	}
	out, add := decide(notes, rows, now)
	if err := Add(ctx, tx, accountID, add, now); err != nil {
		return nil, err
	}
	return out, nil
}

// postSQL calls post_notes (db/migrations): it locks the account, checks
// that no note of it has one of the posted bodies' hashes, and then writes
// the notes through add_notes, or writes nothing.
const postSQL = `SELECT post_notes($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

// ErrNoAccount is Post's answer when supplier has no account ean.
var ErrNoAccount = errors.New("note: no such account")

// Post is Create in one round trip for E6's usual request, one whose notes
// the account has none of: it decides the answer as if the account had no
// note with one of the posted bodies, and post_notes, called through q (the
// pool: the call is then one implicit transaction), locks the account of
// supplier with the number ean, checks that this holds and writes. wrote
// is false, and nothing was written, when a note of the account has one of
// the posted bodies; the caller then runs Create with the account locked.
// It returns ErrNoAccount when there is no such account.
func Post(ctx context.Context, q sqlx.QueryerContext, supplier, ean string, notes []Note, now time.Time) (
	res []Result, wrote bool, err error) {
	out, add := decide(notes, nil, now)
	args := append([]any{supplier, ean, pq.Array(bodyHashes(notes))}, addArgs(add, now)...)
	var posted sql.NullBool
	if err := q.QueryRowxContext(ctx, postSQL, args...).Scan(&posted); err != nil {
		return nil, false, fmt.Errorf("post notes: %w", err)
	}
	switch {
	case !posted.Valid:
		return nil, false, ErrNoAccount
	case !posted.Bool:
		return nil, false, nil
	}
	return out, true, nil
}

// decide answers one Result per note and returns the notes to insert, given
// the account's stored notes that may be the same as one of them (rows). A
// note is the same as an existing one when it has the same body (or, for a
// note without a body, the same document paths) and, when created_at is
// given, the same creation time. Notes of one call that repeat each other
// are created once.
func decide(notes []Note, rows []existing, now time.Time) (out []Result, add []Note) {
	seen := make(map[string][]time.Time, len(rows))
	for _, e := range rows {
		id := identity(e.Body, e.Paths)
		seen[id] = append(seen[id], e.CreatedAt)
	}
	out = make([]Result, len(notes))
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
		id := identity(body, paths)
		res := Result{CreatedAt: v.DatetimeOf(created), Body: body, DocumentPaths: n.DocumentPaths, Status: StatusCreated}
		matched := false
		for _, at := range seen[id] {
			if n.CreatedAt == nil || at.Equal(created) {
				res.CreatedAt, res.Status, matched = v.DatetimeOf(at), StatusAlreadyExists, true
				break
			}
		}
		if !matched {
			add = append(add, n)
			seen[id] = append(seen[id], created)
		}
		out[i] = res
	}
	return out, add
}
