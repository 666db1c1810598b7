package auth

import (
	"context"
	"errors"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// Channel names where a credential was presented, for the count of failed
// authentications (FailureCounter).
type Channel string

// The channels. Every failed authentication is counted under one of them.
const (
	// ChannelAPI: the Authorization header of /v1/data-import/ (a token or
	// an API key used directly).
	ChannelAPI Channel = "api"
	// ChannelToken: the token endpoint (obtainServiceToken with an API key
	// or a refresh token), whose refusals GraphQL answers with status 200.
	ChannelToken Channel = "token"
	// ChannelMigrationPage: the migration page's basic-auth login (the
	// MONITORING_USER login, or an API key as the password).
	ChannelMigrationPage Channel = "migration_page"
	// ChannelMonitoring: the MONITORING_USER login of the dashboard and of
	// /metrics.
	ChannelMonitoring Channel = "monitoring"
)

// Channels are every Channel, for making each count exist before its first
// failure.
var Channels = []Channel{ChannelAPI, ChannelToken, ChannelMigrationPage, ChannelMonitoring}

// Reasons of a failed authentication, the reason label of its count.
const (
	// FailureWrong: the credential was checked and refused (unknown,
	// revoked, expired or malformed; a wrong login).
	FailureWrong = "wrong"
	// FailureThrottled: the attempt was refused without being checked, as
	// its client address used up AUTH_FAILURE_LIMIT (429, or 200 with
	// too_many_failed_attempts at the token endpoint).
	FailureThrottled = "throttled"
)

// FailureCounter counts failed authentications for monitoring; jobs/metrics
// implements it. Before, they were visible only as 401 answers: the token
// endpoint's refusals, which GraphQL answers with status 200, and the
// attempts the failed-attempt limit refused with 429 were not seen at all.
type FailureCounter interface {
	// AuthFailures adds n failures of channel for reason; n is 0 to make
	// the count exist before the first failure.
	AuthFailures(channel, reason string, n int)
}

// CountFailuresIn makes l count every failed authentication it sees into
// c, from zero for each channel and reason. It must be called before l is
// used; nil counts nothing.
func (l *FailureLimiter) CountFailuresIn(c FailureCounter) {
	l.counter = c
	if c == nil {
		return
	}
	for _, ch := range Channels {
		c.AuthFailures(string(ch), FailureWrong, 0)
		c.AuthFailures(string(ch), FailureThrottled, 0)
	}
}

type channelKey struct{}

// WithChannel returns ctx saying that the credentials checked under it come
// through ch. Entry points that serve one channel alone (AuthenticateHeader,
// TokenFromKey, TokenFromRefresh) need none; AuthenticateKey and
// Authenticate count under ChannelAPI without it, and CheckLogin under
// ChannelMonitoring.
func WithChannel(ctx context.Context, ch Channel) context.Context {
	return context.WithValue(ctx, channelKey{}, ch)
}

// channelOf is the channel in ctx, or def when there is none.
func channelOf(ctx context.Context, def Channel) Channel {
	if ch, ok := ctx.Value(channelKey{}).(Channel); ok {
		return ch
	}
	return def
}

// countFailure counts err, the outcome of one authentication through ch, if
// it is a failure: a refused credential (Unauthenticated, but for
// not_authenticated: no credential is no attempt) or an attempt the limit
// refused. Every entry point calls it once per request, with its final
// error, so that requests sharing one check (guard) each count.
func (l *FailureLimiter) countFailure(ch Channel, err error) {
	if l == nil || l.counter == nil || err == nil {
		return
	}
	p, ok := problem.As(err)
	switch {
	case errors.Is(err, errWrongLogin):
		l.counter.AuthFailures(string(ch), FailureWrong, 1)
	case !ok:
	case p.Code == CodeTooManyFailedAttempts:
		l.counter.AuthFailures(string(ch), FailureThrottled, 1)
	case p.Kind == problem.Unauthenticated && p.Code != CodeNotAuthenticated:
		l.counter.AuthFailures(string(ch), FailureWrong, 1)
	}
}
