// Package note is the one home of the note of spec 2.5: its typed form, its
// schema, the rules the schema cannot express, the rows RULES.md lists for
// them, and the writes. The account payload's notes (E3 to E5) and E6 use
// the same element shape, so both bind Schema, run Check and write with
// Insert; E6 adds its "already exists" answer with Create.
package note

import (
	"strings"

	"github.com/bulkimport/bulkimport/jobs/documents"
	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// Note is one note to create on an account. Optional fields stay nil when
// omitted, so that the encoding omits them too.
type Note struct {
	Body          *string        `json:"body,omitzero"`
	DocumentPaths []DocumentPath `json:"document_paths,omitzero"`
	CreatedAt     *v.Datetime    `json:"created_at,omitzero"`
	IsPinned      *bool          `json:"is_pinned,omitzero"`
	UnpinAt       *v.Datetime    `json:"unpin_at,omitzero"`
}

// DocumentPath names a document under the import supplier's document root
// (spec 2.8).
type DocumentPath struct {
	DocumentPath string `json:"document_path"`
}

// The codes of note problems. Each is stable: callers branch on them.
const (
	CodeEmpty               = "note_body_or_document_path_not_found"
	CodeUnpinBeforeCreation = "note_unpin_at_earlier_than_creation_date"
	CodeInvalidDocumentPath = documents.CodeInvalidPath
	CodeDocumentNotFound    = documents.CodeNotFound
)

// MaxBody is the longest body, in characters.
const MaxBody = 20000

var documentPathSchema = v.NewObject(
	v.Req("document_path", v.StringValue, func(d *DocumentPath) *string { return &d.DocumentPath },
		v.MaxLength(documents.MaxPathLength), v.Codes(CodeInvalidDocumentPath, CodeDocumentNotFound),
		v.Note("Relative to the import supplier's document root (spec 2.8); a leading / is dropped. The length limit is the object store's key limit.")),
)

// Schema is the element of a notes array.
var Schema = v.NewObject(
	v.Opt("body", v.StringValue, func(n *Note) **string { return &n.Body }, v.MaxLength(MaxBody), v.AllowBlank(),
		v.Codes(CodeEmpty), v.Note("At least one of body or document_paths (spec 2.5). The length limit is this service's.")),
	v.List("document_paths", documentPathSchema, func(n *Note) *[]DocumentPath { return &n.DocumentPaths }, v.Codes(CodeEmpty)),
	v.Opt("created_at", v.DatetimeValue, func(n *Note) **v.Datetime { return &n.CreatedAt },
		v.Note("Omitted: the note is created at the current time (spec 2.5).")),
	v.Opt("is_pinned", v.BooleanValue, func(n *Note) **bool { return &n.IsPinned },
		v.Note("Pins the note to the top of the account's support page (spec 2.5).")),
	v.Opt("unpin_at", v.DatetimeValue, func(n *Note) **v.Datetime { return &n.UnpinAt },
		v.Codes(CodeUnpinBeforeCreation), v.Note("When the note stops being pinned (spec 2.5).")),
)

// HasBody reports whether the note has a body with content.
func (n *Note) HasBody() bool { return n.Body != nil && strings.TrimSpace(*n.Body) != "" }

// Check adds a problem to w for each rule of Rules that notes break; notes
// is the array that Schema bound at attr field. It also puts every valid
// document path in its stored spelling (without a leading slash), so that
// two spellings of one document are one path.
func Check(w *v.Walker, field string, notes []Note) {
	for i := range notes {
		n := &notes[i]
		if !n.HasBody() && len(n.DocumentPaths) == 0 &&
			!w.HasErrorAt(v.Attr(field, i, "body")) && !w.HasErrorAt(v.Attr(field, i, "document_paths")) {
			w.AddAt(v.Attr(field, i), CodeEmpty, "A note needs a body, at least one document path, or both.")
		}
		// Without created_at the note is created when it is written, which
		// for an account is when E5 runs, not when the payload is checked.
		// The reference compares unpin_at with created_at only, and its own
		// example note pins with an unpin_at in the past and no created_at.
		if n.UnpinAt != nil && n.CreatedAt != nil && *n.UnpinAt < *n.CreatedAt {
			w.AddAt(v.Attr(field, i, "unpin_at"), CodeUnpinBeforeCreation,
				"unpin_at (%s) is earlier than the note's created_at (%s).", *n.UnpinAt, *n.CreatedAt)
		}
		for k := range n.DocumentPaths {
			d := &n.DocumentPaths[k]
			// A path the schema refused (blank, too many characters) is
			// left empty, so it is reported once.
			if d.DocumentPath == "" {
				continue
			}
			if msg := documents.PathProblem(d.DocumentPath); msg != "" {
				w.AddAt(v.Attr(field, i, "document_paths", k, "document_path"), CodeInvalidDocumentPath, "%s", msg)
				continue
			}
			d.DocumentPath = documents.Clean(d.DocumentPath)
		}
	}
}

// DocumentRefs lists the valid document paths of notes, each at its attr
// under field, for documents.Check.
func DocumentRefs(field string, notes []Note) []documents.Ref {
	var refs []documents.Ref
	for i, n := range notes {
		for k, d := range n.DocumentPaths {
			if documents.ValidPath(d.DocumentPath) {
				refs = append(refs, documents.Ref{Attr: v.Attr(field, i, "document_paths", k, "document_path"), Path: d.DocumentPath})
			}
		}
	}
	return refs
}
