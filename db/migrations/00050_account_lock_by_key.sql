-- +goose Up
-- Redefines post_transactions, post_notes and post_statements (today's
-- bodies of every function are in db/functions.sql) so that their lock of
-- the account finds it by both columns of its unique key whatever the
-- planner knows. Joined to import_suppliers on s.code, the query could be
-- planned accounts first, with only external_account_number as the index
-- condition: a walk of the whole (supplier_id, external_account_number)
-- index for every E6, E7 and E8. That is the plan of a table not yet
-- analysed, the first minutes of a migration into a new database, and a
-- PL/pgSQL function keeps it for the session. The supplier's id is now
-- found first, in an InitPlan.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.post_transactions(p_supplier text, p_ean text, p_doc jsonb, p_first_open_day date, p_check_previously_added boolean)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
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
$function$
;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.post_notes(p_supplier text, p_ean text, p_hashes text[], p_bodies text[], p_created_ats timestamp with time zone[], p_pinned boolean[], p_unpin_ats timestamp with time zone[], p_doc_notes bigint[], p_doc_positions integer[], p_doc_paths text[])
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_account bigint;
BEGIN
    SELECT a.id INTO v_account FROM accounts a
    WHERE a.supplier_id = (SELECT s.id FROM import_suppliers s WHERE s.code = p_supplier)
      AND a.external_account_number = p_ean
    FOR NO KEY UPDATE OF a;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM notes n WHERE n.account_id = v_account AND md5(n.body) = ANY (p_hashes)) THEN
        RETURN false;
    END IF;
    PERFORM add_notes(v_account, p_bodies, p_created_ats, p_pinned, p_unpin_ats, p_doc_notes, p_doc_positions,
        p_doc_paths);
    RETURN true;
END
$function$
;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.post_statements(p_supplier text, p_ean text, p_ids text[], p_numbers text[], p_froms date[], p_tos date[], p_issued date[], p_amounts bigint[], p_paths text[])
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_account bigint;
    v_written integer;
BEGIN
    SELECT a.id INTO v_account FROM accounts a
    WHERE a.supplier_id = (SELECT s.id FROM import_suppliers s WHERE s.code = p_supplier)
      AND a.external_account_number = p_ean
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
$function$
;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.post_transactions(p_supplier text, p_ean text, p_doc jsonb, p_first_open_day date, p_check_previously_added boolean)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_account bigint;
    v_first_open_day date;
BEGIN
    SELECT a.id INTO v_account FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id
    WHERE s.code = p_supplier AND a.external_account_number = p_ean
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
$function$
;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.post_notes(p_supplier text, p_ean text, p_hashes text[], p_bodies text[], p_created_ats timestamp with time zone[], p_pinned boolean[], p_unpin_ats timestamp with time zone[], p_doc_notes bigint[], p_doc_positions integer[], p_doc_paths text[])
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_account bigint;
BEGIN
    SELECT a.id INTO v_account FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id
    WHERE s.code = p_supplier AND a.external_account_number = p_ean
    FOR NO KEY UPDATE OF a;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM notes n WHERE n.account_id = v_account AND md5(n.body) = ANY (p_hashes)) THEN
        RETURN false;
    END IF;
    PERFORM add_notes(v_account, p_bodies, p_created_ats, p_pinned, p_unpin_ats, p_doc_notes, p_doc_positions,
        p_doc_paths);
    RETURN true;
END
$function$
;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.post_statements(p_supplier text, p_ean text, p_ids text[], p_numbers text[], p_froms date[], p_tos date[], p_issued date[], p_amounts bigint[], p_paths text[])
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
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
$function$
;
-- +goose StatementEnd
