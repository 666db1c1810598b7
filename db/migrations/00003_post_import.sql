-- +goose Up
-- Data imported onto an existing account (E7, E8). Notes (E6) use the notes
-- and note_documents tables of 00002, which account creation also fills.

-- Historical statements: closed billing periods whose PDFs are in object
-- storage. The latest bill_period_to_date ends the closed part of the
-- account's history; the open statement period starts the day after (see
-- jobs/postimport/RULES.md).
CREATE TABLE historical_statements (
    id                    bigserial PRIMARY KEY,
    account_id            bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    statement_id          text NOT NULL CHECK (statement_id <> ''),
    number                text NOT NULL,
    bill_period_from_date date NOT NULL,
    bill_period_to_date   date NOT NULL,
    issued_date           date NOT NULL,
    gross_amount          numeric(14, 2) NOT NULL,
    statement_path        text,
    created_at            timestamptz NOT NULL DEFAULT now(),
    CHECK (bill_period_from_date <= bill_period_to_date),
    UNIQUE (account_id, statement_id)
);
CREATE INDEX historical_statements_period_end ON historical_statements (account_id, bill_period_to_date);

-- Financial transactions. transaction_id is the caller's identifier, unique
-- per account: that constraint is what makes a re-sent request add nothing
-- twice. original_transaction_date is set when force_add_to_current_statement
-- moved the transaction into the open statement period.
CREATE TABLE transactions (
    id                        bigserial PRIMARY KEY,
    account_id                bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    transaction_id            text NOT NULL CHECK (transaction_id <> ''),
    transaction_date          date NOT NULL,
    original_transaction_date date,
    amount                    numeric(14, 2) NOT NULL,
    type                      text NOT NULL CHECK (type IN ('CHARGE', 'CREDIT', 'PAYMENT', 'REPAYMENT', 'SUPPLY_CHARGE')),
    reason                    text,
    display_note              text,
    note                      text,
    reference                 text,
    payment_type              text,
    product_id                bigint REFERENCES products (id),
    description               text,
    created_at                timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, transaction_id)
);

CREATE TABLE transaction_line_items (
    transaction_row_id bigint NOT NULL REFERENCES transactions (id) ON DELETE CASCADE,
    position           int NOT NULL,
    rate_band          text NOT NULL,
    start_date         date NOT NULL,
    end_date           date NOT NULL,
    number_of_units    numeric NOT NULL,
    net_amount         numeric(14, 2) NOT NULL,
    price_per_unit     numeric NOT NULL,
    units              numeric[],
    PRIMARY KEY (transaction_row_id, position)
);

CREATE TABLE transaction_tax_items (
    transaction_row_id bigint NOT NULL REFERENCES transactions (id) ON DELETE CASCADE,
    position           int NOT NULL,
    amount             numeric(14, 2) NOT NULL,
    tax_type           text NOT NULL,
    value_taxed        numeric(14, 2) NOT NULL,
    rate               numeric NOT NULL,
    unit_type          text,
    PRIMARY KEY (transaction_row_id, position)
);

-- +goose Down
DROP TABLE transaction_tax_items, transaction_line_items, transactions, historical_statements;
