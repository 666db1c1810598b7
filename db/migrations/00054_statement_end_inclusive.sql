-- +goose Up
-- Redefines account_first_open_day (00045; today's bodies of every function
-- are in db/functions.sql): a historical statement's bill_period_to_date is
-- its last billed day, inclusive as the reference says (docs/decisions.md,
-- "Statement periods: both dates inclusive"), so the open period starts the
-- day after the latest one, as it does after last_billed_to_date. A
-- transaction dated on a statement's last day is in a billed period.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION account_first_open_day(p_account bigint) RETURNS date
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT COALESCE(GREATEST(
            (SELECT max(h.bill_period_to_date) FROM historical_statements h WHERE h.account_id = a.id) + 1,
            a.last_billed_to_date + 1),
            (a.created_at AT TIME ZONE s.time_zone)::date)
    FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id WHERE a.id = p_account);
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION account_first_open_day(p_account bigint) RETURNS date
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT COALESCE(GREATEST(
            (SELECT max(h.bill_period_to_date) FROM historical_statements h WHERE h.account_id = a.id),
            a.last_billed_to_date + 1),
            (a.created_at AT TIME ZONE s.time_zone)::date)
    FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id WHERE a.id = p_account);
END
$$;
-- +goose StatementEnd
