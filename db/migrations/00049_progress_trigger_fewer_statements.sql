-- +goose Up
-- Redefines progress_track_statement (00019; today's bodies of every function
-- are in db/functions.sql) to run fewer statements. Each statement a trigger
-- runs costs executor start-up and a scan of the transition tables, which
-- was most of the price of E4's staging and of E5's IN_PROGRESS mark: the
-- old body ran three inserts for every statement, even for the empty UPDATE
-- transition tables of an INSERT ... ON CONFLICT that inserted. Now one
-- statement inserts the counts' deltas and says whether any row is or was
-- failed and whether any row ended; the inserts into progress_errors and
-- progress_minutes run only then. The deltas it writes are the same.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION progress_track_statement() RETURNS trigger
LANGUAGE plpgsql AS $$
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
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION progress_track_statement() RETURNS trigger
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
