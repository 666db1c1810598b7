-- +goose Up
-- E8 as the reference has it: only statement_id and the two period dates are
-- required, and gross_amount is an integer in the currency's lowest
-- denomination (reference-api.md 3.5: "integer, in the lowest denomination
-- for the currency"), stored exactly as sent.
--
-- Rows written before this migration followed the service's earlier rule:
-- gross_amount in the major unit with up to two decimal places. Multiplying
-- by 100 once here turns that documented meaning into the new one; requests
-- are never scaled.
ALTER TABLE historical_statements
    ALTER COLUMN number DROP NOT NULL,
    ALTER COLUMN issued_date DROP NOT NULL,
    ALTER COLUMN gross_amount DROP NOT NULL,
    ALTER COLUMN gross_amount TYPE bigint USING (gross_amount * 100)::bigint;

-- E7: the reference's own example sends to_prepay_meter_serial_number on a
-- CHARGE (reason PREPAY_DEBT_ADJUSTMENT); it is kept as sent.
ALTER TABLE transactions ADD COLUMN to_prepay_meter_serial_number text;

-- +goose Down
ALTER TABLE transactions DROP COLUMN to_prepay_meter_serial_number;
UPDATE historical_statements SET number = '' WHERE number IS NULL;
UPDATE historical_statements SET issued_date = bill_period_to_date WHERE issued_date IS NULL;
UPDATE historical_statements SET gross_amount = 0 WHERE gross_amount IS NULL;
ALTER TABLE historical_statements
    ALTER COLUMN gross_amount TYPE numeric(14, 2) USING gross_amount / 100.0,
    ALTER COLUMN number SET NOT NULL,
    ALTER COLUMN issued_date SET NOT NULL,
    ALTER COLUMN gross_amount SET NOT NULL;
