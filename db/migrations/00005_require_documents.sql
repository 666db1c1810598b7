-- +goose Up
-- Whether the documents that notes (E5, E6) and historical statements (E8)
-- name must exist in the document store. Off by default, as on the reference
-- platform, which only records the reference; operators turn it on per
-- supplier with importctl supplier set-option CODE require-documents on.
ALTER TABLE import_suppliers ADD COLUMN require_documents boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE import_suppliers DROP COLUMN require_documents;
