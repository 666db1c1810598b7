package auth

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/bulkimport/bulkimport/db"
)

// DefaultSessionMaxAge is how long a chain of refreshes may go on from the
// token pair that an API key obtained: after it the client must present its
// key again.
const DefaultSessionMaxAge = 30 * 24 * time.Hour

// WithSessionMaxAge returns a copy of s whose refresh sessions end d after
// their start. Zero or less keeps the default.
func (s *Service) WithSessionMaxAge(d time.Duration) *Service {
	c := *s
	if d > 0 {
		c.sessionMaxAge = d
	}
	return &c
}

func newTokenID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// refreshExpiry is when a refresh token issued at now in a session started
// at started expires: its own lifetime, cut at the end of the session.
func (s *Service) refreshExpiry(now, started time.Time) time.Time {
	exp := now.Add(RefreshTTL)
	if end := started.Add(s.sessionMaxAge); end.Before(exp) {
		exp = end
	}
	return exp
}

// startSession records a new refresh session of the key, started at now,
// and its first refresh token, and returns the session's id and the
// token's id and expiry.
func (s *Service) startSession(ctx context.Context, keyID int64, now time.Time) (int64, string, time.Time, error) {
	id, err := newTokenID()
	if err != nil {
		return 0, "", time.Time{}, err
	}
	exp := s.refreshExpiry(now, now)
	var sid int64
	err = s.db.GetContext(ctx, &sid, `
		WITH sess AS (INSERT INTO refresh_sessions (api_key_id, started_at) VALUES ($1, $2) RETURNING id),
		     tok AS (INSERT INTO refresh_tokens (id, session_id, expires_at) SELECT $3, id, $4 FROM sess)
		SELECT id FROM sess`, keyID, now, id, exp)
	if err != nil {
		return 0, "", time.Time{}, fmt.Errorf("start refresh session: %w", err)
	}
	return sid, id, exp, nil
}

// errRefreshRefused says the refresh token may not be exchanged: unknown,
// already used, or its session revoked or over.
var errRefreshRefused = errors.New("refresh token refused")

// rotate exchanges the refresh token id of the key, once: it marks it used
// and records its successor in the same session, returning the session's
// id, the successor's id and expiry and the session's start. A token
// presented a second time was copied, by the client's attacker or by the
// client itself, and the two can no longer be told apart; so its whole
// session is revoked: the successor issued by the first exchange stops
// working too, and so do the access tokens issued in the session (their
// sid), which every API replica hears of by NOTIFY. That revocation is
// committed although the call fails with errRefreshRefused.
func (s *Service) rotate(ctx context.Context, keyID int64, id string, now time.Time) (sid int64, next string, exp, started time.Time, err error) {
	next, exp, started, sid, err = s.rotateTx(ctx, keyID, id, now)
	return sid, next, exp, started, err
}

func (s *Service) rotateTx(ctx context.Context, keyID int64, id string, now time.Time) (next string, exp, started time.Time, sid int64, err error) {
	if id == "" {
		return "", time.Time{}, time.Time{}, 0, errRefreshRefused
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return "", time.Time{}, time.Time{}, 0, fmt.Errorf("refresh: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var row struct {
		SessionID int64        `db:"session_id"`
		UsedAt    sql.NullTime `db:"used_at"`
		StartedAt time.Time    `db:"started_at"`
		RevokedAt sql.NullTime `db:"revoked_at"`
	}
	err = tx.GetContext(ctx, &row, `
		SELECT t.session_id, t.used_at, s.started_at, s.revoked_at
		FROM refresh_tokens t JOIN refresh_sessions s ON s.id = t.session_id
		WHERE t.id = $1 AND s.api_key_id = $2
		FOR UPDATE OF t, s`, id, keyID)
	if errors.Is(err, db.ErrNotFound) {
		return "", time.Time{}, time.Time{}, 0, errRefreshRefused
	}
	if err != nil {
		return "", time.Time{}, time.Time{}, 0, fmt.Errorf("refresh: %w", err)
	}
	switch {
	case row.RevokedAt.Valid:
		return "", time.Time{}, time.Time{}, 0, errRefreshRefused
	case row.UsedAt.Valid:
		// The NOTIFY is sent at commit: every API replica then drops the
		// session from its cache, and its access tokens stop working.
		if _, err := tx.ExecContext(ctx, `
			WITH r AS (UPDATE refresh_sessions SET revoked_at = $2 WHERE id = $1 RETURNING id)
			SELECT pg_notify('`+keysChannel+`', '`+sessionNotice+`' || r.id::text) FROM r`, row.SessionID, now); err != nil {
			return "", time.Time{}, time.Time{}, 0, fmt.Errorf("refresh: revoke session: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return "", time.Time{}, time.Time{}, 0, fmt.Errorf("refresh: revoke session: %w", err)
		}
		return "", time.Time{}, time.Time{}, 0, errRefreshRefused
	case !now.Before(row.StartedAt.Add(s.sessionMaxAge)):
		return "", time.Time{}, time.Time{}, 0, errRefreshRefused
	}
	if next, err = newTokenID(); err != nil {
		return "", time.Time{}, time.Time{}, 0, err
	}
	exp = s.refreshExpiry(now, row.StartedAt)
	if _, err := tx.ExecContext(ctx, `UPDATE refresh_tokens SET used_at = $2 WHERE id = $1`, id, now); err != nil {
		return "", time.Time{}, time.Time{}, 0, fmt.Errorf("refresh: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO refresh_tokens (id, session_id, expires_at) VALUES ($1, $2, $3)`, next, row.SessionID, exp); err != nil {
		return "", time.Time{}, time.Time{}, 0, fmt.Errorf("refresh: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return "", time.Time{}, time.Time{}, 0, fmt.Errorf("refresh: %w", err)
	}
	return next, exp, row.StartedAt, row.SessionID, nil
}
