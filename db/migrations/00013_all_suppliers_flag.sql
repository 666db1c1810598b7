-- +goose Up
-- "All suppliers" is a flag of its own. It used to be read from an
-- empty list of suppliers, so a key whose suppliers were all deleted (the
-- cascade removed its rows) silently became a key for every supplier. A key
-- without the flag now sees only the suppliers it lists, none if it lists
-- none, and a supplier a key lists cannot be deleted.
ALTER TABLE api_keys ADD COLUMN all_suppliers boolean NOT NULL DEFAULT false;
UPDATE api_keys k SET all_suppliers = true
WHERE NOT EXISTS (SELECT 1 FROM api_key_suppliers ks WHERE ks.api_key_id = k.id);

ALTER TABLE api_key_suppliers DROP CONSTRAINT api_key_suppliers_supplier_id_fkey;
ALTER TABLE api_key_suppliers
    ADD CONSTRAINT api_key_suppliers_supplier_id_fkey
        FOREIGN KEY (supplier_id) REFERENCES import_suppliers (id) ON DELETE RESTRICT;

-- +goose Down
ALTER TABLE api_key_suppliers DROP CONSTRAINT api_key_suppliers_supplier_id_fkey;
ALTER TABLE api_key_suppliers
    ADD CONSTRAINT api_key_suppliers_supplier_id_fkey
        FOREIGN KEY (supplier_id) REFERENCES import_suppliers (id) ON DELETE CASCADE;
ALTER TABLE api_keys DROP COLUMN all_suppliers;
