-- +goose Up
-- E1 refuses only what the spec or the reference refuses. business_type is
-- optional (stored as '' when omitted, as company_name and company_number
-- are), and a contract's versions may share an applicable_at_date: neither
-- source makes the dates unique or ordered.
ALTER TABLE businesses DROP CONSTRAINT businesses_business_type_check,
    ADD CONSTRAINT businesses_business_type_check CHECK (business_type = '' OR business_type ~ '^[A-Z][A-Z0-9_]{0,63}$');
ALTER TABLE business_contract_versions DROP CONSTRAINT business_contract_versions_contract_id_applicable_at_date_key;

-- +goose Down
DELETE FROM business_contract_versions v USING business_contract_versions o
    WHERE o.contract_id = v.contract_id AND o.applicable_at_date = v.applicable_at_date AND o.id < v.id;
ALTER TABLE business_contract_versions ADD CONSTRAINT business_contract_versions_contract_id_applicable_at_date_key
    UNIQUE (contract_id, applicable_at_date);
ALTER TABLE businesses DROP CONSTRAINT businesses_business_type_check,
    ADD CONSTRAINT businesses_business_type_check CHECK (business_type ~ '^[A-Z][A-Z0-9_]{0,63}$') NOT VALID;
