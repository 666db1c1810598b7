-- The current definition of every SQL function and trigger of the schema, as
-- PostgreSQL holds it after every migration under migrations/. Migrations
-- redefine functions over time (each says so at its top); this file is the
-- one place to read today's body of each. It is generated, not applied:
--
--   go test ./db -run TestFunctions -update
--
-- and TestFunctions_FileIsTheMigratedSchemas fails when a migration changes a
-- function without the file being regenerated.

-- Functions, by name.

CREATE OR REPLACE FUNCTION public.account_first_open_day(p_account bigint)
 RETURNS date
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
    RETURN (SELECT COALESCE(GREATEST(
            (SELECT max(h.bill_period_to_date) FROM historical_statements h WHERE h.account_id = a.id) + 1,
            a.last_billed_to_date + 1,
            (SELECT l.last_statement_closing_date FROM ledgers l WHERE l.account_id = a.id) + 1),
            (a.created_at AT TIME ZONE s.time_zone)::date)
    FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id WHERE a.id = p_account);
END
$function$
;

CREATE OR REPLACE FUNCTION public.add_notes(p_account bigint, p_bodies text[], p_created_ats timestamp with time zone[], p_pinned boolean[], p_unpin_ats timestamp with time zone[], p_doc_notes bigint[], p_doc_positions integer[], p_doc_paths text[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    WITH u AS MATERIALIZED (
        SELECT nextval('notes_id_seq') AS id, u.*
        FROM unnest(p_bodies, p_created_ats, p_pinned, p_unpin_ats) WITH ORDINALITY
            AS u (body, created_at, is_pinned, unpin_at, ord)
    ), n AS (
        INSERT INTO notes (id, account_id, body, created_at, is_pinned, unpin_at)
        SELECT u.id, p_account, u.body, u.created_at, u.is_pinned, u.unpin_at FROM u ORDER BY u.ord
    )
    INSERT INTO note_documents (note_id, position, document_path)
    SELECT u.id, d.position, d.path FROM unnest(p_doc_notes, p_doc_positions, p_doc_paths) AS d (ord, position, path)
    JOIN u ON u.ord = d.ord;
END
$function$
;

CREATE OR REPLACE FUNCTION public.import_suppliers_document_root()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    other text;
BEGIN
    NEW.document_root := btrim(coalesce(NEW.document_root, ''), '/');
    IF NEW.document_root = '' THEN
        NEW.document_root := 'suppliers/' || NEW.code;
    END IF;
    -- The advisory lock makes concurrent writers take turns, so that two
    -- overlapping roots cannot both pass the check.
    PERFORM pg_advisory_xact_lock(hashtext('import_suppliers.document_root'));
    SELECT code INTO other FROM import_suppliers
    -- A row of the same code is left to the unique constraint, which names
    -- the real refusal (the supplier exists). Segment by segment: "acme" and
    -- "acme/x" overlap, "acme" and "acme2" do not.
    WHERE id <> NEW.id AND code <> NEW.code
      AND (starts_with(NEW.document_root || '/', document_root || '/') OR starts_with(document_root || '/', NEW.document_root || '/'))
    ORDER BY code
    LIMIT 1;
    IF other IS NOT NULL THEN
        RAISE EXCEPTION 'document root "%" overlaps the document root of import supplier %', NEW.document_root, other
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'import_suppliers_document_root_overlap', DETAIL = other;
    END IF;
    RETURN NEW;
END $function$
;

CREATE OR REPLACE FUNCTION public.insert_transactions(p_account bigint, p_transactions jsonb)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
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
$function$
;

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
    PERFORM insert_transactions(v_account, p_doc->'transactions');
    INSERT INTO ledgers AS lg (account_id, balance) VALUES (v_account, (p_doc->>'delta')::numeric)
    ON CONFLICT (account_id) DO UPDATE SET balance = lg.balance + EXCLUDED.balance;
    RETURN true;
END
$function$
;

CREATE OR REPLACE FUNCTION public.progress_compact()
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
    folded bigint := 0;
    rows_  bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('progress_compact')) THEN
        RETURN 0;
    END IF;
    WITH k AS (SELECT supplier_id, state FROM progress_counts GROUP BY 1, 2 HAVING count(*) > 1),
    d AS (DELETE FROM progress_counts p USING k WHERE p.supplier_id = k.supplier_id AND p.state = k.state
          RETURNING p.supplier_id, p.state, p.n),
    f AS (INSERT INTO progress_counts (supplier_id, state, n)
          SELECT supplier_id, state, sum(n) FROM d GROUP BY 1, 2 HAVING sum(n) <> 0)
    SELECT count(*) INTO rows_ FROM d;
    folded := folded + rows_;
    WITH k AS (SELECT supplier_id, code, attr FROM progress_errors GROUP BY 1, 2, 3 HAVING count(*) > 1),
    d AS (DELETE FROM progress_errors p USING k
          WHERE p.supplier_id = k.supplier_id AND p.code = k.code AND p.attr = k.attr
          RETURNING p.supplier_id, p.code, p.attr, p.n),
    f AS (INSERT INTO progress_errors (supplier_id, code, attr, n)
          SELECT supplier_id, code, attr, sum(n) FROM d GROUP BY 1, 2, 3 HAVING sum(n) <> 0)
    SELECT count(*) INTO rows_ FROM d;
    folded := folded + rows_;
    WITH k AS (SELECT supplier_id, minute FROM progress_minutes GROUP BY 1, 2 HAVING count(*) > 1),
    d AS (DELETE FROM progress_minutes p USING k WHERE p.supplier_id = k.supplier_id AND p.minute = k.minute
          RETURNING p.supplier_id, p.minute, p.completed, p.failed, p.refused),
    f AS (INSERT INTO progress_minutes (supplier_id, minute, completed, failed, refused)
          SELECT supplier_id, minute, sum(completed), sum(failed), sum(refused) FROM d GROUP BY 1, 2
          HAVING sum(completed) <> 0 OR sum(failed) <> 0 OR sum(refused) <> 0)
    SELECT count(*) INTO rows_ FROM d;
    RETURN folded + rows_;
END
$function$
;

CREATE OR REPLACE FUNCTION public.progress_error_pairs(last_error jsonb)
 RETURNS TABLE(code text, attr text)
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT DISTINCT coalesce(e ->> 'code', ''), coalesce(e ->> 'attr', '')
    FROM jsonb_array_elements(CASE
        WHEN jsonb_typeof(last_error -> 'errors') = 'array' AND jsonb_array_length(last_error -> 'errors') > 0
            THEN last_error -> 'errors'
        ELSE jsonb_build_array(jsonb_build_object('code', last_error ->> 'code'))
    END) AS e
$function$
;

CREATE OR REPLACE FUNCTION public.progress_rebuild()
 RETURNS void
 LANGUAGE sql
AS $function$
    DELETE FROM progress_counts;
    DELETE FROM progress_errors;
    DELETE FROM progress_minutes;

    INSERT INTO progress_counts (supplier_id, state, n)
    SELECT supplier_id, progress_state(status, last_error), count(*)
    FROM import_processes GROUP BY 1, 2
    UNION ALL
    SELECT supplier_id, staging_refusal_state(error), count(*)
    FROM staging_refusals GROUP BY 1, 2;

    INSERT INTO progress_errors (supplier_id, code, attr, n)
    SELECT supplier_id, code, attr, count(*)
    FROM (
        SELECT p.supplier_id, e.code, e.attr
        FROM import_processes p, progress_error_pairs(p.last_error) e
        WHERE progress_state(p.status, p.last_error) = 'failed'
        UNION ALL
        SELECT r.supplier_id, e.code, e.attr
        FROM staging_refusals r, progress_error_pairs(r.error) e
    ) AS e
    GROUP BY 1, 2, 3;

    INSERT INTO progress_minutes (supplier_id, minute, completed, failed, refused)
    SELECT supplier_id, minute, sum(completed), sum(failed), sum(refused)
    FROM (
        SELECT supplier_id, date_trunc('minute', account_created_at) AS minute, 1 AS completed, 0 AS failed, 0 AS refused
        FROM import_processes WHERE status = 'COMPLETED' AND account_created_at IS NOT NULL
        UNION ALL
        SELECT supplier_id, date_trunc('minute', updated_at), 0, 1, 0
        FROM import_processes WHERE progress_state(status, last_error) = 'failed'
        UNION ALL
        SELECT supplier_id, date_trunc('minute', refused_at), 0, 0, 1
        FROM staging_refusals WHERE staging_refusal_state(error) = 'refused'
    ) AS e
    GROUP BY 1, 2;
$function$
;

CREATE OR REPLACE FUNCTION public.progress_state(status text, last_error jsonb)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT CASE
        WHEN status = 'COMPLETED' THEN 'completed'
        WHEN status = 'IN_PROGRESS' THEN 'in_progress'
        WHEN last_error IS NOT NULL THEN 'failed'
        ELSE 'staged'
    END
$function$
;

CREATE OR REPLACE FUNCTION public.progress_track()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    s         smallint := pg_backend_pid() % 16;
    old_sup   bigint;
    new_sup   bigint;
    old_state text;
    new_state text;
    old_error jsonb;
    new_error jsonb;
    this_min  timestamptz := date_trunc('minute', now());
BEGIN
    IF TG_OP <> 'INSERT' THEN
        old_sup := OLD.supplier_id;
        old_state := progress_state(OLD.status, OLD.last_error);
        IF old_state = 'failed' THEN old_error := OLD.last_error; END IF;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        new_sup := NEW.supplier_id;
        new_state := progress_state(NEW.status, NEW.last_error);
        IF new_state = 'failed' THEN new_error := NEW.last_error; END IF;
    END IF;

    -- Two single-row upserts, the lower key first (no query over a VALUES
    -- list: this runs for every staging of a new account).
    IF old_state IS NOT NULL AND new_state IS NOT NULL AND (old_sup, old_state) = (new_sup, new_state) THEN
        NULL; -- same state: only the error changed
    ELSIF new_state IS NOT NULL AND (old_state IS NULL OR (new_sup, new_state) < (old_sup, old_state)) THEN
        INSERT INTO progress_counts AS c (supplier_id, state, slot, n) VALUES (new_sup, new_state, s, 1)
        ON CONFLICT (supplier_id, state, slot) DO UPDATE SET n = c.n + 1;
        IF old_state IS NOT NULL THEN
            INSERT INTO progress_counts AS c (supplier_id, state, slot, n) VALUES (old_sup, old_state, s, -1)
            ON CONFLICT (supplier_id, state, slot) DO UPDATE SET n = c.n - 1;
        END IF;
    ELSE
        INSERT INTO progress_counts AS c (supplier_id, state, slot, n) VALUES (old_sup, old_state, s, -1)
        ON CONFLICT (supplier_id, state, slot) DO UPDATE SET n = c.n - 1;
        IF new_state IS NOT NULL THEN
            INSERT INTO progress_counts AS c (supplier_id, state, slot, n) VALUES (new_sup, new_state, s, 1)
            ON CONFLICT (supplier_id, state, slot) DO UPDATE SET n = c.n + 1;
        END IF;
    END IF;

    IF old_error IS DISTINCT FROM new_error OR old_sup IS DISTINCT FROM new_sup THEN
        INSERT INTO progress_errors AS c (supplier_id, code, attr, slot, n)
        SELECT d.sup, d.code, d.attr, s, sum(d.n)
        FROM (
            SELECT old_sup AS sup, p.code, p.attr, -1 AS n FROM progress_error_pairs(old_error) p WHERE old_error IS NOT NULL
            UNION ALL
            SELECT new_sup, p.code, p.attr, 1 FROM progress_error_pairs(new_error) p WHERE new_error IS NOT NULL
        ) AS d
        GROUP BY d.sup, d.code, d.attr
        HAVING sum(d.n) <> 0
        ORDER BY d.sup, d.code, d.attr
        ON CONFLICT (supplier_id, code, attr, slot) DO UPDATE SET n = c.n + EXCLUDED.n;
    END IF;

    IF new_state = 'completed' AND old_state IS DISTINCT FROM 'completed' THEN
        INSERT INTO progress_minutes AS c (supplier_id, minute, slot, completed) VALUES (new_sup, this_min, s, 1)
        ON CONFLICT (supplier_id, minute, slot) DO UPDATE SET completed = c.completed + 1;
    ELSIF new_error IS NOT NULL AND (old_state IS DISTINCT FROM 'failed' OR old_error IS DISTINCT FROM new_error) THEN
        INSERT INTO progress_minutes AS c (supplier_id, minute, slot, failed) VALUES (new_sup, this_min, s, 1)
        ON CONFLICT (supplier_id, minute, slot) DO UPDATE SET failed = c.failed + 1;
    END IF;
    RETURN NULL;
END
$function$
;

CREATE OR REPLACE FUNCTION public.progress_track_statement()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    any_failed boolean;
    any_ended  boolean;
    this_min   timestamptz := date_trunc('minute', now());
BEGIN
    IF TG_OP = 'INSERT' THEN
        WITH r AS MATERIALIZED (SELECT supplier_id, progress_state(status, last_error) AS state FROM new_rows),
        c AS (INSERT INTO progress_counts (supplier_id, state, n) SELECT supplier_id, state, count(*) FROM r GROUP BY 1, 2)
        SELECT bool_or(state = 'failed'), bool_or(state IN ('completed', 'failed')) INTO any_failed, any_ended FROM r;
        IF any_failed THEN
            INSERT INTO progress_errors (supplier_id, code, attr, n)
            SELECT r.supplier_id, e.code, e.attr, count(*)
            FROM new_rows r, progress_error_pairs(r.last_error) e
            WHERE progress_state(r.status, r.last_error) = 'failed'
            GROUP BY 1, 2, 3;
        END IF;
        IF any_ended THEN
            INSERT INTO progress_minutes (supplier_id, minute, completed, failed)
            SELECT supplier_id, this_min, count(*) FILTER (WHERE s = 'completed'), count(*) FILTER (WHERE s = 'failed')
            FROM (SELECT supplier_id, progress_state(status, last_error) AS s FROM new_rows) AS r
            WHERE s IN ('completed', 'failed')
            GROUP BY 1;
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO progress_counts (supplier_id, state, n)
        SELECT supplier_id, progress_state(status, last_error), -count(*)
        FROM old_rows GROUP BY 1, 2;
        INSERT INTO progress_errors (supplier_id, code, attr, n)
        SELECT r.supplier_id, e.code, e.attr, -count(*)
        FROM old_rows r, progress_error_pairs(r.last_error) e
        WHERE progress_state(r.status, r.last_error) = 'failed'
        GROUP BY 1, 2, 3;
    ELSE
        -- A statement that changed no row (the UPDATE half of an INSERT ...
        -- ON CONFLICT that inserted) ends here, with both flags NULL.
        WITH r AS MATERIALIZED (
            SELECT supplier_id AS sup, progress_state(status, last_error) AS state, -1 AS d FROM old_rows
            UNION ALL
            SELECT supplier_id, progress_state(status, last_error), 1 FROM new_rows),
        c AS (INSERT INTO progress_counts (supplier_id, state, n)
            SELECT sup, state, sum(d) FROM r GROUP BY 1, 2 HAVING sum(d) <> 0)
        SELECT bool_or(state = 'failed'), bool_or(d = 1 AND state IN ('completed', 'failed')) INTO any_failed, any_ended FROM r;
        IF any_failed THEN
            INSERT INTO progress_errors (supplier_id, code, attr, n)
            SELECT sup, code, attr, sum(d)
            FROM (
                SELECT r.supplier_id AS sup, e.code, e.attr, -1 AS d
                FROM old_rows r, progress_error_pairs(r.last_error) e
                WHERE progress_state(r.status, r.last_error) = 'failed'
                UNION ALL
                SELECT r.supplier_id, e.code, e.attr, 1
                FROM new_rows r, progress_error_pairs(r.last_error) e
                WHERE progress_state(r.status, r.last_error) = 'failed'
            ) AS c
            GROUP BY 1, 2, 3
            HAVING sum(d) <> 0;
        END IF;
        IF any_ended THEN
            -- A completion counts when a process becomes completed; a failure
            -- each time a process records a new failure. The old and new rows
            -- of a process pair up by grouping on id, not by a join: the plan
            -- is made once, for the small transition tables of the first
            -- call, and a nested loop over a bulk statement's would be
            -- quadratic.
            INSERT INTO progress_minutes (supplier_id, minute, completed, failed)
            SELECT sup, this_min, count(*) FILTER (WHERE became = 'completed'), count(*) FILTER (WHERE became = 'failed')
            FROM (
                SELECT max(sup) FILTER (WHERE d = 1) AS sup,
                    CASE
                        WHEN bool_or(d = 1 AND state = 'completed') AND NOT bool_or(d = -1 AND state = 'completed')
                            THEN 'completed'
                        WHEN min(err) FILTER (WHERE d = 1) IS DISTINCT FROM min(err) FILTER (WHERE d = -1)
                            AND bool_or(d = 1 AND state = 'failed') THEN 'failed'
                    END AS became
                FROM (
                    SELECT id, supplier_id AS sup, progress_state(status, last_error) AS state,
                        CASE WHEN progress_state(status, last_error) = 'failed' THEN last_error::text END AS err, -1 AS d
                    FROM old_rows
                    UNION ALL
                    SELECT id, supplier_id, progress_state(status, last_error),
                        CASE WHEN progress_state(status, last_error) = 'failed' THEN last_error::text END, 1
                    FROM new_rows
                ) AS r
                GROUP BY id
            ) AS p
            WHERE became IS NOT NULL
            GROUP BY sup;
        END IF;
    END IF;
    RETURN NULL;
END
$function$
;

CREATE OR REPLACE FUNCTION public.staging_refusal_state(err jsonb)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT CASE WHEN err ->> 'code' = 'import_supplier_migration_not_ongoing' THEN 'refused_not_ongoing' ELSE 'refused' END
$function$
;

CREATE OR REPLACE FUNCTION public.staging_refusals_clear()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    DELETE FROM staging_refusals
    WHERE supplier_id = NEW.supplier_id AND external_account_number = NEW.external_account_number;
    RETURN NULL;
END
$function$
;

CREATE OR REPLACE FUNCTION public.staging_refusals_minute()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF staging_refusal_state(NEW.error) = 'refused' THEN
        INSERT INTO progress_minutes (supplier_id, minute, refused)
        VALUES (NEW.supplier_id, date_trunc('minute', NEW.refused_at), 1);
    END IF;
    RETURN NULL;
END
$function$
;

CREATE OR REPLACE FUNCTION public.staging_refusals_skipped()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    DELETE FROM staging_refusals
    WHERE supplier_id = NEW.supplier_id AND external_account_number = NEW.external_account_number;
    RETURN NULL;
END
$function$
;

CREATE OR REPLACE FUNCTION public.staging_refusals_track()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO progress_counts (supplier_id, state, n) VALUES (OLD.supplier_id, staging_refusal_state(OLD.error), -1);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO progress_counts (supplier_id, state, n) VALUES (NEW.supplier_id, staging_refusal_state(NEW.error), 1);
    END IF;
    INSERT INTO progress_errors (supplier_id, code, attr, n)
    SELECT sup, code, attr, sum(d)
    FROM (
        SELECT OLD.supplier_id AS sup, e.code, e.attr, -1 AS d
        FROM progress_error_pairs(OLD.error) e WHERE TG_OP <> 'INSERT'
        UNION ALL
        SELECT NEW.supplier_id, e.code, e.attr, 1
        FROM progress_error_pairs(NEW.error) e WHERE TG_OP <> 'DELETE'
    ) AS c
    GROUP BY 1, 2, 3
    HAVING sum(d) <> 0;
    RETURN NULL;
END
$function$
;

-- Triggers, by table and name.

CREATE TRIGGER progress_track_delete AFTER DELETE ON import_processes REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION progress_track_statement();
CREATE TRIGGER progress_track_insert AFTER INSERT ON import_processes REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION progress_track_statement();
CREATE TRIGGER progress_track_update AFTER UPDATE ON import_processes REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION progress_track_statement();
CREATE TRIGGER staging_refusals_clear AFTER UPDATE OF service_account_number ON import_processes FOR EACH ROW WHEN (old.service_account_number IS NULL AND new.service_account_number IS NOT NULL) EXECUTE FUNCTION staging_refusals_clear();
CREATE TRIGGER import_suppliers_document_root BEFORE INSERT OR UPDATE OF document_root, code ON import_suppliers FOR EACH ROW EXECUTE FUNCTION import_suppliers_document_root();
CREATE TRIGGER staging_refusals_skipped AFTER INSERT ON skipped_accounts FOR EACH ROW EXECUTE FUNCTION staging_refusals_skipped();
CREATE TRIGGER staging_refusals_minute AFTER INSERT OR UPDATE OF refused_at ON staging_refusals FOR EACH ROW EXECUTE FUNCTION staging_refusals_minute();
CREATE TRIGGER staging_refusals_track AFTER INSERT OR DELETE ON staging_refusals FOR EACH ROW EXECUTE FUNCTION staging_refusals_track();
CREATE TRIGGER staging_refusals_track_update AFTER UPDATE ON staging_refusals FOR EACH ROW WHEN (old.error IS DISTINCT FROM new.error OR old.supplier_id IS DISTINCT FROM new.supplier_id) EXECUTE FUNCTION staging_refusals_track();
