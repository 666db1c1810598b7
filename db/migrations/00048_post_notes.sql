-- +goose Up
-- add_notes writes notes and their documents onto an account in one
-- statement; it is the one home of that insert (jobs/note, Add: E6 and E7's
-- pinned note call it, and post_notes below). The note ids are drawn in the
-- first CTE, which is materialized (nextval is volatile), so each note's
-- documents find their note's id by its position in the arrays rather than
-- by the order of RETURNING rows; p_doc_notes holds those positions,
-- counted from 1. PL/pgSQL rather than SQL: PostgreSQL plans a SQL-language
-- function's statement again on every call, and PL/pgSQL keeps the plan for
-- the session.
-- +goose StatementBegin
CREATE FUNCTION add_notes(p_account bigint, p_bodies text[], p_created_ats timestamptz[], p_pinned boolean[],
    p_unpin_ats timestamptz[], p_doc_notes bigint[], p_doc_positions int[], p_doc_paths text[])
RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    WITH u AS MATERIALIZED (
        SELECT nextval('notes_id_seq') AS id, u.*
        FROM unnest(p_bodies, p_created_ats, p_pinned, p_unpin_ats) WITH ORDINALITY
            AS u (body, created_at, is_pinned, unpin_at, ord)
    ), n AS (
        INSERT INTO notes (id, account_id, body, created_at, is_pinned, unpin_at)
        SELECT u.id, p_account, u.body, u.created_at, u.is_pinned, u.unpin_at FROM u ORDER BY u.ord
    )
    INSERT INTO note_documents (note_id, position, document_path)
    SELECT u.id, d.position, d.path FROM unnest(p_doc_notes, p_doc_positions, p_doc_paths) AS d (ord, position, path)
    JOIN u ON u.ord = d.ord;
END
$$;
-- +goose StatementEnd

-- post_notes is E6's write in one round trip for its usual request, one
-- whose notes the account has none of (jobs/note, Post). Called on its own,
-- the call is one implicit transaction: the function locks the account as
-- lockAccount (jobs/postimport) does, then checks that no note of the
-- account has one of p_hashes, the md5 of the posted bodies (the condition
-- of the read that E6 deduplicates with, which the expression index on
-- (account_id, md5(body)) serves), and if none has, writes the notes
-- through add_notes. Each statement of a VOLATILE PL/pgSQL function takes a
-- new snapshot, so the check, after the lock, sees every import that held
-- the lock before. It answers true when it wrote, false, having written
-- nothing, when a note of the account has one of the hashes (the caller then
-- deduplicates in a transaction that holds the lock), and NULL when the
-- account does not exist.
-- +goose StatementBegin
CREATE FUNCTION post_notes(p_supplier text, p_ean text, p_hashes text[], p_bodies text[], p_created_ats timestamptz[],
    p_pinned boolean[], p_unpin_ats timestamptz[], p_doc_notes bigint[], p_doc_positions int[], p_doc_paths text[])
RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_account bigint;
BEGIN
    SELECT a.id INTO v_account FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id
    WHERE s.code = p_supplier AND a.external_account_number = p_ean
    FOR NO KEY UPDATE OF a;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM notes n WHERE n.account_id = v_account AND md5(n.body) = ANY (p_hashes)) THEN
        RETURN false;
    END IF;
    PERFORM add_notes(v_account, p_bodies, p_created_ats, p_pinned, p_unpin_ats, p_doc_notes, p_doc_positions,
        p_doc_paths);
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION post_notes(text, text, text[], text[], timestamptz[], boolean[], timestamptz[], bigint[], int[], text[]);
DROP FUNCTION add_notes(bigint, text[], timestamptz[], boolean[], timestamptz[], bigint[], int[], text[]);
