-- +goose Up
-- Concurrent identical E2 or E9 requests share one verification task
-- (jobs.PaymentInstructionTaskID), and the task stores one row: the row
-- alone cannot say which request it answers. The request that claims the
-- stored row sets answered_at with a conditional UPDATE (jobs/payment,
-- Service.claim); PostgreSQL lets exactly one claim succeed, so exactly one
-- request answers 201 and the others hear the duplicate 400. NULL: stored,
-- and no request has answered 201 for it yet (its caller stopped waiting).
ALTER TABLE payment_instructions ADD COLUMN answered_at timestamptz;
-- Every instruction stored before this migration was answered already.
UPDATE payment_instructions SET answered_at = created_at;

-- type is an open code: the spec shows CARD "in use", an example, not the
-- whole set. The closed set of 00004 becomes the form validate.OpenCode
-- accepts, which both of its values have.
ALTER TABLE payment_instructions DROP CONSTRAINT payment_instructions_type_check,
    ADD CONSTRAINT payment_instructions_type_check CHECK (type ~ '^[A-Z][A-Z0-9_]{0,63}$');

-- +goose Down
-- NOT VALID: instructions of other types stored meanwhile stay; new ones are
-- refused again.
ALTER TABLE payment_instructions DROP CONSTRAINT payment_instructions_type_check,
    ADD CONSTRAINT payment_instructions_type_check CHECK (type IN ('CARD', 'DIRECT_DEBIT')) NOT VALID;
ALTER TABLE payment_instructions DROP COLUMN answered_at;
