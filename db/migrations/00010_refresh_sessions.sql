-- +goose Up
-- A refresh session starts when an API key obtains a token pair. Each
-- refresh token is one row and may be exchanged once; presenting a used one
-- revokes its whole session (the token was copied), and no session outlives
-- the maximum length counted from started_at.
CREATE TABLE refresh_sessions (
    id         bigserial PRIMARY KEY,
    api_key_id bigint NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    started_at timestamptz NOT NULL,
    revoked_at timestamptz
);

CREATE TABLE refresh_tokens (
    id         text PRIMARY KEY,
    session_id bigint NOT NULL REFERENCES refresh_sessions (id) ON DELETE CASCADE,
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
CREATE INDEX refresh_tokens_session_id ON refresh_tokens (session_id);

-- +goose Down
DROP TABLE refresh_tokens;
DROP TABLE refresh_sessions;
