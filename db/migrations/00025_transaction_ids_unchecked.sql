-- +goose Up
-- E7 with check_previously_added=false adds a transaction whose id the
-- account already has: the caller asked the service not to check, and the
-- reference refuses duplicates only within one request (3.5,
-- duplicate_transaction_ids). So transaction ids are no longer unique per
-- account, and post_transactions takes p_check_previously_added: when true
-- (the default of E7) it still returns false, writing nothing, when one of
-- the ids exists, which is what makes a re-sent request add nothing twice;
-- when false it does not look. Everything else is as in 00017, whose
-- comment describes the checks. This file holds the function's current body.
ALTER TABLE transactions DROP CONSTRAINT transactions_account_id_transaction_id_key;
CREATE INDEX transactions_account_transaction_id ON transactions (account_id, transaction_id);

DROP FUNCTION post_transactions(text, text, text[], date[], date[], numeric[], text[], text[], text[], text[], text[], text[],
    text[], text[], text[], int[], text[], date[], date[], numeric[], numeric[], numeric[], text[], text[], int[],
    numeric[], text[], numeric[], numeric[], text[], numeric, text[], text);

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

-- +goose Down
DROP FUNCTION post_transactions(text, text, text[], date[], date[], numeric[], text[], text[], text[], text[], text[], text[],
    text[], text[], text[], int[], text[], date[], date[], numeric[], numeric[], numeric[], text[], text[], int[],
    numeric[], text[], numeric[], numeric[], text[], numeric, text[], text, boolean);
DROP INDEX transactions_account_transaction_id;
DELETE FROM transactions t USING transactions o
    WHERE o.account_id = t.account_id AND o.transaction_id = t.transaction_id AND o.id < t.id;
ALTER TABLE transactions ADD CONSTRAINT transactions_account_id_transaction_id_key UNIQUE (account_id, transaction_id);
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
    p_delta numeric, p_prepay_meters text[], p_first_open_day text
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
        OR EXISTS (SELECT 1 FROM transactions t WHERE t.account_id = v_account AND t.transaction_id = ANY (p_tids)) THEN
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
