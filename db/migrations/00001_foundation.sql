-- +goose Up
CREATE TABLE import_suppliers (
    id               bigserial PRIMARY KEY,
    code             text NOT NULL UNIQUE CHECK (code ~ '^[A-Z0-9_]+$'),
    status           text NOT NULL DEFAULT 'Ongoing' CHECK (status IN ('Ongoing', 'Paused', 'Complete')),
    document_root    text NOT NULL DEFAULT '',
    country          text NOT NULL DEFAULT 'GB' CHECK (country ~ '^[A-Z]{2}$'),
    migration_emails boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE operations_teams (
    id         bigserial PRIMARY KEY,
    name       text NOT NULL UNIQUE CHECK (name <> ''),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE products (
    id         bigserial PRIMARY KEY,
    code       text NOT NULL UNIQUE CHECK (code <> ''),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tariffs (
    id         bigserial PRIMARY KEY,
    product_id bigint NOT NULL REFERENCES products (id) ON DELETE CASCADE,
    code       text NOT NULL UNIQUE CHECK (code <> '')
);

-- API keys: only a SHA-256 of the secret is kept. The prefix is the first
-- characters of the key, stored in clear so that a key can be found without a
-- scan and named in listings without revealing it.
CREATE TABLE api_keys (
    id           bigserial PRIMARY KEY,
    name         text NOT NULL UNIQUE CHECK (name <> ''),
    organisation text NOT NULL,
    prefix       text NOT NULL UNIQUE,
    secret_hash  bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);

-- An empty list of suppliers for a key means "all suppliers".
CREATE TABLE api_key_suppliers (
    api_key_id  bigint NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    supplier_id bigint NOT NULL REFERENCES import_suppliers (id) ON DELETE CASCADE,
    PRIMARY KEY (api_key_id, supplier_id)
);

-- Businesses and their contracts (E1). Staged accounts reference contracts by
-- identifier, so the contract table exists from the start.
CREATE TABLE businesses (
    id                           bigserial PRIMARY KEY,
    supplier_id                  bigint NOT NULL REFERENCES import_suppliers (id),
    external_business_identifier text NOT NULL,
    business_type                text NOT NULL,
    company_number               text NOT NULL,
    company_name                 text NOT NULL,
    created_at                   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (supplier_id, external_business_identifier, company_name, company_number, business_type)
);

CREATE TABLE business_contracts (
    id              bigserial PRIMARY KEY,
    business_id     bigint NOT NULL REFERENCES businesses (id) ON DELETE CASCADE,
    supplier_id     bigint NOT NULL REFERENCES import_suppliers (id),
    identifier      text NOT NULL,
    valid_from_date date,
    signed_at_date  date,
    UNIQUE (supplier_id, identifier)
);

-- Accounts marked by an operator to be left out of the migration. A mark may
-- exist before anything is staged.
CREATE TABLE skipped_accounts (
    supplier_id             bigint NOT NULL REFERENCES import_suppliers (id),
    external_account_number text NOT NULL,
    created_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (supplier_id, external_account_number)
);

-- One row per (supplier, external account number): the staged payload and the
-- outcome of processing it. PostgreSQL, not Redis, is the record of outcomes.
CREATE TABLE import_processes (
    id                      bigserial PRIMARY KEY,
    supplier_id             bigint NOT NULL REFERENCES import_suppliers (id),
    external_account_number text NOT NULL CHECK (external_account_number <> ''),
    payload                 jsonb NOT NULL,
    status                  text NOT NULL DEFAULT 'UNKNOWN' CHECK (status IN ('UNKNOWN', 'IN_PROGRESS', 'COMPLETED')),
    service_account_number  text,
    account_created_at      timestamptz,
    last_error              jsonb,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    UNIQUE (supplier_id, external_account_number)
);

-- +goose Down
DROP TABLE import_processes;
DROP TABLE skipped_accounts;
DROP TABLE business_contracts;
DROP TABLE businesses;
DROP TABLE api_key_suppliers;
DROP TABLE api_keys;
DROP TABLE tariffs;
DROP TABLE products;
DROP TABLE operations_teams;
DROP TABLE import_suppliers;
