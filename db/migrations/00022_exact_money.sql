-- +goose Up
-- E7 keeps amounts exactly as sent: the reference allows up to 10 decimal
-- places in amount, net_amount, tax amount and value_taxed (pattern
-- ^-?\d{0,10}(?:\.\d{0,10})?$), and fractional-penny line items are real.
-- The ledger sums the exact values; only the answer's amount is rounded to
-- two places (spec 2.7). The columns are numeric without a fixed scale, so
-- that each value keeps the scale it was written with ("71.10" stays
-- "71.10", "0.125" stays "0.125"); the checks hold what the reference
-- allows: ten digits before the point and ten after it. The balance keeps
-- room for many such amounts.
ALTER TABLE transactions ALTER COLUMN amount TYPE numeric,
    ADD CONSTRAINT transactions_amount_range CHECK (scale(amount) <= 10 AND abs(amount) < 1e10);
ALTER TABLE transaction_line_items ALTER COLUMN net_amount TYPE numeric,
    ADD CONSTRAINT transaction_line_items_net_amount_range CHECK (scale(net_amount) <= 10 AND abs(net_amount) < 1e10);
ALTER TABLE transaction_tax_items
    ALTER COLUMN amount TYPE numeric,
    ALTER COLUMN value_taxed TYPE numeric,
    ADD CONSTRAINT transaction_tax_items_amount_range CHECK (scale(amount) <= 10 AND abs(amount) < 1e10),
    ADD CONSTRAINT transaction_tax_items_value_taxed_range CHECK (scale(value_taxed) <= 10 AND abs(value_taxed) < 1e10);
ALTER TABLE ledgers ALTER COLUMN balance TYPE numeric,
    ALTER COLUMN balance SET DEFAULT 0.00,
    ADD CONSTRAINT ledgers_balance_range CHECK (abs(balance) < 1e12);

-- +goose Down
-- Rounds every amount to two places, half away from zero, as PostgreSQL does.
ALTER TABLE ledgers DROP CONSTRAINT ledgers_balance_range,
    ALTER COLUMN balance TYPE numeric(14, 2),
    ALTER COLUMN balance SET DEFAULT 0;
ALTER TABLE transaction_tax_items
    DROP CONSTRAINT transaction_tax_items_amount_range,
    DROP CONSTRAINT transaction_tax_items_value_taxed_range,
    ALTER COLUMN amount TYPE numeric(14, 2),
    ALTER COLUMN value_taxed TYPE numeric(14, 2);
ALTER TABLE transaction_line_items DROP CONSTRAINT transaction_line_items_net_amount_range,
    ALTER COLUMN net_amount TYPE numeric(14, 2);
ALTER TABLE transactions DROP CONSTRAINT transactions_amount_range,
    ALTER COLUMN amount TYPE numeric(14, 2);
