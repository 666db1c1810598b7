-- +goose Up
-- Redefines import_suppliers_document_root (first defined in 00014; today's
-- bodies of every function are in db/functions.sql). The
-- trigger is the one home of the rule "a supplier's document root is neither
-- inside nor around another supplier's", for every writer and for two
-- writers at once; its refusal now names the other supplier in DETAIL, so
-- that importctl can say which root is in the way without checking the rule
-- again in Go.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION import_suppliers_document_root() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    other text;
BEGIN
    NEW.document_root := btrim(coalesce(NEW.document_root, ''), '/');
    IF NEW.document_root = '' THEN
        NEW.document_root := 'suppliers/' || NEW.code;
    END IF;
    -- The advisory lock makes concurrent writers take turns, so that two
    -- overlapping roots cannot both pass the check.
    PERFORM pg_advisory_xact_lock(hashtext('import_suppliers.document_root'));
    SELECT code INTO other FROM import_suppliers
    -- A row of the same code is left to the unique constraint, which names
    -- the real refusal (the supplier exists). Segment by segment: "acme" and
    -- "acme/x" overlap, "acme" and "acme2" do not.
    WHERE id <> NEW.id AND code <> NEW.code
      AND (starts_with(NEW.document_root || '/', document_root || '/') OR starts_with(document_root || '/', NEW.document_root || '/'))
    ORDER BY code
    LIMIT 1;
    IF other IS NOT NULL THEN
        RAISE EXCEPTION 'document root "%" overlaps the document root of import supplier %', NEW.document_root, other
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'import_suppliers_document_root_overlap', DETAIL = other;
    END IF;
    RETURN NEW;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION import_suppliers_document_root() RETURNS trigger LANGUAGE plpgsql AS $$
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
