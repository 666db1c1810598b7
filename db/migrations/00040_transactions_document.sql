-- +goose Up
-- Redefines post_transactions (defined in 00017, redefined in 00025; today's
-- bodies of every function are in db/functions.sql): it now takes E7's
-- transactions as one jsonb document, as E5's creation statement does,
-- instead of 33 positional parallel arrays.
--
-- account_first_open_day is the one home of the rule "the first day of an
-- account's open statement period": post_transactions and E7's lookup
-- (jobs/postimport) both call it. The closed history ends at the latest of
--   - the latest bill_period_to_date of the account's historical statements,
--     which is exclusive (statement periods are half-open, as in the
--     reference's example where one statement ends on the day the next
--     begins), so that day is the first open one;
--   - its last_billed_to_date, which is inclusive: the day after is the
--     first open one.
-- GREATEST ignores a missing one, so importing an old statement never
-- reopens a billed period. An account with neither opens on its creation
-- date (in its supplier's time zone, since 00042), so that a transaction dated the day the account was created
-- is in its open period. Read it with the account locked, so that no
-- statement import moves the start in between.
-- +goose StatementBegin
CREATE FUNCTION account_first_open_day(p_account bigint) RETURNS date
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(GREATEST(
            (SELECT max(h.bill_period_to_date) FROM historical_statements h WHERE h.account_id = a.id),
            a.last_billed_to_date + 1),
            (a.created_at AT TIME ZONE 'UTC')::date)
    FROM accounts a WHERE a.id = p_account
$$;
-- +goose StatementEnd

DROP FUNCTION post_transactions(text, text, text[], date[], date[], numeric[], text[], text[], text[], text[], text[], text[],
    text[], text[], text[], int[], text[], date[], date[], numeric[], numeric[], numeric[], text[], text[], int[],
    numeric[], text[], numeric[], numeric[], text[], numeric, text[], text, boolean);

-- post_transactions is E7's write in one round trip
-- (jobs/postimport, insertTransactions). Called on its own, the call is one
-- implicit transaction: the function locks the account, then checks what
-- the request was decided on and writes. Each statement of a VOLATILE
-- PL/pgSQL function takes a new snapshot, so the checks after the lock see
-- every import that held the lock before; a single statement could not (its
-- snapshot is taken before the wait). It returns false, and writes nothing,
-- when the account does not exist, one of the transaction ids exists (when
-- p_check_previously_added, E7's check_previously_added, is true: false
-- adds a transaction whose id the account has, as the caller asked), one
-- of the product codes does not, or the open statement period does not
-- start on p_first_open_day; when p_first_open_day is NULL (a request
-- decided without a lookup), when a transaction is dated before the open
-- period. The caller then decides on a lookup read under the lock.
--
-- p_doc is {"delta": ledger change, "transactions": [{"id", "date",
-- "original_date", "amount", "type", "reason", "display_note", "note",
-- "reference", "payment_type", "product_code", "description",
-- "prepay_meter", "line_items": [{"position", "rate_band", "start_date",
-- "end_date", "number_of_units", "net_amount", "price_per_unit",
-- "units": [...]}], "tax_items": [{"position", "amount", "tax_type",
-- "value_taxed", "rate", "unit_type"}]}]}, every number a decimal string so
-- that no value passes through a float.
-- +goose StatementBegin
CREATE FUNCTION post_transactions(p_supplier text, p_ean text, p_doc jsonb, p_first_open_day date,
    p_check_previously_added boolean)
RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
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
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION post_transactions(text, text, jsonb, date, boolean);
DROP FUNCTION account_first_open_day(bigint);
-- +goose StatementBegin
CREATE FUNCTION post_transactions(
    p_supplier text, p_ean text,
    p_tids text[], p_dates date[], p_odates date[], p_amounts numeric[], p_types text[], p_reasons text[],
    p_display_notes text[], p_notes text[], p_references text[], p_payment_types text[], p_products text[],
    p_descriptions text[],
    l_tids text[], l_positions int[], l_bands text[], l_starts date[], l_ends date[], l_counts numeric[],
    l_nets numeric[], l_prices numeric[], l_units text[],
    x_tids text[], x_positions int[], x_amounts numeric[], x_types text[], x_values numeric[], x_rates numeric[],
    x_unit_types text[],
    p_delta numeric, p_prepay_meters text[], p_first_open_day text, p_check_previously_added boolean
) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_account bigint;
    v_first_open_day text;
BEGIN
    SELECT a.id INTO v_account FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id
    WHERE s.code = p_supplier AND a.external_account_number = p_ean
    FOR NO KEY UPDATE OF a;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT to_char(COALESCE(GREATEST(
                (SELECT max(h.bill_period_to_date) FROM historical_statements h WHERE h.account_id = a.id),
                a.last_billed_to_date + 1),
                (a.created_at AT TIME ZONE 'UTC')::date), 'YYYY-MM-DD')
        INTO v_first_open_day FROM accounts a WHERE a.id = v_account;
    IF v_first_open_day IS DISTINCT FROM COALESCE(p_first_open_day, v_first_open_day)
        OR EXISTS (SELECT 1 FROM unnest(p_dates) AS d WHERE d < v_first_open_day::date)
        OR EXISTS (SELECT 1 FROM unnest(p_products) AS c
            WHERE c IS NOT NULL AND NOT EXISTS (SELECT 1 FROM products p WHERE p.code = c))
        OR (p_check_previously_added
            AND EXISTS (SELECT 1 FROM transactions t WHERE t.account_id = v_account AND t.transaction_id = ANY (p_tids))) THEN
        RETURN false;
    END IF;
    WITH ins AS (
        INSERT INTO transactions (account_id, transaction_id, transaction_date, original_transaction_date, amount, type,
            reason, display_note, note, reference, payment_type, product_id, description, to_prepay_meter_serial_number)
        SELECT v_account, u.tid, u.tdate, u.odate, u.amount, u.type, u.reason, u.display_note, u.note, u.reference,
            u.payment_type, (SELECT p.id FROM products p WHERE p.code = u.product_code), u.description, u.prepay_meter
        FROM unnest(p_tids, p_dates, p_odates, p_amounts, p_types, p_reasons, p_display_notes, p_notes, p_references,
            p_payment_types, p_products, p_descriptions, p_prepay_meters)
            AS u (tid, tdate, odate, amount, type, reason, display_note, note, reference, payment_type, product_code,
                description, prepay_meter)
        RETURNING id, transaction_id
    ), li AS (
        INSERT INTO transaction_line_items (transaction_row_id, position, rate_band, start_date, end_date,
            number_of_units, net_amount, price_per_unit, units)
        SELECT ins.id, l.pos, l.rate_band, l.start_date, l.end_date, l.number_of_units, l.net_amount, l.price_per_unit,
            l.units::numeric[]
        FROM unnest(l_tids, l_positions, l_bands, l_starts, l_ends, l_counts, l_nets, l_prices, l_units)
            AS l (tid, pos, rate_band, start_date, end_date, number_of_units, net_amount, price_per_unit, units)
        JOIN ins ON ins.transaction_id = l.tid
    ), ti AS (
        INSERT INTO transaction_tax_items (transaction_row_id, position, amount, tax_type, value_taxed, rate, unit_type)
        SELECT ins.id, x.pos, x.amount, x.tax_type, x.value_taxed, x.rate, x.unit_type
        FROM unnest(x_tids, x_positions, x_amounts, x_types, x_values, x_rates, x_unit_types)
            AS x (tid, pos, amount, tax_type, value_taxed, rate, unit_type)
        JOIN ins ON ins.transaction_id = x.tid
    )
    INSERT INTO ledgers AS lg (account_id, balance) VALUES (v_account, p_delta)
    ON CONFLICT (account_id) DO UPDATE SET balance = lg.balance + EXCLUDED.balance;
    RETURN true;
END
$$;
-- +goose StatementEnd
