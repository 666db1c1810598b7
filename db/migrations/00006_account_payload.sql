-- +goose Up
-- Account payload conformance (jobs/account/RULES.md):
-- * supply_type is any upper-case code, not only the five types with a row
--   layout of their own; the other fields of any other type are kept, as
--   sent, in supply_points.fields.
-- * user_details elements are {namespace, value}, as in the reference.
ALTER TABLE supply_points
    DROP CONSTRAINT supply_points_supply_type_check,
    ADD CONSTRAINT supply_points_supply_type_check CHECK (supply_type ~ '^[A-Z][A-Z0-9_]{0,63}$'),
    ADD COLUMN fields jsonb CHECK (jsonb_typeof(fields) = 'object');

ALTER TABLE customer_user_details RENAME COLUMN key TO namespace;

-- +goose Down
ALTER TABLE customer_user_details RENAME COLUMN namespace TO key;

DELETE FROM supply_points WHERE supply_type NOT IN ('ELECTRICITY', 'HEAT_PUMP', 'LIGHT', 'POLE', 'WATER_HEATER');
ALTER TABLE supply_points
    DROP COLUMN fields,
    DROP CONSTRAINT supply_points_supply_type_check,
    ADD CONSTRAINT supply_points_supply_type_check
        CHECK (supply_type IN ('ELECTRICITY', 'HEAT_PUMP', 'LIGHT', 'POLE', 'WATER_HEATER'));
