-- +goose Up
-- Redefines progress_rebuild (00019); today's bodies of every function are
-- in db/functions.sql.
--
-- Accounts refused at staging, for the migration progress page. An E3 or
-- E4 refusal never becomes an import process, so the page counted none of
-- them: a cohort whose run reported 40 refused accounts showed "Failed 0".
-- staging_refusals keeps the latest refusal of each (supplier, external
-- account number) that E3 (step 'validate') or E4 (step 'stage') refused,
-- one row per account however often it is refused (jobs/imports writes it
-- with an upsert, and only on a refusal). A staging that succeeds deletes
-- the account's row in the staging statement itself, and the trigger
-- staging_refusals_clear below deletes it when the account is created, so
-- a row means: the latest attempt to bring this account in was refused.
CREATE TABLE staging_refusals (
    id                      bigserial PRIMARY KEY,
    supplier_id             bigint NOT NULL REFERENCES import_suppliers (id) ON DELETE CASCADE,
    external_account_number text NOT NULL,
    step                    text NOT NULL CHECK (step IN ('validate', 'stage')),
    -- The refusal's section 7 body (problem.Record), as last_error holds
    -- a failed creation's.
    error                   jsonb NOT NULL,
    refused_at              timestamptz NOT NULL DEFAULT now(),
    UNIQUE (supplier_id, external_account_number)
);

-- The page's failed accounts table lists refusals beside failed processes:
-- newest first, and filtered by code, as the two partial indexes of 00015
-- serve the processes.
CREATE INDEX staging_refusals_newest ON staging_refusals (supplier_id, refused_at DESC, id DESC);
CREATE INDEX staging_refusals_errors ON staging_refusals USING gin (error jsonb_path_ops);

-- The refused accounts are counted like the processes' states, as the
-- state 'refused' of progress_counts, and their errors in progress_errors,
-- so that the page's count and top errors stay sums over a few counter
-- rows at any size. 'refused' is not a state of a process: an account may
-- have a staged process (from an earlier staging) and a later refusal, so
-- the page shows it beside the total, not in it.
ALTER TABLE progress_counts DROP CONSTRAINT progress_counts_state_check,
    ADD CONSTRAINT progress_counts_state_check
    CHECK (state IN ('staged', 'in_progress', 'completed', 'failed', 'refused'));

-- staging_refusals_track appends the counter deltas of one refusal row, as
-- progress_track_statement (00019) does for processes. It runs per row,
-- not per statement: a statement-level trigger would run for every staging,
-- whose statement deletes the account's refusal (usually none), while a
-- row trigger runs only when a row really changes. The deltas are inserts,
-- so a bulk change costs a few inserts per row and never waits on another
-- transaction's counter rows.
-- +goose StatementBegin
CREATE FUNCTION staging_refusals_track() RETURNS trigger
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

CREATE TRIGGER staging_refusals_track AFTER INSERT OR DELETE ON staging_refusals
    FOR EACH ROW EXECUTE FUNCTION staging_refusals_track();
-- A refusal again with the same error (a client retrying) moves no counter.
CREATE TRIGGER staging_refusals_track_update AFTER UPDATE ON staging_refusals
    FOR EACH ROW
    WHEN (OLD.error IS DISTINCT FROM NEW.error OR OLD.supplier_id IS DISTINCT FROM NEW.supplier_id)
    EXECUTE FUNCTION staging_refusals_track();

-- staging_refusals_clear deletes the refusal of an account when it is
-- created. Staging deletes it too, so a refusal is left at creation only
-- when the account was staged, then refused on staging again, and then
-- created from the data staged first: the account exists, and its refusal
-- no longer keeps it out. It runs only for the row that gets its service
-- account number (the WHEN below), so E5's other status changes do not
-- call it.
-- +goose StatementBegin
CREATE FUNCTION staging_refusals_clear() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM staging_refusals
    WHERE supplier_id = NEW.supplier_id AND external_account_number = NEW.external_account_number;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER staging_refusals_clear AFTER UPDATE OF service_account_number ON import_processes
    FOR EACH ROW
    WHEN (OLD.service_account_number IS NULL AND NEW.service_account_number IS NOT NULL)
    EXECUTE FUNCTION staging_refusals_clear();

-- progress_rebuild recounts every counter, as in 00019, and the refused
-- accounts with them.
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

-- +goose Down
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
DROP TRIGGER staging_refusals_clear ON import_processes;
DROP FUNCTION staging_refusals_clear();
-- The refused accounts' error deltas go with their table; the counts of
-- the state 'refused' must go before the constraint returns.
LOCK TABLE staging_refusals IN SHARE ROW EXCLUSIVE MODE;
DELETE FROM staging_refusals;
DELETE FROM progress_counts WHERE state = 'refused';
DROP TABLE staging_refusals;
DROP FUNCTION staging_refusals_track();
ALTER TABLE progress_counts DROP CONSTRAINT progress_counts_state_check,
    ADD CONSTRAINT progress_counts_state_check
    CHECK (state IN ('staged', 'in_progress', 'completed', 'failed'));
