package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// detailForms names the Authorization forms AuthenticateHeader accepts.
const detailForms = "Send 'Authorization: Token <token>', the token alone, or 'Authorization: Token <API key>'."

// DetailKeyAsToken answers an API key sent where a token goes: alone in the
// Authorization header, the place of the bare JWT. It says how to get a
// token, since a key is not one.
const DetailKeyAsToken = "An API key is not a token: exchange it for a token first with the obtainServiceToken mutation " +
	"(POST /v1/graphql/, input {APIKey: \"<API key>\"}) and send 'Authorization: Token <token>', " +
	"or send the key itself as 'Authorization: Token <API key>'."

// AuthenticateHeader authenticates the value of an Authorization header in
// each form the reference documents (reference-api.md 2.1, the two security
// schemes of every data-import operation):
//
//   - "Token <access token>", the token of obtainServiceToken (spec section 5);
//   - "<access token>", the same JWT alone (DRFKrakenTokenAuthentication);
//   - "Token <API key>", the organisation API key used directly
//     (DataImportViewerAPIKeyAuthentication), with the key's scope and
//     revocation applied as to its tokens.
//
// The scheme is matched case-insensitively. An API key without "Token " is
// refused: the reference names the prefix as required for keys. Errors are
// Unauthenticated: CodeNotAuthenticated when no credential is given (no
// header, another scheme, "Token" alone), CodeAuthenticationFailed when the
// credential is wrong, expired or revoked; or TooManyRequests,
// CodeTooManyFailedAttempts, after too many failures (see FailureLimiter).
//
// Failures are counted for monitoring under ChannelAPI, or the channel of
// ctx (WithChannel).
func (s *Service) AuthenticateHeader(ctx context.Context, header string) (Principal, error) {
	p, err := s.authenticateHeader(ctx, header)
	s.limiter.countFailure(channelOf(ctx, ChannelAPI), err)
	return p, err
}

func (s *Service) authenticateHeader(ctx context.Context, header string) (Principal, error) {
	h := strings.TrimSpace(header)
	scheme, cred, found := strings.Cut(h, " ")
	switch {
	case h == "":
		return Principal{}, problem.New(problem.Unauthenticated, CodeNotAuthenticated,
			"Authentication credentials were not provided. "+detailForms)
	case !found && strings.EqualFold(h, "Token"):
		return Principal{}, problem.New(problem.Unauthenticated, CodeNotAuthenticated,
			"Authentication credentials were not provided. "+detailForms)
	case !found && strings.HasPrefix(h, keyPrefix):
		return Principal{}, problem.New(problem.Unauthenticated, CodeAuthenticationFailed, DetailKeyAsToken)
	case !found:
		return s.checkToken(ctx, h)
	case strings.EqualFold(scheme, "Bearer"):
		return Principal{}, problem.New(problem.Unauthenticated, CodeNotAuthenticated,
			"This API does not take 'Authorization: Bearer ...'; send the same value as 'Authorization: Token <token>' (or 'Authorization: Token <API key>').")
	case !strings.EqualFold(scheme, "Token"):
		return Principal{}, problem.New(problem.Unauthenticated, CodeNotAuthenticated,
			"Authentication credentials were not provided. "+detailForms)
	}
	cred = strings.TrimSpace(cred)
	switch {
	case cred == "":
		return Principal{}, problem.New(problem.Unauthenticated, CodeNotAuthenticated,
			"Authentication credentials were not provided. "+detailForms)
	case strings.HasPrefix(cred, keyPrefix):
		return s.checkKey(ctx, cred)
	}
	return s.checkToken(ctx, cred)
}

// AuthenticateKey checks an API key used directly, without a token, and
// returns its principal. The key is read from the database on every call,
// so a revocation stops it at once. Errors: CodeAuthenticationFailed for an
// unknown or revoked key, CodeTooManyFailedAttempts after too many failures
// from the client's address. Failures are counted for monitoring under the
// channel of ctx (WithChannel), or ChannelAPI.
func (s *Service) AuthenticateKey(ctx context.Context, key string) (Principal, error) {
	p, err := s.checkKey(ctx, key)
	s.limiter.countFailure(channelOf(ctx, ChannelAPI), err)
	return p, err
}

func (s *Service) checkKey(ctx context.Context, key string) (Principal, error) {
	return guard(ctx, s.limiter, key, func(ctx context.Context) (Principal, error) { return s.authenticateKey(ctx, key) })
}

func (s *Service) authenticateKey(ctx context.Context, key string) (Principal, error) {
	r, ok, err := s.keyBySecret(ctx, key)
	if err != nil {
		return Principal{}, err
	}
	if !ok {
		return Principal{}, problem.New(problem.Unauthenticated, CodeAuthenticationFailed, "Invalid API key.")
	}
	if r.RevokedAt.Valid {
		return Principal{}, problem.New(problem.Unauthenticated, CodeAuthenticationFailed, "This API key was revoked.")
	}
	return r.principal(), nil
}

// keyBySecret returns the row of the API key, revoked or not; ok is false
// when no key matches it.
func (s *Service) keyBySecret(ctx context.Context, key string) (r keyRow, ok bool, err error) {
	// Keys are keyPrefix and base64url. Anything else matches no key, and
	// must not reach PostgreSQL, which refuses NUL and invalid UTF-8.
	if len(key) < lookupLength || !strings.HasPrefix(key, keyPrefix) || strings.ContainsFunc(key, notKeyChar) {
		return r, false, nil
	}
	err = s.db.GetContext(ctx, &r, fmt.Sprintf(keyQuery, "k.prefix = $1"), key[:lookupLength])
	if errors.Is(err, db.ErrNotFound) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("find key: %w", err)
	}
	return r, subtle.ConstantTimeCompare(r.SecretHash, hashKey(key)) == 1, nil
}

func notKeyChar(c rune) bool {
	return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_')
}
