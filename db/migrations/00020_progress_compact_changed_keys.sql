-- +goose Up
-- Redefines progress_compact (00019); today's bodies of every function are
-- in db/functions.sql.
-- progress_compact (00019) folded every key's rows, so each call deleted
-- and rewrote every counter row, the whole per-minute history of every
-- supplier included, though only keys with new deltas have more than one
-- row. It runs every 5 s on every worker and before each page read; over
-- a migration of months that history is hundreds of thousands of rows.
-- Now it folds only the keys that have more than one row. A lone row is
-- never zero (the triggers insert non-zero deltas, and folding drops zero
-- sums), so the counters read the same.
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

-- +goose Down
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
    WITH d AS (DELETE FROM progress_counts RETURNING supplier_id, state, n),
    f AS (INSERT INTO progress_counts (supplier_id, state, n)
          SELECT supplier_id, state, sum(n) FROM d GROUP BY 1, 2 HAVING sum(n) <> 0)
    SELECT count(*) INTO rows_ FROM d;
    folded := folded + rows_;
    WITH d AS (DELETE FROM progress_errors RETURNING supplier_id, code, attr, n),
    f AS (INSERT INTO progress_errors (supplier_id, code, attr, n)
          SELECT supplier_id, code, attr, sum(n) FROM d GROUP BY 1, 2, 3 HAVING sum(n) <> 0)
    SELECT count(*) INTO rows_ FROM d;
    folded := folded + rows_;
    WITH d AS (DELETE FROM progress_minutes RETURNING supplier_id, minute, completed, failed),
    f AS (INSERT INTO progress_minutes (supplier_id, minute, completed, failed)
          SELECT supplier_id, minute, sum(completed), sum(failed) FROM d GROUP BY 1, 2
          HAVING sum(completed) <> 0 OR sum(failed) <> 0)
    SELECT count(*) INTO rows_ FROM d;
    RETURN folded + rows_;
END
$$;
-- +goose StatementEnd
