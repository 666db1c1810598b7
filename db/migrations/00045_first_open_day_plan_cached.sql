-- +goose Up
-- Redefines account_first_open_day (00042; today's bodies of every function
-- are in db/functions.sql) in PL/pgSQL with the same query. PostgreSQL plans
-- the query of a SQL-language function that it cannot inline (this one has a
-- FROM) again on every call, which cost more than running it; PL/pgSQL keeps
-- the plan for the session. E7 and E8 call it for every request.
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

-- +goose Down
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
