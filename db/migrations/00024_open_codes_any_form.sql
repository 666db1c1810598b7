-- +goose Up
-- Open codes (values the spec lists "in use") keep only a length limit:
-- no source fixes their form, so lower case and a leading digit (3PH) are
-- codes too. The checks say what validate.OpenCode says: 1 to 64
-- characters (business_type may be '' when omitted, migration 00023).
ALTER TABLE supply_points DROP CONSTRAINT supply_points_supply_type_check,
    ADD CONSTRAINT supply_points_supply_type_check CHECK (char_length(supply_type) BETWEEN 1 AND 64);
ALTER TABLE businesses DROP CONSTRAINT businesses_business_type_check,
    ADD CONSTRAINT businesses_business_type_check CHECK (char_length(business_type) <= 64);
ALTER TABLE payment_instructions DROP CONSTRAINT payment_instructions_type_check,
    ADD CONSTRAINT payment_instructions_type_check CHECK (char_length(type) BETWEEN 1 AND 64);

-- +goose Down
ALTER TABLE payment_instructions DROP CONSTRAINT payment_instructions_type_check,
    ADD CONSTRAINT payment_instructions_type_check CHECK (type ~ '^[A-Z][A-Z0-9_]{0,63}$') NOT VALID;
ALTER TABLE businesses DROP CONSTRAINT businesses_business_type_check,
    ADD CONSTRAINT businesses_business_type_check CHECK (business_type = '' OR business_type ~ '^[A-Z][A-Z0-9_]{0,63}$') NOT VALID;
ALTER TABLE supply_points DROP CONSTRAINT supply_points_supply_type_check,
    ADD CONSTRAINT supply_points_supply_type_check CHECK (supply_type ~ '^[A-Z][A-Z0-9_]{0,63}$') NOT VALID;
