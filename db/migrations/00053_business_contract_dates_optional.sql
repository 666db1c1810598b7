-- +goose Up
-- E1 requires no version date and no terms, as neither the spec nor the
-- reference does (a contract's valid_from_date was never NOT NULL): what a
-- caller did not send is stored as NULL, not invented. An omitted terms is
-- NULL, apart from a sent empty array; the CHECK lets NULL through.
ALTER TABLE business_contract_versions ALTER COLUMN applicable_at_date DROP NOT NULL,
    ALTER COLUMN terms DROP NOT NULL;

-- +goose Down
-- Fails while a version without a date or terms is stored.
ALTER TABLE business_contract_versions ALTER COLUMN applicable_at_date SET NOT NULL,
    ALTER COLUMN terms SET NOT NULL;
