-- +goose Up
-- Redefines progress_compact (00020), progress_rebuild and
-- staging_refusals_track (00043); today's bodies of every function are in
-- db/functions.sql.
--
-- Three changes to how the migration progress page counts the accounts
-- refused at staging (staging_refusals, 00043); docs/decisions.md argues
-- each.
--
-- 1. Refusals per minute. The page's chart plotted completions and
--    failures only, so a run whose invalid lines were refused at E3 or E4
--    drew nothing beside a red "Refused at staging: 400". progress_minutes
--    gets a column refused: the refusals recorded in the minute, each
--    refusal of an account counting again (a run sent again is refused
--    again, and the chart shows that run's refusals too).
--
-- 2. Refusals while the supplier is not Ongoing. E4 refuses every account
--    of a paused supplier with import_supplier_migration_not_ongoing; the
--    refusal is the supplier's, not the account's data. Such a row is
--    counted as the state refused_not_ongoing, apart from refused, and is
--    not plotted as a refusal, so that pausing a supplier does not make
--    its accounts look invalid. The row is kept: the account is still out,
--    and staging it again once the supplier is Ongoing deletes the row.
--
-- 3. A skip mark deletes the account's refusal. A refusal row means "the
--    latest attempt to bring this account in was refused", and a skip mark
--    means the team decided to leave it out: the refusal no longer asks
--    for anything, and the page counts skip marks apart.

ALTER TABLE progress_minutes ADD COLUMN refused bigint NOT NULL DEFAULT 0;

ALTER TABLE progress_counts DROP CONSTRAINT progress_counts_state_check,
    ADD CONSTRAINT progress_counts_state_check
    CHECK (state IN ('staged', 'in_progress', 'completed', 'failed', 'refused', 'refused_not_ongoing'));

-- staging_refusal_state is the counted state of a refusal row with error
-- err: refused_not_ongoing for the refusal of a supplier that does not
-- accept accounts (jobs/imports.CodeSupplierNotOngoing), refused for any
-- other.
-- +goose StatementBegin
CREATE FUNCTION staging_refusal_state(err jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN err ->> 'code' = 'import_supplier_migration_not_ongoing' THEN 'refused_not_ongoing' ELSE 'refused' END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION staging_refusals_track() RETURNS trigger
LANGUAGE plpgsql AS $$
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
$$;
-- +goose StatementEnd

-- staging_refusals_minute counts a refusal in its minute: every insert of
-- a refusal row and every later refusal of the same account (jobs/imports
-- sets refused_at on each). The refusals of a supplier that is not Ongoing
-- are not plotted (2. above).
-- +goose StatementBegin
CREATE FUNCTION staging_refusals_minute() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF staging_refusal_state(NEW.error) = 'refused' THEN
        INSERT INTO progress_minutes (supplier_id, minute, refused)
        VALUES (NEW.supplier_id, date_trunc('minute', NEW.refused_at), 1);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER staging_refusals_minute AFTER INSERT OR UPDATE OF refused_at ON staging_refusals
    FOR EACH ROW EXECUTE FUNCTION staging_refusals_minute();

-- staging_refusals_skipped deletes the refusal of an account marked to be
-- skipped (3. above). Removing the mark does not bring the refusal back:
-- the next attempt to stage the account records whatever it gets.
-- +goose StatementBegin
CREATE FUNCTION staging_refusals_skipped() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM staging_refusals
    WHERE supplier_id = NEW.supplier_id AND external_account_number = NEW.external_account_number;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER staging_refusals_skipped AFTER INSERT ON skipped_accounts
    FOR EACH ROW EXECUTE FUNCTION staging_refusals_skipped();

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION progress_compact() RETURNS bigint
LANGUAGE plpgsql AS $$
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
$$;
-- +goose StatementEnd

-- progress_rebuild recounts every counter, as in 00043, with the states of
-- 2. above and the refusals per minute (each account's latest refusal: the
-- earlier ones are not kept).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION progress_rebuild() RETURNS void
LANGUAGE sql AS $$
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
$$;
-- +goose StatementEnd

-- The rows already stored: the refusals of skip-marked accounts go (their
-- triggers move the counters), and the counts and minutes of the others
-- are moved to what the triggers above would have counted.
DELETE FROM staging_refusals r USING skipped_accounts k
WHERE k.supplier_id = r.supplier_id AND k.external_account_number = r.external_account_number;
INSERT INTO progress_counts (supplier_id, state, n)
SELECT supplier_id, s.state, s.n * count(*)
FROM staging_refusals, (VALUES ('refused', -1), ('refused_not_ongoing', 1)) AS s (state, n)
WHERE staging_refusal_state(error) = 'refused_not_ongoing'
GROUP BY supplier_id, s.state, s.n;
INSERT INTO progress_minutes (supplier_id, minute, refused)
SELECT supplier_id, date_trunc('minute', refused_at), count(*)
FROM staging_refusals WHERE staging_refusal_state(error) = 'refused'
GROUP BY 1, 2;

-- +goose Down
-- The refusals of skip-marked accounts that were deleted are gone.
DROP TRIGGER staging_refusals_skipped ON skipped_accounts;
DROP FUNCTION staging_refusals_skipped();
DROP TRIGGER staging_refusals_minute ON staging_refusals;
DROP FUNCTION staging_refusals_minute();
INSERT INTO progress_counts (supplier_id, state, n)
SELECT supplier_id, state, -sum(n) FROM progress_counts WHERE state = 'refused_not_ongoing' GROUP BY 1, 2 HAVING sum(n) <> 0
UNION ALL
SELECT supplier_id, 'refused', sum(n) FROM progress_counts WHERE state = 'refused_not_ongoing' GROUP BY 1 HAVING sum(n) <> 0;
SELECT progress_compact();
DELETE FROM progress_counts WHERE state = 'refused_not_ongoing';
ALTER TABLE progress_counts DROP CONSTRAINT progress_counts_state_check,
    ADD CONSTRAINT progress_counts_state_check
    CHECK (state IN ('staged', 'in_progress', 'completed', 'failed', 'refused'));
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION staging_refusals_track() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO progress_counts (supplier_id, state, n) VALUES (OLD.supplier_id, 'refused', -1);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO progress_counts (supplier_id, state, n) VALUES (NEW.supplier_id, 'refused', 1);
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
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION progress_rebuild() RETURNS void
LANGUAGE sql AS $$
    DELETE FROM progress_counts;
    DELETE FROM progress_errors;
    DELETE FROM progress_minutes;

    INSERT INTO progress_counts (supplier_id, state, n)
    SELECT supplier_id, progress_state(status, last_error), count(*)
    FROM import_processes GROUP BY 1, 2
    UNION ALL
    SELECT supplier_id, 'refused', count(*)
    FROM staging_refusals GROUP BY 1;

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

    INSERT INTO progress_minutes (supplier_id, minute, completed, failed)
    SELECT supplier_id, minute, sum(completed), sum(failed)
    FROM (
        SELECT supplier_id, date_trunc('minute', account_created_at) AS minute, 1 AS completed, 0 AS failed
        FROM import_processes WHERE status = 'COMPLETED' AND account_created_at IS NOT NULL
        UNION ALL
        SELECT supplier_id, date_trunc('minute', updated_at), 0, 1
        FROM import_processes WHERE progress_state(status, last_error) = 'failed'
    ) AS e
    GROUP BY 1, 2;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION progress_compact() RETURNS bigint
LANGUAGE plpgsql AS $$
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
          RETURNING p.supplier_id, p.minute, p.completed, p.failed),
    f AS (INSERT INTO progress_minutes (supplier_id, minute, completed, failed)
          SELECT supplier_id, minute, sum(completed), sum(failed) FROM d GROUP BY 1, 2
          HAVING sum(completed) <> 0 OR sum(failed) <> 0)
    SELECT count(*) INTO rows_ FROM d;
    RETURN folded + rows_;
END
$$;
-- +goose StatementEnd
DROP FUNCTION staging_refusal_state(jsonb);
-- Rows that counted refusals only would be left as zeros.
DELETE FROM progress_minutes WHERE completed = 0 AND failed = 0;
ALTER TABLE progress_minutes DROP COLUMN refused;
