-- +goose Up
-- A meter's serial number is unique per supply point, not per account: a GB
-- smart meter that both imports and exports has one serial on two supply
-- points (its import and its export MPAN), as the reference's own codes
-- show (import_meter_not_found_for_export_meter). Nothing finds a meter by
-- account and serial: registers hang off the meter's id, readings off the
-- supply point. Within one supply point the serial still names one meter,
-- which jobs/account checks first (duplicate_meter_serial_number). Every
-- account stored so far meets the new index, as it met the stricter old one.
DROP INDEX meters_serial_number;
CREATE UNIQUE INDEX meters_supply_point_serial_number ON meters (supply_point_id, serial_number) WHERE serial_number IS NOT NULL;

-- +goose Down
-- Fails while an account has one serial on two supply points.
DROP INDEX meters_supply_point_serial_number;
CREATE UNIQUE INDEX meters_serial_number ON meters (account_id, serial_number) WHERE serial_number IS NOT NULL;
