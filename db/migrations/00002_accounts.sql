-- +goose Up
-- The account model that E5 creates from a staged payload. Relational, with
-- foreign keys and unique constraints: the unique (supplier, external account
-- number) and (import_process_id) constraints are what make a redelivered or
-- duplicated creation task a no-op, whatever Redis did.
CREATE TABLE accounts (
    id                        bigserial PRIMARY KEY,
    service_account_number    text NOT NULL UNIQUE CHECK (service_account_number ~ '^A-[0-9A-F]{8}$'),
    supplier_id               bigint NOT NULL REFERENCES import_suppliers (id),
    external_account_number   text NOT NULL,
    import_process_id         bigint NOT NULL UNIQUE REFERENCES import_processes (id),
    operations_team_id        bigint NOT NULL REFERENCES operations_teams (id),
    business_contract_id      bigint REFERENCES business_contracts (id),
    unknown_occupier          boolean NOT NULL DEFAULT false,
    billing_street_address    text,
    billing_locality          text,
    billing_administrative_area text,
    billing_country           text NOT NULL,
    billing_postal_code       text,
    -- The latest last_billed_to_date of the account's supply points: where the
    -- open statement period starts when no historical statement exists.
    last_billed_to_date       date,
    created_at                timestamptz NOT NULL DEFAULT now(),
    UNIQUE (supplier_id, external_account_number)
);

-- The ledger starts at zero; the sign convention is documented with E7.
CREATE TABLE ledgers (
    account_id bigint PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    currency   text NOT NULL DEFAULT 'GBP',
    balance    numeric(14, 2) NOT NULL DEFAULT 0
);

CREATE TABLE customers (
    id                 bigserial PRIMARY KEY,
    account_id         bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    position           int NOT NULL,
    given_name         text,
    family_name        text,
    email              text,
    mobile             text,
    landline           text,
    date_of_birth      date,
    opted_into_updates boolean,
    opted_into_offers  boolean,
    opted_into_sms     boolean,
    UNIQUE (account_id, position)
);

CREATE TABLE customer_phone_numbers (
    customer_id  bigint NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    position     int NOT NULL,
    phone_number text NOT NULL,
    PRIMARY KEY (customer_id, position)
);

CREATE TABLE customer_user_details (
    customer_id bigint NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    position    int NOT NULL,
    key         text NOT NULL,
    value       text NOT NULL,
    PRIMARY KEY (customer_id, position)
);

CREATE TABLE supply_addresses (
    id                                   bigserial PRIMARY KEY,
    account_id                           bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    position                             int NOT NULL,
    supply_address1                      text NOT NULL,
    supply_address2                      text,
    supply_address3                      text,
    supply_address4                      text,
    supply_postcode                      text NOT NULL,
    customer_at_supply_address_from_date date NOT NULL,
    UNIQUE (account_id, position)
);

CREATE TABLE supply_points (
    id                bigserial PRIMARY KEY,
    account_id        bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    supply_address_id bigint NOT NULL REFERENCES supply_addresses (id) ON DELETE CASCADE,
    position          int NOT NULL,
    supply_type       text NOT NULL CHECK (supply_type IN ('ELECTRICITY', 'HEAT_PUMP', 'LIGHT', 'POLE', 'WATER_HEATER')),
    supply_start_date date NOT NULL,
    last_billed_to_date date,
    UNIQUE (supply_address_id, position)
);

-- Type-specific fields, one table per family of supply type.
CREATE TABLE electricity_supply_points (
    supply_point_id         bigint PRIMARY KEY REFERENCES supply_points (id) ON DELETE CASCADE,
    account_id              bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    identifier              text,
    initial_connection_date date,
    location_description    text,
    book_number             text,
    call_number             bigint,
    energization_status     text
);
CREATE UNIQUE INDEX electricity_supply_points_identifier ON electricity_supply_points (account_id, identifier) WHERE identifier IS NOT NULL;

CREATE TABLE heat_pump_supply_points (
    supply_point_id        bigint PRIMARY KEY REFERENCES supply_points (id) ON DELETE CASCADE,
    serial_number_internal text,
    serial_number_external text,
    make_model             text,
    size                   bigint,
    location_description   text,
    product_note           text
);

CREATE TABLE light_pole_supply_points (
    supply_point_id         bigint PRIMARY KEY REFERENCES supply_points (id) ON DELETE CASCADE,
    serial_number           text,
    secondary_serial_number text,
    manufacturer_name       text,
    model_name              text,
    location                text,
    product_note            text,
    installed_at            date
);

CREATE TABLE water_heater_supply_points (
    supply_point_id    bigint PRIMARY KEY REFERENCES supply_points (id) ON DELETE CASCADE,
    serial_number      text,
    tank_size          text,
    tank_type          text,
    tank_configuration text
);

CREATE TABLE meters (
    id                   bigserial PRIMARY KEY,
    supply_point_id      bigint NOT NULL REFERENCES supply_points (id) ON DELETE CASCADE,
    account_id           bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    serial_number        text,
    subgroup             bigint,
    seal_date            date,
    meter_number         bigint,
    status               text,
    active_from          date,
    -- meter_type
    manufacturer         text,
    model                text,
    amps_low             numeric,
    amps_high            numeric,
    volts_low            numeric,
    volts_high           numeric,
    phase                text,
    elements             numeric,
    stock_code           text,
    is_bidirectional     boolean,
    is_analog            boolean,
    cover_material       text,
    wire_ports           bigint,
    network_connectivity boolean,
    base                 text
);
CREATE UNIQUE INDEX meters_serial_number ON meters (account_id, serial_number) WHERE serial_number IS NOT NULL;

CREATE TABLE registers (
    id             bigserial PRIMARY KEY,
    meter_id       bigint NOT NULL REFERENCES meters (id) ON DELETE CASCADE,
    register_type  text NOT NULL,
    whole_digits   bigint,
    decimal_digits bigint,
    active_from    date,
    multiplier     numeric,
    UNIQUE (meter_id, register_type)
);

CREATE TABLE agreements (
    id              bigserial PRIMARY KEY,
    supply_point_id bigint NOT NULL REFERENCES supply_points (id) ON DELETE CASCADE,
    tariff_id       bigint NOT NULL REFERENCES tariffs (id),
    effective_from  date NOT NULL,
    UNIQUE (supply_point_id, effective_from)
);

CREATE TABLE transfer_readings (
    id              bigserial PRIMARY KEY,
    supply_point_id bigint NOT NULL REFERENCES supply_points (id) ON DELETE CASCADE,
    register_type   text NOT NULL,
    read_date       date NOT NULL,
    value           text NOT NULL
);

CREATE TABLE account_metadata (
    account_id bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    key        text NOT NULL,
    value      jsonb NOT NULL,
    PRIMARY KEY (account_id, key)
);

CREATE TABLE notes (
    id         bigserial PRIMARY KEY,
    account_id bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    body       text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    is_pinned  boolean NOT NULL DEFAULT false,
    unpin_at   timestamptz
);
CREATE INDEX notes_account_body ON notes (account_id, md5(body));

CREATE TABLE note_documents (
    note_id       bigint NOT NULL REFERENCES notes (id) ON DELETE CASCADE,
    position      int NOT NULL,
    document_path text NOT NULL,
    PRIMARY KEY (note_id, position)
);

-- Migration e-mails: recorded here whether or not SMTP is configured. One per
-- customer and account, so a retried job never mails twice.
CREATE TABLE email_outbox (
    id          bigserial PRIMARY KEY,
    account_id  bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    customer_id bigint NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    to_address  text NOT NULL,
    subject     text NOT NULL,
    body        text NOT NULL,
    sent_at     timestamptz,
    last_error  text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, customer_id)
);

-- +goose Down
DROP TABLE email_outbox, note_documents, notes, account_metadata, transfer_readings, agreements,
    registers, meters, water_heater_supply_points, light_pole_supply_points, heat_pump_supply_points,
    electricity_supply_points, supply_points, supply_addresses, customer_user_details,
    customer_phone_numbers, customers, ledgers, accounts;
