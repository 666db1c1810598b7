-- +goose Up
-- The catalogue of supply types (spec 2.2.4). The reference refuses an
-- unknown supply type (supply_type_not_recognised), and spec 1 rule 6 allows
-- only documented fields, which an unknown type cannot have: a typo
-- (ELECTRICTY) must not create a supply point of a type nothing knows. The
-- five types of spec 2.2.4 are there from the start; the operator adds the
-- others a migration needs with `importctl supply-type add`. Types are never
-- removed, so a payload staged with a known type stays valid until E5.
-- The code's limit is that of every open code (validate.MaxCodeLength).
CREATE TABLE supply_types (
    code       text PRIMARY KEY CHECK (char_length(code) BETWEEN 1 AND 64 AND btrim(code) <> ''),
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO supply_types (code) VALUES ('ELECTRICITY'), ('HEAT_PUMP'), ('LIGHT'), ('POLE'), ('WATER_HEATER');

-- +goose Down
DROP TABLE supply_types;
