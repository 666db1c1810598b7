-- +goose Up
-- The account payload's ledger (spec 2.2 `ledgers`, the reference's GB
-- example) is stored with the account. Its last statement is three columns
-- of the account's one ledger; its transactions are E7's rows, written by
-- insert_transactions, which post_transactions now calls too, so that a
-- transaction is stored the same way whichever endpoint brought it.
--
-- Redefines post_transactions (00050) and account_first_open_day (00054);
-- today's bodies of every function are in db/functions.sql.
ALTER TABLE ledgers
    -- The last day of the ledger's last closed statement (inclusive, as
    -- every billed day): the account's current statement opens the day
    -- after it.
    ADD COLUMN last_statement_closing_date date,
    ADD COLUMN last_statement_issue_date date,
    -- The balance of that statement as sent, in the reference's sign:
    -- credit positive, the opposite of balance (what the customer owes).
    ADD COLUMN last_statement_balance numeric
        CONSTRAINT ledgers_last_statement_balance_range
        CHECK (scale(last_statement_balance) <= 10 AND abs(last_statement_balance) < 1e10);

-- +goose StatementBegin
CREATE FUNCTION insert_transactions(p_account bigint, p_transactions jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    WITH t AS (
        SELECT * FROM jsonb_to_recordset(p_transactions) AS t (id text, date date, original_date date,
            amount numeric, type text, reason text, display_note text, note text, reference text, payment_type text,
            product_code text, description text, prepay_meter text, line_items jsonb, tax_items jsonb)
    ), ins AS (
        INSERT INTO transactions (account_id, transaction_id, transaction_date, original_transaction_date, amount, type,
            reason, display_note, note, reference, payment_type, product_id, description, to_prepay_meter_serial_number)
        SELECT p_account, t.id, t.date, t.original_date, t.amount, t.type, t.reason, t.display_note, t.note,
            t.reference, t.payment_type, (SELECT p.id FROM products p WHERE p.code = t.product_code), t.description,
            t.prepay_meter
        FROM t
        RETURNING id, transaction_id
    ), li AS (
        INSERT INTO transaction_line_items (transaction_row_id, position, rate_band, start_date, end_date,
            number_of_units, net_amount, price_per_unit, units)
        SELECT ins.id, l.position, l.rate_band, l.start_date, l.end_date, l.number_of_units, l.net_amount,
            l.price_per_unit, CASE WHEN l.units IS NULL THEN NULL
                ELSE ARRAY(SELECT u::numeric FROM jsonb_array_elements_text(l.units) AS u) END
        FROM t JOIN ins ON ins.transaction_id = t.id,
            jsonb_to_recordset(t.line_items) AS l (position int, rate_band text, start_date date, end_date date,
                number_of_units numeric, net_amount numeric, price_per_unit numeric, units jsonb)
        WHERE t.line_items IS NOT NULL
    )
    INSERT INTO transaction_tax_items (transaction_row_id, position, amount, tax_type, value_taxed, rate, unit_type)
    SELECT ins.id, x.position, x.amount, x.tax_type, x.value_taxed, x.rate, x.unit_type
    FROM t JOIN ins ON ins.transaction_id = t.id,
        jsonb_to_recordset(t.tax_items) AS x (position int, amount numeric, tax_type text, value_taxed numeric,
            rate numeric, unit_type text)
    WHERE t.tax_items IS NOT NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION post_transactions(p_supplier text, p_ean text, p_doc jsonb, p_first_open_day date,
    p_check_previously_added boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_account bigint;
    v_first_open_day date;
BEGIN
    SELECT a.id INTO v_account FROM accounts a
    WHERE a.supplier_id = (SELECT s.id FROM import_suppliers s WHERE s.code = p_supplier)
      AND a.external_account_number = p_ean
    FOR NO KEY UPDATE OF a;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    v_first_open_day := account_first_open_day(v_account);
    IF v_first_open_day IS DISTINCT FROM COALESCE(p_first_open_day, v_first_open_day)
        OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_doc->'transactions') AS t
            WHERE (t->>'date')::date < v_first_open_day)
        OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_doc->'transactions') AS t
            WHERE t->>'product_code' IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM products p WHERE p.code = t->>'product_code'))
        OR (p_check_previously_added AND EXISTS (SELECT 1 FROM transactions t WHERE t.account_id = v_account
            AND t.transaction_id IN (SELECT x->>'id' FROM jsonb_array_elements(p_doc->'transactions') AS x))) THEN
        RETURN false;
    END IF;
    PERFORM insert_transactions(v_account, p_doc->'transactions');
    INSERT INTO ledgers AS lg (account_id, balance) VALUES (v_account, (p_doc->>'delta')::numeric)
    ON CONFLICT (account_id) DO UPDATE SET balance = lg.balance + EXCLUDED.balance;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION account_first_open_day(p_account bigint) RETURNS date
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT COALESCE(GREATEST(
            (SELECT max(h.bill_period_to_date) FROM historical_statements h WHERE h.account_id = a.id) + 1,
            a.last_billed_to_date + 1,
            (SELECT l.last_statement_closing_date FROM ledgers l WHERE l.account_id = a.id) + 1),
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
            (SELECT max(h.bill_period_to_date) FROM historical_statements h WHERE h.account_id = a.id) + 1,
            a.last_billed_to_date + 1),
            (a.created_at AT TIME ZONE s.time_zone)::date)
    FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id WHERE a.id = p_account);
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION post_transactions(p_supplier text, p_ean text, p_doc jsonb, p_first_open_day date,
    p_check_previously_added boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_account bigint;
    v_first_open_day date;
BEGIN
    SELECT a.id INTO v_account FROM accounts a
    WHERE a.supplier_id = (SELECT s.id FROM import_suppliers s WHERE s.code = p_supplier)
      AND a.external_account_number = p_ean
    FOR NO KEY UPDATE OF a;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    v_first_open_day := account_first_open_day(v_account);
    IF v_first_open_day IS DISTINCT FROM COALESCE(p_first_open_day, v_first_open_day)
        OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_doc->'transactions') AS t
            WHERE (t->>'date')::date < v_first_open_day)
        OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_doc->'transactions') AS t
            WHERE t->>'product_code' IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM products p WHERE p.code = t->>'product_code'))
        OR (p_check_previously_added AND EXISTS (SELECT 1 FROM transactions t WHERE t.account_id = v_account
            AND t.transaction_id IN (SELECT x->>'id' FROM jsonb_array_elements(p_doc->'transactions') AS x))) THEN
        RETURN false;
    END IF;
    WITH t AS (
        SELECT * FROM jsonb_to_recordset(p_doc->'transactions') AS t (id text, date date, original_date date,
            amount numeric, type text, reason text, display_note text, note text, reference text, payment_type text,
            product_code text, description text, prepay_meter text, line_items jsonb, tax_items jsonb)
    ), ins AS (
        INSERT INTO transactions (account_id, transaction_id, transaction_date, original_transaction_date, amount, type,
            reason, display_note, note, reference, payment_type, product_id, description, to_prepay_meter_serial_number)
        SELECT v_account, t.id, t.date, t.original_date, t.amount, t.type, t.reason, t.display_note, t.note,
            t.reference, t.payment_type, (SELECT p.id FROM products p WHERE p.code = t.product_code), t.description,
            t.prepay_meter
        FROM t
        RETURNING id, transaction_id
    ), li AS (
        INSERT INTO transaction_line_items (transaction_row_id, position, rate_band, start_date, end_date,
            number_of_units, net_amount, price_per_unit, units)
        SELECT ins.id, l.position, l.rate_band, l.start_date, l.end_date, l.number_of_units, l.net_amount,
            l.price_per_unit, CASE WHEN l.units IS NULL THEN NULL
                ELSE ARRAY(SELECT u::numeric FROM jsonb_array_elements_text(l.units) AS u) END
        FROM t JOIN ins ON ins.transaction_id = t.id,
            jsonb_to_recordset(t.line_items) AS l (position int, rate_band text, start_date date, end_date date,
                number_of_units numeric, net_amount numeric, price_per_unit numeric, units jsonb)
        WHERE t.line_items IS NOT NULL
    ), ti AS (
        INSERT INTO transaction_tax_items (transaction_row_id, position, amount, tax_type, value_taxed, rate, unit_type)
        SELECT ins.id, x.position, x.amount, x.tax_type, x.value_taxed, x.rate, x.unit_type
        FROM t JOIN ins ON ins.transaction_id = t.id,
            jsonb_to_recordset(t.tax_items) AS x (position int, amount numeric, tax_type text, value_taxed numeric,
                rate numeric, unit_type text)
        WHERE t.tax_items IS NOT NULL
    )
    INSERT INTO ledgers AS lg (account_id, balance) VALUES (v_account, (p_doc->>'delta')::numeric)
    ON CONFLICT (account_id) DO UPDATE SET balance = lg.balance + EXCLUDED.balance;
    RETURN true;
END
$$;
-- +goose StatementEnd

DROP FUNCTION insert_transactions(bigint, jsonb);
ALTER TABLE ledgers DROP COLUMN last_statement_balance, DROP COLUMN last_statement_issue_date,
    DROP COLUMN last_statement_closing_date;
