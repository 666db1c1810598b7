-- +goose Up
-- A meter may have several registers of the same type: a day/night meter
-- has two KWH_IMPORT registers. Spec 2.2.5 gives registers no id, and the
-- reference's meter_with_duplicate_register_ids is about register ids, so
-- nothing makes the type unique on a meter. Registers keep their payload
-- order through their id (account creation inserts them in order).
ALTER TABLE registers DROP CONSTRAINT registers_meter_id_register_type_key;
CREATE INDEX registers_meter ON registers (meter_id);

-- +goose Down
DROP INDEX registers_meter;
DELETE FROM registers r USING registers o
    WHERE o.meter_id = r.meter_id AND o.register_type = r.register_type AND o.id < r.id;
ALTER TABLE registers ADD CONSTRAINT registers_meter_id_register_type_key UNIQUE (meter_id, register_type);
