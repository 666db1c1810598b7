-- +goose Up
-- E7's write in one round trip (jobs/postimport/transactions.go,
-- insertTransactions). Called on its own, the call is one implicit
-- transaction: the function locks the account, then checks what the
-- request was decided on and writes. Each statement of a VOLATILE PL/pgSQL
-- function takes a new snapshot, so the checks after the lock see every
-- import that held the lock before; a single statement could not (its
-- snapshot is taken before the wait). It returns false, and writes nothing,
-- when the account does not exist, one of the transaction ids exists, one
-- of the product codes does not, or the open statement period does not
-- start on p_first_open_day; when p_first_open_day is NULL (a request
-- decided without a lookup), when a transaction is dated before the open
-- period. The caller then decides on a lookup read under the lock. The
-- expression of the first open day is the one of jobs/postimport/period.go
-- (firstOpenDayExpr); the two must agree.
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

-- +goose Down
DROP FUNCTION post_transactions(text, text, text[], date[], date[], numeric[], text[], text[], text[], text[], text[], text[],
    text[], text[], text[], int[], text[], date[], date[], numeric[], numeric[], numeric[], text[], text[], int[],
    numeric[], text[], numeric[], numeric[], text[], numeric, text[], text);
