-- +goose Up
-- Spec 2.6 lists business_type LTD only "in use": an example, not the whole
-- set. Any upper-case code is accepted, as for the other coded fields.
ALTER TABLE businesses DROP CONSTRAINT businesses_business_type_check;
ALTER TABLE businesses
    ADD CONSTRAINT businesses_business_type_check CHECK (business_type ~ '^[A-Z][A-Z0-9_]{0,63}$');

-- +goose Down
ALTER TABLE businesses DROP CONSTRAINT businesses_business_type_check;
ALTER TABLE businesses
    ADD CONSTRAINT businesses_business_type_check
        CHECK (business_type IN ('LTD', 'PLC', 'LLP', 'SOLE_TRADER', 'PARTNERSHIP', 'CHARITY'));
