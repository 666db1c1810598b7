package postimport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/problem"
	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// NotesRequest is the body of E6.
type NotesRequest struct {
	ImportSupplier        string      `json:"import_supplier"`
	ExternalAccountNumber string      `json:"external_account_number"`
	Notes                 []note.Note `json:"notes"`
}

var notesSchema = v.NewObject(
	v.Req("import_supplier", v.StringValue, func(r *NotesRequest) *string { return &r.ImportSupplier }, v.MaxLength(maxCode),
		v.Codes(CodeAccountNotFound)),
	v.Req("external_account_number", v.StringValue, func(r *NotesRequest) *string { return &r.ExternalAccountNumber },
		v.MaxLength(maxAccountRef), v.Codes(CodeAccountNotFound)),
	v.List("notes", note.Schema, func(r *NotesRequest) *[]note.Note { return &r.Notes }, v.Required(), v.MaxItems(MaxNotes),
		v.Note(fmt.Sprintf("At most %d notes.", MaxNotes))),
)

// ParseNotes decodes and checks the body of E6 with every rule that needs
// neither the database nor the document store. It returns a *problem.Error
// of Kind Invalid with every problem: code parse_error (no field problems)
// for a body that is not a JSON object, else notes_failed_validation.
func ParseNotes(body []byte) (*NotesRequest, error) {
	r, errs, err := parseNotes(context.Background(), body)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errs.Err(CodeNotesFailed, detailNotesFailed)
	}
	return r, nil
}

const detailNotesFailed = "Could not validate the notes; nothing was created."

// parseNotes decodes and checks the body of E6. It fails for a body that is
// not a JSON object (a parse_error *problem.Error), or for a request whose
// client hung up: it stops between its phases (validate.Checkpoint).
func parseNotes(ctx context.Context, body []byte) (*NotesRequest, problem.List, error) {
	var r NotesRequest
	var w v.Walker
	if _, err := notesSchema.Decode(ctx, body, &w, &r); err != nil {
		return nil, nil, fmt.Errorf("notes: %w", err)
	}
	note.Check(&w, "notes", r.Notes)
	return &r, w.Errors, nil
}

// CreateNotes is E6. It creates each posted note that the account does not
// have yet and answers one note.Result per posted note (see note.Create).
// The usual request, whose notes the account has none of, costs one round
// trip (note.Post); any other is decided again in a transaction that locks
// the account and reads the notes it may repeat.
//
// Errors: *problem.Error of Kind Invalid (400) with every problem, NotFound
// (404, account_not_found) when the account is not an imported account the
// caller may see, Unavailable (500) when documents cannot be checked.
func (s *Service) CreateNotes(ctx context.Context, body []byte, visible func(string) bool) ([]note.Result, error) {
	// Whole seconds: created_at is answered in YYYY-MM-DDTHH:MM:SSZ, and
	// a re-sent note must compare equal to what was stored.
	now := s.now().UTC().Truncate(time.Second)
	r, errs, err := parseNotes(ctx, body)
	if err != nil {
		return nil, err
	}
	v.NoteSubject(ctx, r.ImportSupplier, r.ExternalAccountNumber)
	if hasErrorAt(errs, "import_supplier", "external_account_number") {
		return nil, errs.Err(CodeNotesFailed, detailNotesFailed)
	}
	if err := s.preflight(ctx, r.ImportSupplier, r.ExternalAccountNumber, visible, note.DocumentRefs("notes", r.Notes), &errs); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errs.Err(CodeNotesFailed, detailNotesFailed)
	}
	if visible != nil && !visible(r.ImportSupplier) {
		return nil, accountNotFound(r.ImportSupplier, r.ExternalAccountNumber)
	}
	out, wrote, err := note.Post(ctx, s.db, r.ImportSupplier, r.ExternalAccountNumber, r.Notes, now)
	switch {
	case errors.Is(err, note.ErrNoAccount):
		return nil, accountNotFound(r.ImportSupplier, r.ExternalAccountNumber)
	case err != nil:
		return nil, fmt.Errorf("create notes: %w", err)
	case wrote:
		return out, nil
	}
	err = db.InTx(ctx, s.db, func(tx *db.Tx) error {
		acc, err := lockAccount(ctx, tx, r.ImportSupplier, r.ExternalAccountNumber, visible)
		if err != nil {
			return err
		}
		out, err = note.Create(ctx, tx, acc.ID, r.Notes, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
