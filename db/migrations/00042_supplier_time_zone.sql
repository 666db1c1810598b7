-- +goose Up
-- Each import supplier has a time zone (an IANA name such as
-- Australia/Sydney; UTC unless the operator sets one with importctl), and
-- every rule that compares a date with "today" uses the date in that zone:
-- an Australian supplier's transaction dated today is today there, up to
-- ten hours before it is in UTC. Redefines account_first_open_day (00040;
-- today's bodies of every function are in db/functions.sql): an account with
-- no billing history opens on its creation date in its supplier's zone.
ALTER TABLE import_suppliers ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION account_first_open_day(p_account bigint) RETURNS date
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(GREATEST(
            (SELECT max(h.bill_period_to_date) FROM historical_statements h WHERE h.account_id = a.id),
            a.last_billed_to_date + 1),
            (a.created_at AT TIME ZONE s.time_zone)::date)
    FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id WHERE a.id = p_account
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION account_first_open_day(p_account bigint) RETURNS date
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(GREATEST(
            (SELECT max(h.bill_period_to_date) FROM historical_statements h WHERE h.account_id = a.id),
            a.last_billed_to_date + 1),
            (a.created_at AT TIME ZONE 'UTC')::date)
    FROM accounts a WHERE a.id = p_account
$$;
-- +goose StatementEnd
ALTER TABLE import_suppliers DROP COLUMN time_zone;
