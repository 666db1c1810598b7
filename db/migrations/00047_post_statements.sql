-- +goose Up
-- post_statements is E8's write in one round trip (jobs/postimport,
-- postStatements), as post_transactions is E7's. Called on its own, the call
-- is one implicit transaction: the function locks the account as
-- lockAccount does, then writes the statements unless the account has one
-- of their ids already; then it writes none of them. Each statement of a
-- VOLATILE PL/pgSQL function takes a new snapshot, so the insert's check,
-- after the lock, sees every import that held the lock before; a single
-- statement could not (its snapshot is taken before the wait). It answers
-- how many statements it wrote, all of them or none, or NULL when the
-- account does not exist. It is the one home of the insert: the caller's
-- fallback, which names the statements that exist, calls it too, inside a
-- transaction that then reads them under the lock.
-- +goose StatementBegin
CREATE FUNCTION post_statements(p_supplier text, p_ean text, p_ids text[], p_numbers text[], p_froms date[],
    p_tos date[], p_issued date[], p_amounts bigint[], p_paths text[])
RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_account bigint;
    v_written integer;
BEGIN
    SELECT a.id INTO v_account FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id
    WHERE s.code = p_supplier AND a.external_account_number = p_ean
    FOR NO KEY UPDATE OF a;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO historical_statements (account_id, statement_id, number, bill_period_from_date, bill_period_to_date,
        issued_date, gross_amount, statement_path)
    SELECT v_account, u.* FROM unnest(p_ids, p_numbers, p_froms, p_tos, p_issued, p_amounts, p_paths)
        AS u (statement_id, number, bill_period_from_date, bill_period_to_date, issued_date, gross_amount, statement_path)
    WHERE NOT EXISTS (SELECT 1 FROM historical_statements h WHERE h.account_id = v_account AND h.statement_id = ANY (p_ids));
    GET DIAGNOSTICS v_written = ROW_COUNT;
    RETURN v_written;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION post_statements(text, text, text[], text[], date[], date[], date[], bigint[], text[]);
