-- +goose Up
-- Counters behind the migration progress page (/migration/), so
-- that the page answers in constant time however many accounts a supplier
-- has. Triggers on import_processes keep them, in the same transaction as
-- the status change they count: a change that rolls back leaves its counts
-- unchanged, and no code path can change a status without counting it.
--
-- The state of an import process (jobs/progress):
--   staged       UNKNOWN, no error recorded: staged, not yet processed
--   in_progress  IN_PROGRESS
--   completed    COMPLETED (its account exists)
--   failed       UNKNOWN with last_error: its last processing failed
--
-- Each counter is split into slots, one per backend (pg_backend_pid() % 16):
-- concurrent workers mostly update different rows instead of queueing on one
-- row lock until commit. A reader sums the slots. Within one trigger call
-- rows are locked in key order, so two single-row changes cannot deadlock.
-- Triggers per row suit the service, which changes one process per
-- statement; see progress_rebuild for bulk changes.

CREATE TABLE progress_counts (
    supplier_id bigint NOT NULL REFERENCES import_suppliers (id) ON DELETE CASCADE,
    state       text NOT NULL CHECK (state IN ('staged', 'in_progress', 'completed', 'failed')),
    slot        smallint NOT NULL,
    n           bigint NOT NULL,
    PRIMARY KEY (supplier_id, state, slot)
);

-- Accounts completed and failed per minute: a completion counts when a
-- process becomes completed, a failure each time a process records a new
-- failure (a retried account that fails again counts again).
CREATE TABLE progress_minutes (
    supplier_id bigint NOT NULL REFERENCES import_suppliers (id) ON DELETE CASCADE,
    minute      timestamptz NOT NULL,
    slot        smallint NOT NULL,
    completed   bigint NOT NULL DEFAULT 0,
    failed      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (supplier_id, minute, slot)
);

-- Failed accounts per (code, attr) of their last error: the field errors'
-- codes and attrs, or the top-level code with attr '' for an error without
-- field errors. An account counts once per pair.
CREATE TABLE progress_errors (
    supplier_id bigint NOT NULL REFERENCES import_suppliers (id) ON DELETE CASCADE,
    code        text NOT NULL,
    attr        text NOT NULL,
    slot        smallint NOT NULL,
    n           bigint NOT NULL,
    PRIMARY KEY (supplier_id, code, attr, slot)
);

-- +goose StatementBegin
CREATE FUNCTION progress_state(status text, last_error jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN status = 'COMPLETED' THEN 'completed'
        WHEN status = 'IN_PROGRESS' THEN 'in_progress'
        WHEN last_error IS NOT NULL THEN 'failed'
        ELSE 'staged'
    END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION progress_error_pairs(last_error jsonb) RETURNS TABLE (code text, attr text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT DISTINCT coalesce(e ->> 'code', ''), coalesce(e ->> 'attr', '')
    FROM jsonb_array_elements(CASE
        WHEN jsonb_typeof(last_error -> 'errors') = 'array' AND jsonb_array_length(last_error -> 'errors') > 0
            THEN last_error -> 'errors'
        ELSE jsonb_build_array(jsonb_build_object('code', last_error ->> 'code'))
    END) AS e
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION progress_track() RETURNS trigger
LANGUAGE plpgsql AS $$
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
$$;
-- +goose StatementEnd

-- progress_rebuild recounts every counter from import_processes. The
-- migration fills the counters with it; after maintenance that changes many
-- processes in one statement, run it with the triggers disabled (a counter
-- row updated once per row in one transaction grows a chain of row versions
-- that each later update walks, so such a statement slows down with the
-- square of its rows; the service changes one process per statement):
--   BEGIN; LOCK TABLE import_processes IN SHARE ROW EXCLUSIVE MODE;
--   ALTER TABLE import_processes DISABLE TRIGGER USER; ...changes...;
--   ALTER TABLE import_processes ENABLE TRIGGER USER; SELECT progress_rebuild(); COMMIT;
-- The per-minute series is rebuilt from account_created_at and, for failed
-- processes, updated_at: earlier failures of an account are not recounted.
-- +goose StatementBegin
CREATE FUNCTION progress_rebuild() RETURNS void
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

-- Counted from here on: no process changes between the count and the
-- triggers' creation.
LOCK TABLE import_processes IN SHARE ROW EXCLUSIVE MODE;

CREATE TRIGGER progress_track_insert_delete AFTER INSERT OR DELETE ON import_processes
    FOR EACH ROW EXECUTE FUNCTION progress_track();
-- Staging again changes only the payload: no counter moves, and the trigger
-- does not run.
CREATE TRIGGER progress_track_update AFTER UPDATE ON import_processes
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.last_error IS DISTINCT FROM NEW.last_error
          OR OLD.supplier_id IS DISTINCT FROM NEW.supplier_id)
    EXECUTE FUNCTION progress_track();

SELECT progress_rebuild();

-- The failed accounts table: newest failure first, and the filter by code,
-- over failed processes only.
CREATE INDEX import_processes_failed ON import_processes (supplier_id, updated_at DESC, id DESC)
    WHERE status = 'UNKNOWN' AND last_error IS NOT NULL;
CREATE INDEX import_processes_failed_errors ON import_processes USING gin (last_error jsonb_path_ops)
    WHERE status = 'UNKNOWN' AND last_error IS NOT NULL;

-- +goose Down
DROP INDEX import_processes_failed_errors;
DROP INDEX import_processes_failed;
DROP TRIGGER progress_track_update ON import_processes;
DROP TRIGGER progress_track_insert_delete ON import_processes;
DROP FUNCTION progress_track();
DROP FUNCTION progress_rebuild();
DROP FUNCTION progress_error_pairs(jsonb);
DROP FUNCTION progress_state(text, jsonb);
DROP TABLE progress_errors, progress_minutes, progress_counts;
