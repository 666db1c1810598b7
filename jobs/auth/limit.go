package auth

import (
	"context"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// CodeTooManyFailedAttempts (429) refuses an authentication attempt from a
// client address, or for an API key, that failed too often lately.
const CodeTooManyFailedAttempts = "too_many_failed_attempts"

// Defaults of the failed-attempt limit: 20 failures in a row, then one more
// every 30 seconds; a client that stops failing is forgiven in 10 minutes.
const (
	DefaultFailureLimit  = 20
	DefaultFailureWindow = 10 * time.Minute
)

// FailureLimiter counts failed authentication attempts per client address
// and per API key in Redis, so that the count holds across API replicas, and
// refuses attempts once a count is used up, so that keys and passwords
// cannot be guessed at speed. It is a GCRA limiter (go-redis/redis_rate):
// Limit failures may come at once, after which one more is allowed every
// Window/Limit, and the count is back to nothing Window after the last
// failure.
//
// Only failures count: a client that authenticates well is never slowed.
// While a count is used up, every attempt it covers is refused before the
// credential is looked at, the right one included, so that a guesser learns
// nothing from its attempts.
//
// A Redis that does not answer lets attempts through (logged): the limit
// guards against guessing, which 256-bit keys and signed tokens make
// hopeless anyway, and must not make authentication depend on Redis.
type FailureLimiter struct {
	rl    *redis_rate.Limiter
	limit redis_rate.Limit
	log   *slog.Logger
}

// NewFailureLimiter returns a limiter on rc that allows limit failed
// attempts per window for each client address and each API key. log
// reports a Redis that does not answer; it must not be nil.
func NewFailureLimiter(rc redis.UniversalClient, limit int, window time.Duration, log *slog.Logger) *FailureLimiter {
	if log == nil {
		panic("auth.NewFailureLimiter: nil *slog.Logger")
	}
	if limit <= 0 {
		limit = DefaultFailureLimit
	}
	if window <= 0 {
		window = DefaultFailureWindow
	}
	return &FailureLimiter{rl: redis_rate.NewLimiter(rc), limit: redis_rate.Limit{Rate: limit, Burst: limit, Period: window}, log: log}
}

// redis_rate prefixes its own "rate:" to these.
const (
	addrCounter = "importd:auth-failures:addr:"
	keyCounter  = "importd:auth-failures:key:"
)

// counters returns the Redis keys of the counts an attempt falls under: its
// client address (from ctx; none without one) and, when the credential is
// an API key, the key's lookup prefix. The prefix holds 8 random characters
// of the key, so only someone who has seen the key can spend its count.
func counters(ctx context.Context, keyPrefix string) []string {
	var out []string
	if a := ClientAddr(ctx); a != "" {
		out = append(out, addrCounter+addrGroup(a))
	}
	if keyPrefix != "" {
		out = append(out, keyCounter+keyPrefix)
	}
	return out
}

// addrGroup is the unit of the address count: the address itself for IPv4,
// its /64 for IPv6, as one client usually holds a whole /64.
func addrGroup(a string) string {
	ip, err := netip.ParseAddr(a)
	if err != nil {
		return a
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// redisTimeout bounds each call to Redis: the limit lets attempts through
// when Redis does not answer, and a Redis that is down must not make every
// authentication wait for the client's dial retries.
const redisTimeout = 250 * time.Millisecond

// check refuses the attempt when one of its counts is used up, with the
// time until the next attempt is allowed.
func (l *FailureLimiter) check(ctx context.Context, counters []string) error {
	if l == nil || len(counters) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	for _, c := range counters {
		// AllowAtMost of 0 spends nothing: it only says whether one more
		// failure would be allowed now, and if not, when.
		res, err := l.rl.AllowAtMost(ctx, c, l.limit, 0)
		if err != nil {
			l.log.WarnContext(ctx, "failed-attempt limit not checked: redis did not answer", "error", err.Error())
			return nil
		}
		if res.RetryAfter > 0 {
			p := problem.New(problem.TooManyRequests, CodeTooManyFailedAttempts,
				"Too many failed authentication attempts; retry in "+strconv.Itoa(max(1, int(res.RetryAfter.Round(time.Second).Seconds())))+" s.")
			p.RetryAfter = res.RetryAfter
			return p
		}
	}
	return nil
}

// fail counts a failed attempt against each of its counters.
func (l *FailureLimiter) fail(ctx context.Context, counters []string) {
	if l == nil || len(counters) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
	defer cancel()
	for _, c := range counters {
		if _, err := l.rl.Allow(ctx, c, l.limit); err != nil {
			l.log.WarnContext(ctx, "failed attempt not counted: redis did not answer", "error", err.Error())
			return
		}
	}
}

// guard runs attempt unless a count of the attempt is used up, and counts
// it as failed when it is refused for its credential. A missing credential
// (not_authenticated) and a malformed token request are not attempts.
func guard[T any](ctx context.Context, l *FailureLimiter, keyPrefix string, attempt func() (T, error)) (T, error) {
	cs := counters(ctx, keyPrefix)
	if err := l.check(ctx, cs); err != nil {
		var zero T
		return zero, err
	}
	out, err := attempt()
	if p, ok := problem.As(err); ok && p.Kind == problem.Unauthenticated && p.Code != CodeNotAuthenticated {
		l.fail(ctx, cs)
	}
	return out, err
}

// CheckLogin runs right, the check of a login that is neither an API key
// nor a token (the MONITORING_USER login of the dashboard and the migration
// page), under the count of the client address in ctx. While that count is
// used up it returns a 429 CodeTooManyFailedAttempts problem without calling
// right; otherwise it returns what right returns, and counts false as a
// failed attempt. No count is kept per login: guesses at it from one address
// must not lock its holder out at every other address.
func (l *FailureLimiter) CheckLogin(ctx context.Context, right func() bool) (bool, error) {
	cs := counters(ctx, "")
	if err := l.check(ctx, cs); err != nil {
		return false, err
	}
	if right() {
		return true, nil
	}
	l.fail(ctx, cs)
	return false, nil
}

// CheckLogin is FailureLimiter.CheckLogin with the limiter of s (none
// without WithFailureLimiter).
func (s *Service) CheckLogin(ctx context.Context, right func() bool) (bool, error) {
	return s.limiter.CheckLogin(ctx, right)
}

// WithFailureLimiter returns a copy of s whose authentications go through
// l: TokenFromKey, TokenFromRefresh, AuthenticateKey, and Authenticate for a
// token it has not verified before. nil turns the limit off.
func (s *Service) WithFailureLimiter(l *FailureLimiter) *Service {
	c := *s
	c.limiter = l
	return &c
}

type clientAddrKey struct{}

// WithClientAddr returns ctx carrying the address of the client whose
// request it serves, for the failed-attempt limit. The API sets it for every
// request; without it only the API key's count applies.
func WithClientAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, clientAddrKey{}, addr)
}

// ClientAddr returns the client address stored by WithClientAddr, or "".
func ClientAddr(ctx context.Context) string {
	a, _ := ctx.Value(clientAddrKey{}).(string)
	return a
}

// keyPrefixOf is the lookup prefix of what looks like an API key, or "".
func keyPrefixOf(key string) string {
	if len(key) < lookupLength || !strings.HasPrefix(key, keyPrefix) || strings.ContainsFunc(key[:lookupLength], notKeyChar) {
		return ""
	}
	return key[:lookupLength]
}
