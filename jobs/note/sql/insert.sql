{{- /*
The items of a WITH clause that insert the notes of one or more accounts,
with their documents (note.InsertCTE). .Src is a relation with a column x
that names an account, and .Notes a jsonb expression over it holding what
note.InsertRows encoded for that account; .Account is a relation with the
columns x and id, the id of the account that x names (an x without a row
there inserts nothing). The items are named note_*.

Ids are drawn in a materialised item, once per note, in the order of x and
then of the payload, so that each note's documents can name it without
relying on the order of RETURNING rows.

.SameAccount writes a condition that matches rows of the same account by x:
as it is, or as true when .Src holds a single account, for which it always
holds (see note.InsertCTE).
*/ -}}
note_in AS MATERIALIZED (
	SELECT nextval('notes_id_seq') AS id, s.x, n.*
	FROM {{.Src}} s CROSS JOIN jsonb_to_recordset(({{.Notes}})->'n')
		AS n (i int, body text, created_at timestamptz, is_pinned boolean, unpin_at timestamptz)
	ORDER BY s.x, n.i),
note_ins AS (
	INSERT INTO notes (id, account_id, body, created_at, is_pinned, unpin_at)
	SELECT n.id, a.id, n.body, n.created_at, n.is_pinned, n.unpin_at
	FROM note_in n JOIN {{.Account}} a ON {{.SameAccount "a.x = n.x"}}
	ORDER BY n.x, n.i),
note_doc_ins AS (
	INSERT INTO note_documents (note_id, position, document_path)
	SELECT n.id, d.position, d.path
	FROM {{.Src}} s CROSS JOIN jsonb_to_recordset(({{.Notes}})->'d') AS d (note int, position int, path text)
	JOIN note_in n ON {{.SameAccount "n.x = s.x"}} AND n.i = d.note JOIN {{.Account}} a ON {{.SameAccount "a.x = s.x"}})
