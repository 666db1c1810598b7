package note

// Rule is one note rule that the schema cannot express, as RULES.md lists
// it. jobs/account and jobs/postimport render the same rows from Rules, so
// the two files cannot word one rule two ways.
type Rule struct {
	Code string
	// At is where the problem is reported, in the notes[] style of the
	// field tables.
	At string
	// Text states the rule; Source names the spec section or reference
	// rule that the refusal comes from.
	Text, Source string
}

// Row returns the rule's text followed by its source, for a RULES.md table.
func (r Rule) Row() string { return r.Text + " Source: " + r.Source + "." }

// Rules lists every note rule beyond the field table, in the order Check
// runs them. Each package that renders them has a test per code.
var Rules = []Rule{
	{CodeEmpty, "`notes[]`",
		"A note has a non-blank `body`, at least one document path, or both.",
		"spec 2.5 (\"at least one of body or document_paths is required\"); reference section 5 (`note_body_or_document_path_not_found`)"},
	{CodeUnpinBeforeCreation, "`notes[].unpin_at`",
		"When `created_at` is given, `unpin_at` is not before it. A note without `created_at` is created when it is written and is not compared; `unpin_at` does not need `is_pinned`.",
		"reference section 5 (`unpin_at` must be at least `created_at`); the reference's example note (sections 7 and 10) is pinned with an `unpin_at` in the past and no `created_at`, and is accepted"},
	{CodeInvalidDocumentPath, "`notes[].document_paths[].document_path`",
		"A path relative to the import supplier's document root: no backslash, no control character, no empty, `.` or `..` segment, so that it cannot leave the root; at most 1024 bytes in UTF-8 (a non-ASCII path can reach that within 1024 characters). One leading `/` is allowed and dropped: `/a/b.pdf` and `a/b.pdf` name the same document.",
		"spec 2.8 (a path relative to the supplier's root); the byte limit is the object store's key limit"},
	{CodeDocumentNotFound, "`notes[].document_paths[].document_path`",
		"Only for an import supplier that requires documents (`importctl supplier set-option CODE require-documents on`; off by default): the document is in the store under the supplier's root. E6 looks before it writes, E5 before it creates the account (E3 and E4 never look). When the setting is off the store is not read. When it is on and the service has no `DOCUMENTS_URL`, the request gets 500 `document_store_not_configured`.",
		"reference section 9 (`path_does_not_exist_in_file_store`); off by default because the reference only records the reference to the file (section 5)"},
}
