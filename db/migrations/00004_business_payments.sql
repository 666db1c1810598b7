-- +goose Up
-- Businesses (E1): 00001 created businesses and business_contracts, because
-- staged accounts reference contracts by identifier. This adds what E1 also
-- stores: the business type's closed set, the details, and each contract's
-- versions with their terms.
ALTER TABLE businesses
    ADD CONSTRAINT businesses_business_type_check
        CHECK (business_type IN ('LTD', 'PLC', 'LLP', 'SOLE_TRADER', 'PARTNERSHIP', 'CHARITY'));

CREATE TABLE business_details (
    business_id bigint NOT NULL REFERENCES businesses (id) ON DELETE CASCADE,
    position    int NOT NULL,
    key         text NOT NULL,
    value       text NOT NULL,
    PRIMARY KEY (business_id, position),
    UNIQUE (business_id, key)
);

CREATE INDEX business_contracts_business ON business_contracts (business_id);

-- terms is kept as the caller sent it: the spec does not show the shape of a
-- term, so the service stores the array and gives it no meaning.
CREATE TABLE business_contract_versions (
    id                 bigserial PRIMARY KEY,
    contract_id        bigint NOT NULL REFERENCES business_contracts (id) ON DELETE CASCADE,
    position           int NOT NULL,
    applicable_at_date date NOT NULL,
    terms              jsonb NOT NULL CHECK (jsonb_typeof(terms) = 'array'),
    UNIQUE (contract_id, position),
    UNIQUE (contract_id, applicable_at_date)
);

-- Payment vendors (E2 and E9 check a reference with them), configured by the operator with
-- `importctl vendor add`. adapter names the code that speaks to the vendor;
-- 'http' is the protocol of jobs/payment/PROTOCOL.md. The retry policy lives
-- with the vendor because vendors differ in how they fail.
CREATE TABLE payment_vendors (
    id         bigserial PRIMARY KEY,
    name       text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    adapter    text NOT NULL DEFAULT 'http' CHECK (adapter <> ''),
    base_url   text NOT NULL CHECK (base_url ~ '^https?://'),
    timeout_ms integer NOT NULL CHECK (timeout_ms BETWEEN 1 AND 300000),
    attempts   integer NOT NULL DEFAULT 3 CHECK (attempts BETWEEN 1 AND 10),
    backoff_ms integer NOT NULL DEFAULT 200 CHECK (backoff_ms BETWEEN 0 AND 60000),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Verified payment instructions (E9 for an account, E2 for a business). Each
-- row belongs to exactly one of the two. The unique indexes are what makes a
-- duplicate request, or a verification task that runs twice, store the
-- instruction once.
CREATE TABLE payment_instructions (
    id             bigserial PRIMARY KEY,
    supplier_id    bigint NOT NULL REFERENCES import_suppliers (id),
    account_id     bigint REFERENCES accounts (id) ON DELETE CASCADE,
    business_id    bigint REFERENCES businesses (id) ON DELETE CASCADE,
    vendor_id      bigint NOT NULL REFERENCES payment_vendors (id),
    reference      text NOT NULL CHECK (reference <> ''),
    type           text NOT NULL CHECK (type IN ('CARD', 'DIRECT_DEBIT')),
    -- What the vendor answered: its status, and every other field of its
    -- answer (reference, type and status removed) as a JSON object.
    vendor_status  text NOT NULL,
    vendor_details jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(vendor_details) = 'object'),
    verified_at    timestamptz NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((account_id IS NULL) <> (business_id IS NULL))
);
CREATE UNIQUE INDEX payment_instructions_account_reference ON payment_instructions (account_id, reference)
    WHERE account_id IS NOT NULL;
CREATE UNIQUE INDEX payment_instructions_business_reference ON payment_instructions (business_id, reference)
    WHERE business_id IS NOT NULL;

-- The accounts a business's instruction was imported for (E2 accounts[]).
CREATE TABLE payment_instruction_accounts (
    instruction_id bigint NOT NULL REFERENCES payment_instructions (id) ON DELETE CASCADE,
    account_id     bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    position       int NOT NULL,
    PRIMARY KEY (instruction_id, account_id),
    UNIQUE (instruction_id, position)
);

-- +goose Down
DROP TABLE payment_instruction_accounts, payment_instructions, payment_vendors,
    business_contract_versions, business_details;
DROP INDEX business_contracts_business;
ALTER TABLE businesses DROP CONSTRAINT businesses_business_type_check;
