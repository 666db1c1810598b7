-- +goose NO TRANSACTION
-- +goose Up
-- task_id names the Asynq task that currently owns an IN_PROGRESS account:
-- the account's own task, or the task an E5 queued to take over from a task
-- whose worker died (jobs/process/takeover.go). The sweeps record a failure
-- only for the task the row names, so a sweep never overwrites the work of
-- a newer task (worker/sweep.go). NULL on rows marked before this column.
ALTER TABLE import_processes ADD COLUMN IF NOT EXISTS task_id text;

-- The sweep of IN_PROGRESS rows whose task is lost reads only those rows.
-- Built concurrently: the table holds every staged account.
CREATE INDEX CONCURRENTLY IF NOT EXISTS import_processes_in_progress
    ON import_processes (id) WHERE status = 'IN_PROGRESS';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS import_processes_in_progress;
ALTER TABLE import_processes DROP COLUMN IF EXISTS task_id;
