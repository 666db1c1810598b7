// Package auth holds the rules of authentication: organisation API keys
// (generated, hashed, revoked) and the access and refresh tokens obtained
// with them. The API's middleware and GraphQL mutation and the operator CLI
// are thin shells around it.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// Token lifetimes, as migration clients in this field expect them.
const (
	AccessTTL  = 60 * time.Minute
	RefreshTTL = 7 * 24 * time.Hour
)

const (
	keyPrefix    = "bik_" // "bulk import key"; makes leaked keys easy to grep for
	lookupLength = 12     // characters of the key stored in clear to find its row
	issuer       = "bulkimport"
)

// Error codes of authentication failures. They are stable: clients branch on them.
const (
	CodeNotAuthenticated     = "not_authenticated"
	CodeAuthenticationFailed = "authentication_failed"
	CodeInvalidAPIKey        = "invalid_api_key"
	CodeInvalidRefreshToken  = "invalid_refresh_token"
	CodeInvalidTokenInput    = "invalid_token_input"
)

// Principal is the authenticated caller: an API key and what it may see.
type Principal struct {
	KeyID        int64
	KeyName      string
	Organisation string
	// AllSuppliers says the key may see every supplier. It is a flag of the
	// key of its own: an empty Suppliers does not mean all.
	AllSuppliers bool
	// Suppliers lists the supplier codes the key is limited to when
	// AllSuppliers is false; empty then means none.
	Suppliers []string
}

// CanSee reports whether the key may address the import supplier.
func (p Principal) CanSee(supplierCode string) bool {
	if p.AllSuppliers {
		return true
	}
	for _, s := range p.Suppliers {
		if s == supplierCode {
			return true
		}
	}
	return false
}

// Service issues and checks tokens. Its zero value is not usable; use New.
type Service struct {
	db     *db.DB
	secret []byte
	now    func() time.Time
	cache  *principalCache
	tokens *verifiedTokens
	// sessionMaxAge caps a chain of refreshes from its first issue.
	sessionMaxAge time.Duration
	// accessTTL is the lifetime of an access token.
	accessTTL time.Duration
	// limiter refuses attempts after too many failures; nil: no limit.
	limiter *FailureLimiter
}

// New returns a Service that signs tokens with secret (HS256).
func New(d *db.DB, secret []byte) *Service {
	return &Service{db: d, secret: secret, now: time.Now, cache: &principalCache{m: map[int64]cachedPrincipal{}},
		tokens: newVerifiedTokens(), sessionMaxAge: DefaultSessionMaxAge, accessTTL: AccessTTL}
}

// WithAccessTTL returns a copy of s whose access tokens live d (AccessTTL
// by default). Zero or less keeps the default. Migration clients refresh by
// the token's exp, so a short lifetime tests that they do.
func (s *Service) WithAccessTTL(d time.Duration) *Service {
	c := *s
	if d > 0 {
		c.accessTTL = d
	}
	return &c
}

// WithClock returns a copy of s that reads the time from now, for tests of expiry.
func (s *Service) WithClock(now func() time.Time) *Service {
	c := *s
	c.now = now
	return &c
}

// GenerateKey returns a new API key: at least 32 random bytes, URL-safe.
func GenerateKey() string {
	b := make([]byte, 32)
	rand.Read(b)
	return keyPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// hashKey is SHA-256: keys carry 256 bits of entropy, so a slow password hash
// would add latency without adding safety.
func hashKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// Scope is what a new API key may see: every supplier (All), or exactly the
// listed ones. One of the two must be given; nothing is implied by an empty
// list, so that no key becomes unscoped by accident.
type Scope struct {
	All       bool
	Suppliers []string
}

// AllSuppliers is the scope of a key that sees every supplier.
func AllSuppliers() Scope { return Scope{All: true} }

// OnlySuppliers is the scope of a key limited to the suppliers with these codes.
func OnlySuppliers(codes ...string) Scope { return Scope{Suppliers: codes} }

// CreateKey stores a new key for the organisation with the given scope and
// returns the key. It is the only time the key is visible: only its hash is
// stored. A scope with neither All nor suppliers, or with both, is refused
// (invalid_scope).
func CreateKey(ctx context.Context, d *db.DB, name, organisation string, scope Scope) (string, error) {
	if strings.TrimSpace(name) == "" {
		return "", problem.Invalidf("blank", "name", "The key name may not be blank.")
	}
	if scope.All == (len(scope.Suppliers) > 0) {
		return "", problem.Invalidf("invalid_scope", "supplier",
			"A key is either for all suppliers or for the suppliers it names: give exactly one of the two.")
	}
	suppliers := scope.Suppliers
	if organisation == "" {
		organisation = name
	}
	key := GenerateKey()
	err := db.InTx(ctx, d, func(tx *db.Tx) error {
		var id int64
		err := tx.GetContext(ctx, &id, `INSERT INTO api_keys (name, organisation, prefix, secret_hash, all_suppliers) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
			name, organisation, key[:lookupLength], hashKey(key), scope.All)
		if db.IsUniqueViolation(err, "api_keys_name_key") {
			return problem.Invalidf("already_exists", "name", "An API key named %q already exists.", name)
		}
		if err != nil {
			return fmt.Errorf("insert key: %w", err)
		}
		for _, code := range suppliers {
			res, err := tx.ExecContext(ctx, `INSERT INTO api_key_suppliers (api_key_id, supplier_id) SELECT $1, id FROM import_suppliers WHERE code = $2 ON CONFLICT DO NOTHING`, id, code)
			if err != nil {
				return fmt.Errorf("limit key: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				var exists bool
				_ = tx.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM import_suppliers WHERE code = $1)`, code)
				if !exists {
					return problem.Invalidf("import_supplier_not_found", "supplier", "Import supplier %q does not exist.", code)
				}
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return key, nil
}

// RevokeKey marks the key revoked. Its tokens and refresh tokens stop working
// at once, because every request re-reads the key's state.
func RevokeKey(ctx context.Context, d *db.DB, name string) error {
	// The NOTIFY is sent at commit, in the same transaction, so every API
	// replica drops the key from its cache as the revocation becomes visible.
	var ids []int64
	err := d.SelectContext(ctx, &ids, `
		WITH r AS (UPDATE api_keys SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL RETURNING id)
		SELECT id FROM r, pg_notify('`+keysChannel+`', r.id::text) AS n`, name)
	if err != nil {
		return fmt.Errorf("revoke key: %w", err)
	}
	if len(ids) == 0 {
		return problem.Invalidf("not_found", "name", "No active API key named %q.", name)
	}
	return nil
}

// KeyInfo describes a key for listings; it never contains the key itself.
type KeyInfo struct {
	Name         string     `db:"name" json:"name"`
	Organisation string     `db:"organisation" json:"organisation"`
	Prefix       string     `db:"prefix" json:"prefix"`
	AllSuppliers bool       `db:"all_suppliers" json:"all_suppliers"`
	Suppliers    string     `db:"suppliers" json:"suppliers"`
	CreatedAt    time.Time  `db:"created_at" json:"created_at"`
	RevokedAt    *time.Time `db:"revoked_at" json:"revoked_at"`
}

// ListKeys returns every key, newest last.
func ListKeys(ctx context.Context, d *db.DB) ([]KeyInfo, error) {
	var out []KeyInfo
	err := d.SelectContext(ctx, &out, `
		SELECT k.name, k.organisation, k.prefix, k.all_suppliers, k.created_at, k.revoked_at,
		       coalesce(string_agg(s.code, ',' ORDER BY s.code), '') AS suppliers
		FROM api_keys k
		LEFT JOIN api_key_suppliers ks ON ks.api_key_id = k.id
		LEFT JOIN import_suppliers s ON s.id = ks.supplier_id
		GROUP BY k.id ORDER BY k.id`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return out, nil
}

type keyRow struct {
	ID           int64        `db:"id"`
	Name         string       `db:"name"`
	Organisation string       `db:"organisation"`
	SecretHash   []byte       `db:"secret_hash"`
	RevokedAt    sql.NullTime `db:"revoked_at"`
	AllSuppliers bool         `db:"all_suppliers"`
	Suppliers    string       `db:"suppliers"`
}

const keyQuery = `
	SELECT k.id, k.name, k.organisation, k.secret_hash, k.revoked_at, k.all_suppliers,
	       coalesce(string_agg(s.code, ',' ORDER BY s.code), '') AS suppliers
	FROM api_keys k
	LEFT JOIN api_key_suppliers ks ON ks.api_key_id = k.id
	LEFT JOIN import_suppliers s ON s.id = ks.supplier_id
	WHERE %s
	GROUP BY k.id`

func (r keyRow) principal() Principal {
	p := Principal{KeyID: r.ID, KeyName: r.Name, Organisation: r.Organisation, AllSuppliers: r.AllSuppliers}
	if !r.AllSuppliers && r.Suppliers != "" {
		p.Suppliers = strings.Split(r.Suppliers, ",")
	}
	return p
}

func (s *Service) keyByID(ctx context.Context, id int64) (keyRow, error) {
	var r keyRow
	err := s.db.GetContext(ctx, &r, fmt.Sprintf(keyQuery, "k.id = $1"), id)
	return r, err
}

// TokenPair is the answer to a token request.
type TokenPair struct {
	Token            string
	Payload          map[string]any
	RefreshToken     string
	RefreshExpiresIn int64 // Unix time at which the refresh token expires
}

type claims struct {
	jwt.RegisteredClaims
	Kind    string `json:"kind"` // "access" or "refresh"
	OrigIat int64  `json:"origIat"`
	// Sid is the refresh session an access token was issued in: when the
	// session is revoked (a refresh token used twice), its access tokens
	// stop working too. Zero in tokens issued before it was added.
	Sid int64 `json:"sid,omitempty"`
}

// issue signs an access token and the refresh token refreshID, which
// expires at refreshExp, of session sid, as recorded by startSession or
// rotate.
func (s *Service) issue(keyID int64, name string, origIat time.Time, sid int64, refreshID string, refreshExp time.Time) (TokenPair, error) {
	now := s.now().UTC().Truncate(time.Second)
	mk := func(kind, id string, exp time.Time) (string, claims, error) {
		c := claims{
			RegisteredClaims: jwt.RegisteredClaims{
				Issuer:    issuer,
				Subject:   strconv.FormatInt(keyID, 10),
				ID:        id,
				IssuedAt:  jwt.NewNumericDate(now),
				ExpiresAt: jwt.NewNumericDate(exp),
			},
			Kind:    kind,
			OrigIat: origIat.Unix(),
			Sid:     sid,
		}
		t, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.secret)
		return t, c, err
	}
	access, ac, err := mk("access", "", now.Add(s.accessTTL))
	if err != nil {
		return TokenPair{}, fmt.Errorf("sign token: %w", err)
	}
	refresh, rc, err := mk("refresh", refreshID, refreshExp)
	if err != nil {
		return TokenPair{}, fmt.Errorf("sign token: %w", err)
	}
	return TokenPair{
		Token: access,
		Payload: map[string]any{
			"sub": ac.Subject, "keyName": name, "iss": issuer,
			"iat": ac.IssuedAt.Unix(), "exp": ac.ExpiresAt.Unix(), "origIat": ac.OrigIat,
		},
		RefreshToken:     refresh,
		RefreshExpiresIn: rc.ExpiresAt.Unix(),
	}, nil
}

var errBadKey = problem.New(problem.Unauthenticated, CodeInvalidAPIKey, "Invalid API key.")

// TokenFromKey exchanges an API key for a token pair. After too many
// failures from the client's address, it refuses with
// CodeTooManyFailedAttempts (see FailureLimiter). Failures are counted for
// monitoring under ChannelToken.
func (s *Service) TokenFromKey(ctx context.Context, key string) (TokenPair, error) {
	pair, err := s.tokenFromKey(ctx, key)
	s.limiter.countFailure(channelOf(ctx, ChannelToken), err)
	return pair, err
}

func (s *Service) tokenFromKey(ctx context.Context, key string) (TokenPair, error) {
	r, err := guard(ctx, s.limiter, key, func(ctx context.Context) (keyRow, error) {
		r, ok, err := s.keyBySecret(ctx, key)
		if err != nil {
			return keyRow{}, err
		}
		if !ok || r.RevokedAt.Valid {
			return keyRow{}, errBadKey
		}
		return r, nil
	})
	if err != nil {
		return TokenPair{}, err
	}
	now := s.now().UTC().Truncate(time.Second)
	sid, id, exp, err := s.startSession(ctx, r.ID, now)
	if err != nil {
		return TokenPair{}, err
	}
	return s.issue(r.ID, r.Name, now, sid, id, exp)
}

// TokenFromRefresh exchanges a refresh token for a new pair. Each refresh
// token is exchanged once (rotate): a reused one revokes its session, and a
// session ends sessionMaxAge after the key obtained its first pair, whose
// time is carried over as origIat. Every refusal is invalid_refresh_token,
// but for CodeTooManyFailedAttempts after too many failures from the
// client's address. A refresh token that is signed by the service but
// refused by its session (used, revoked, over) is no guess and does not
// count against the limit; for monitoring it is a failure like any other
// (a used one may be a stolen one), counted under ChannelToken.
func (s *Service) TokenFromRefresh(ctx context.Context, refresh string) (TokenPair, error) {
	pair, err := s.tokenFromRefresh(ctx, refresh)
	s.limiter.countFailure(channelOf(ctx, ChannelToken), err)
	return pair, err
}

func (s *Service) tokenFromRefresh(ctx context.Context, refresh string) (TokenPair, error) {
	refused := problem.New(problem.Unauthenticated, CodeInvalidRefreshToken, "Invalid or expired refresh token.")
	type checked struct {
		c *claims
		r keyRow
	}
	v, err := guard(ctx, s.limiter, refresh, func(ctx context.Context) (checked, error) {
		if strings.HasPrefix(refresh, keyPrefix) {
			return checked{}, problem.New(problem.Unauthenticated, CodeInvalidRefreshToken,
				"This is an API key, not a refresh token: pass it as APIKey in the input of obtainServiceToken.")
		}
		c, err := s.parse(refresh, "refresh")
		if err != nil {
			return checked{}, refused
		}
		r, err := s.activeKey(ctx, c)
		if err != nil {
			if _, ok := problem.As(err); ok {
				return checked{}, refused
			}
			return checked{}, err
		}
		return checked{c, r}, nil
	})
	if err != nil {
		return TokenPair{}, err
	}
	c, r := v.c, v.r
	now := s.now().UTC().Truncate(time.Second)
	sid, next, exp, started, err := s.rotate(ctx, r.ID, c.ID, now)
	if errors.Is(err, errRefreshRefused) {
		return TokenPair{}, refused
	}
	if err != nil {
		return TokenPair{}, err
	}
	return s.issue(r.ID, r.Name, started, sid, next, exp)
}

func (s *Service) parse(token, kind string) (*claims, error) {
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return s.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(issuer),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(s.now),
	)
	if err != nil {
		return nil, err
	}
	if c.Kind != kind {
		return nil, fmt.Errorf("token kind %q, want %q", c.Kind, kind)
	}
	return &c, nil
}

func (s *Service) activeKey(ctx context.Context, c *claims) (keyRow, error) {
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil {
		return keyRow{}, problem.New(problem.Unauthenticated, CodeAuthenticationFailed, "Invalid token.")
	}
	r, err := s.keyByID(ctx, id)
	if errors.Is(err, db.ErrNotFound) {
		return keyRow{}, problem.New(problem.Unauthenticated, CodeAuthenticationFailed, "Invalid token.")
	}
	if err != nil {
		return keyRow{}, fmt.Errorf("find key: %w", err)
	}
	if r.RevokedAt.Valid {
		return keyRow{}, problem.New(problem.Unauthenticated, CodeAuthenticationFailed, "The API key of this token was revoked.")
	}
	return r, nil
}

// Authenticate checks an access token and returns its principal. The key's
// state comes from the principal cache when Listen runs (revocations evict
// it by NOTIFY), else from the database on every call. A token it has not
// verified before goes through the failed-attempt limit of the client's
// address (CodeTooManyFailedAttempts); one it has verified does not, as it
// cannot be a guess. Failures are counted for monitoring under the channel
// of ctx (WithChannel), or ChannelAPI.
func (s *Service) Authenticate(ctx context.Context, token string) (Principal, error) {
	p, err := s.checkToken(ctx, token)
	s.limiter.countFailure(channelOf(ctx, ChannelAPI), err)
	return p, err
}

func (s *Service) checkToken(ctx context.Context, token string) (Principal, error) {
	if c, ok := s.tokens.get(token, s.now()); ok {
		return s.principalOf(ctx, c)
	}
	return guard(ctx, s.limiter, token, func(ctx context.Context) (Principal, error) {
		c, err := s.parse(token, "access")
		if err != nil {
			detail := "Invalid token."
			if errors.Is(err, jwt.ErrTokenExpired) {
				detail = "The token has expired; obtain a new one."
			}
			return Principal{}, problem.New(problem.Unauthenticated, CodeAuthenticationFailed, detail)
		}
		s.tokens.put(token, c)
		return s.principalOf(ctx, c)
	})
}

// principalOf returns the principal of the verified claims c, from the
// cache or the database, unless the refresh session the token was issued in
// was revoked.
func (s *Service) principalOf(ctx context.Context, c *claims) (Principal, error) {
	if c.Sid != 0 {
		revoked, err := s.sessionRevoked(ctx, c.Sid)
		if err != nil {
			return Principal{}, err
		}
		if revoked {
			return Principal{}, problem.New(problem.Unauthenticated, CodeAuthenticationFailed,
				"The refresh chain of this token was revoked (a refresh token was used twice); present the API key again.")
		}
	}
	now := time.Now()
	if id, err := strconv.ParseInt(c.Subject, 10, 64); err == nil {
		if p, ok := s.cache.get(id, now); ok {
			return p, nil
		}
	}
	gen := s.cache.generation()
	r, err := s.activeKey(ctx, c)
	if err != nil {
		return Principal{}, err
	}
	p := r.principal()
	s.cache.put(p, now, gen)
	return p, nil
}

// sessionRevoked reports whether the refresh session sid, in which an
// access token was issued, was revoked (or is gone), from the cache while
// Listen runs, else from the database.
func (s *Service) sessionRevoked(ctx context.Context, sid int64) (bool, error) {
	now := time.Now()
	if revoked, ok := s.cache.getSession(sid, now); ok {
		return revoked, nil
	}
	gen := s.cache.generation()
	var revoked bool
	err := s.db.GetContext(ctx, &revoked, `SELECT coalesce((SELECT revoked_at IS NOT NULL FROM refresh_sessions WHERE id = $1), true)`, sid)
	if err != nil {
		return false, fmt.Errorf("find refresh session: %w", err)
	}
	s.cache.putSession(sid, revoked, now, gen)
	return revoked, nil
}
