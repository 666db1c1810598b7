-- +goose Up
-- Redefines progress_rebuild (00015) and replaces the progress triggers of
-- 00015; today's bodies of every function are in db/functions.sql.
-- The progress counters of 00015 without hot rows, and with triggers per
-- statement, so that concurrent account creations never wait on each
-- other's counter rows.
--
-- Before: every status change updated a counter row (one per supplier,
-- state and slot = pg_backend_pid() % 16) and the row of the current
-- minute, and held their row locks until commit. Two creations whose
-- backends shared a slot queued on each other's commit, and every creation
-- wrote to the same few buffers of the same three tables.
--
-- Now the counter tables are insert-only logs of deltas: a statement that
-- changes processes appends, per table, one row per (supplier, state),
-- (supplier, minute) or (supplier, code, attr) it changed, in its own
-- transaction. Inserts take no lock that another inserter waits for, so a
-- rollback still leaves the counts unchanged and nothing waits on another
-- transaction's commit. Readers sum the rows, as they summed the slots.
-- progress_compact() folds the committed deltas into one row per key; the
-- worker's sweep and the progress page call it, so the logs stay short.
--
-- The triggers run once per statement over its transition tables: a bulk
-- change of N processes costs one aggregate over N rows (the per-row
-- triggers updated the same counter row N times in one transaction, and
-- each update walked the row versions of the ones before).

-- The per-row function progress_track stays for the Down migration.
DROP TRIGGER progress_track_update ON import_processes;
DROP TRIGGER progress_track_insert_delete ON import_processes;

-- No process changes between the fold below and the new triggers.
LOCK TABLE import_processes IN SHARE ROW EXCLUSIVE MODE;

ALTER TABLE progress_counts DROP CONSTRAINT progress_counts_pkey, DROP COLUMN slot;
ALTER TABLE progress_minutes DROP CONSTRAINT progress_minutes_pkey, DROP COLUMN slot;
ALTER TABLE progress_errors DROP CONSTRAINT progress_errors_pkey, DROP COLUMN slot;
CREATE INDEX progress_counts_supplier ON progress_counts (supplier_id);
CREATE INDEX progress_minutes_supplier ON progress_minutes (supplier_id, minute);
CREATE INDEX progress_errors_supplier ON progress_errors (supplier_id);

-- progress_track_statement keeps the counters for one statement on
-- import_processes. PL/pgSQL names a transition table only in the trigger
-- that declares it, so each event has its own queries.
-- +goose StatementBegin
CREATE FUNCTION progress_track_statement() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    this_min timestamptz := date_trunc('minute', now());
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO progress_counts (supplier_id, state, n)
        SELECT supplier_id, progress_state(status, last_error), count(*)
        FROM new_rows GROUP BY 1, 2;
        INSERT INTO progress_errors (supplier_id, code, attr, n)
        SELECT r.supplier_id, e.code, e.attr, count(*)
        FROM new_rows r, progress_error_pairs(r.last_error) e
        WHERE progress_state(r.status, r.last_error) = 'failed'
        GROUP BY 1, 2, 3;
        INSERT INTO progress_minutes (supplier_id, minute, completed, failed)
        SELECT supplier_id, this_min, count(*) FILTER (WHERE s = 'completed'), count(*) FILTER (WHERE s = 'failed')
        FROM (SELECT supplier_id, progress_state(status, last_error) AS s FROM new_rows) AS r
        WHERE s IN ('completed', 'failed')
        GROUP BY 1;
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
        INSERT INTO progress_counts (supplier_id, state, n)
        SELECT sup, state, sum(d)
        FROM (
            SELECT supplier_id AS sup, progress_state(status, last_error) AS state, -1 AS d FROM old_rows
            UNION ALL
            SELECT supplier_id, progress_state(status, last_error), 1 FROM new_rows
        ) AS c
        GROUP BY 1, 2
        HAVING sum(d) <> 0;
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
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- progress_compact folds the committed deltas into one row per key and
-- drops keys that sum to zero. Deltas of transactions still open are not
-- visible to it and stay as they are; a second compaction at the same time
-- returns at once. It returns how many rows it folded.
-- +goose StatementBegin
CREATE FUNCTION progress_compact() RETURNS bigint
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

-- progress_rebuild recounts every counter from import_processes, as in
-- 00015, into one row per key. With the triggers per statement a bulk
-- change keeps the counters itself; run this after changes made with the
-- triggers disabled.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION progress_rebuild() RETURNS void
LANGUAGE sql AS $$
    DELETE FROM progress_counts;
    DELETE FROM progress_errors;
    DELETE FROM progress_minutes;

    INSERT INTO progress_counts (supplier_id, state, n)
    SELECT supplier_id, progress_state(status, last_error), count(*)
    FROM import_processes GROUP BY 1, 2;

    INSERT INTO progress_errors (supplier_id, code, attr, n)
    SELECT p.supplier_id, e.code, e.attr, count(*)
    FROM import_processes p, progress_error_pairs(p.last_error) e
    WHERE progress_state(p.status, p.last_error) = 'failed'
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

SELECT progress_compact();

CREATE TRIGGER progress_track_insert AFTER INSERT ON import_processes
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION progress_track_statement();
CREATE TRIGGER progress_track_update AFTER UPDATE ON import_processes
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION progress_track_statement();
CREATE TRIGGER progress_track_delete AFTER DELETE ON import_processes
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION progress_track_statement();

-- +goose Down
DROP TRIGGER progress_track_delete ON import_processes;
DROP TRIGGER progress_track_update ON import_processes;
DROP TRIGGER progress_track_insert ON import_processes;
LOCK TABLE import_processes IN SHARE ROW EXCLUSIVE MODE;
SELECT progress_compact();
DROP FUNCTION progress_compact();
DROP FUNCTION progress_track_statement();
DROP INDEX progress_counts_supplier, progress_minutes_supplier, progress_errors_supplier;
ALTER TABLE progress_counts ADD COLUMN slot smallint NOT NULL DEFAULT 0;
ALTER TABLE progress_minutes ADD COLUMN slot smallint NOT NULL DEFAULT 0;
ALTER TABLE progress_errors ADD COLUMN slot smallint NOT NULL DEFAULT 0;
ALTER TABLE progress_counts ALTER COLUMN slot DROP DEFAULT;
ALTER TABLE progress_minutes ALTER COLUMN slot DROP DEFAULT;
ALTER TABLE progress_errors ALTER COLUMN slot DROP DEFAULT;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION progress_rebuild() RETURNS void
LANGUAGE sql AS $$
    DELETE FROM progress_counts;
    DELETE FROM progress_errors;
    DELETE FROM progress_minutes;

    INSERT INTO progress_counts (supplier_id, state, slot, n)
    SELECT supplier_id, progress_state(status, last_error), 0, count(*)
    FROM import_processes GROUP BY 1, 2;

    INSERT INTO progress_errors (supplier_id, code, attr, slot, n)
    SELECT p.supplier_id, e.code, e.attr, 0, count(*)
    FROM import_processes p, progress_error_pairs(p.last_error) e
    WHERE progress_state(p.status, p.last_error) = 'failed'
    GROUP BY 1, 2, 3;

    INSERT INTO progress_minutes (supplier_id, minute, slot, completed, failed)
    SELECT supplier_id, minute, 0, sum(completed), sum(failed)
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
ALTER TABLE progress_counts ADD PRIMARY KEY (supplier_id, state, slot);
ALTER TABLE progress_minutes ADD PRIMARY KEY (supplier_id, minute, slot);
ALTER TABLE progress_errors ADD PRIMARY KEY (supplier_id, code, attr, slot);
CREATE TRIGGER progress_track_insert_delete AFTER INSERT OR DELETE ON import_processes
    FOR EACH ROW EXECUTE FUNCTION progress_track();
CREATE TRIGGER progress_track_update AFTER UPDATE ON import_processes
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.last_error IS DISTINCT FROM NEW.last_error
          OR OLD.supplier_id IS DISTINCT FROM NEW.supplier_id)
    EXECUTE FUNCTION progress_track();
