-- +goose Up
-- Every supplier has a document root of its own: not empty (which
-- was the whole bucket), and neither inside nor around another supplier's
-- root, segment by segment ("acme" and "acme2" are apart, "acme" and
-- "acme/x" are not). Document keys are the root, a slash and a path without
-- "." or ".." segments, so a key of one supplier can then never name, or
-- probe for, a document of another.

-- Existing rows, oldest first: a supplier keeps its root when it is valid and
-- apart from the roots kept so far; otherwise it gets suppliers/<code> (or,
-- should that overlap too, suppliers_/<code>, suppliers__/<code>, ...). Its
-- documents stay where they are: the NOTICE names each change, so that the
-- operator can move them to the new root.
-- +goose StatementBegin
DO $$
DECLARE
    r record;
    candidate text;
    n int;
BEGIN
    CREATE TEMP TABLE kept_roots (root text NOT NULL) ON COMMIT DROP;
    FOR r IN SELECT id, code, document_root FROM import_suppliers ORDER BY id LOOP
        candidate := btrim(r.document_root, '/');
        n := 0;
        WHILE candidate = '' OR candidate ~ '(^|/)(\.|\.\.)?(/|$)' OR candidate ~ '[\\[:cntrl:]]'
            OR EXISTS (SELECT 1 FROM kept_roots k
                       WHERE starts_with(candidate || '/', k.root || '/') OR starts_with(k.root || '/', candidate || '/')) LOOP
            candidate := 'suppliers' || repeat('_', n) || '/' || r.code;
            n := n + 1;
        END LOOP;
        INSERT INTO kept_roots VALUES (candidate);
        IF candidate IS DISTINCT FROM r.document_root THEN
            UPDATE import_suppliers SET document_root = candidate WHERE id = r.id;
            RAISE NOTICE 'import supplier %: document root "%" is now "%"; move its documents there', r.code, r.document_root, candidate;
        END IF;
    END LOOP;
END $$;
-- +goose StatementEnd

ALTER TABLE import_suppliers ADD CONSTRAINT import_suppliers_document_root_check
    CHECK (document_root !~ '(^|/)(\.|\.\.)?(/|$)' AND document_root !~ '[\\[:cntrl:]]');

-- Every writer (importctl, a test's INSERT) goes through the same rule: an
-- empty root becomes suppliers/<code>, and a root that overlaps another is
-- refused. The advisory lock makes concurrent writers take turns, so that two
-- overlapping roots cannot both pass the check.
-- +goose StatementBegin
CREATE FUNCTION import_suppliers_document_root() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    other text;
BEGIN
    NEW.document_root := btrim(coalesce(NEW.document_root, ''), '/');
    IF NEW.document_root = '' THEN
        NEW.document_root := 'suppliers/' || NEW.code;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('import_suppliers.document_root'));
    SELECT code INTO other FROM import_suppliers
    -- A row of the same code is left to the unique constraint, which names
    -- the real refusal (the supplier exists).
    WHERE id <> NEW.id AND code <> NEW.code
      AND (starts_with(NEW.document_root || '/', document_root || '/') OR starts_with(document_root || '/', NEW.document_root || '/'))
    LIMIT 1;
    IF other IS NOT NULL THEN
        RAISE EXCEPTION 'document root "%" overlaps the document root of import supplier %', NEW.document_root, other
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'import_suppliers_document_root_overlap';
    END IF;
    RETURN NEW;
END $$;
-- +goose StatementEnd

CREATE TRIGGER import_suppliers_document_root BEFORE INSERT OR UPDATE OF document_root, code ON import_suppliers
    FOR EACH ROW EXECUTE FUNCTION import_suppliers_document_root();

-- +goose Down
DROP TRIGGER import_suppliers_document_root ON import_suppliers;
DROP FUNCTION import_suppliers_document_root();
ALTER TABLE import_suppliers DROP CONSTRAINT import_suppliers_document_root_check;
