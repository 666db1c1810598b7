package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

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
// in Redis, so that the count holds across API replicas, and refuses
// attempts once a count is used up, so that keys and passwords cannot be
// guessed at speed. It is a GCRA limiter (go-redis/redis_rate):
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
//
// There is no count per API key. One was kept by the key's lookup prefix,
// which `importctl apikey list` prints: 21 wrong keys that shared a victim
// key's prefix, sent from anywhere, locked its holder out at every address.
// A key has 256 random bits, so counting the guesses at it by address is
// enough.
type FailureLimiter struct {
	rl    *redis_rate.Limiter
	rc    redis.UniversalClient
	limit redis_rate.Limit
	log   *slog.Logger
	// timeout bounds each call to Redis (redisTimeout; tests with hundreds
	// of attempts at once on a loaded machine give more).
	timeout time.Duration
	// flights shares one check among attempts with the same credential and
	// counts that run at once (see guard).
	flights singleflight.Group
	// mu guards inFlight: per counter, the checks that run now on this
	// replica (see admit).
	mu       sync.Mutex
	inFlight map[string]int
	// counter counts the failures for monitoring (CountFailuresIn); nil
	// counts nothing.
	counter FailureCounter
}

// NewFailureLimiter returns a limiter on rc that allows limit failed
// attempts per window for each client address. log
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
	return &FailureLimiter{rl: redis_rate.NewLimiter(rc), rc: rc, timeout: redisTimeout, limit: redis_rate.Limit{Rate: limit, Burst: limit, Period: window}, log: log,
		inFlight: map[string]int{}}
}

// addrCounter prefixes the Redis key of an address's count; redis_rate
// prefixes its own "rate:" to it.
const addrCounter = "importd:auth-failures:addr:"

// counters returns the Redis keys of the counts an attempt falls under: its
// client address's (from ctx), or none without one.
func counters(ctx context.Context) []string {
	if a := ClientAddr(ctx); a != "" {
		return []string{addrCounter + addrGroup(a)}
	}
	return nil
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

// refund gives back one failure spent by reserve: the GCRA's theoretical
// arrival time goes back by one emission interval, and the key goes when
// that is in the past. redis_rate's own AllowN with a cost of -1 does not
// do it exactly: it never lowers a time below now, so a success just after
// a quiet spell would leave a failure counted.
var refund = redis.NewScript(`
local tat = tonumber(redis.call("GET", KEYS[1]))
if not tat then return 0 end
local now = redis.call("TIME")
now = (now[1] - 1483228800) + (now[2] / 1000000)
local new_tat = tat - tonumber(ARGV[1])
if new_tat <= now then
  redis.call("DEL", KEYS[1])
else
  redis.call("SET", KEYS[1], new_tat, "EX", math.ceil(new_tat - now))
end
return 1
`)

// reserve spends one failure of each counter before the credential is
// checked: the check of the count and its spending are one atomic step in
// Redis (redis_rate's GCRA script), so attempts sent at once cannot all
// pass the check before any of them is counted (1,000 wrong keys sent
// together once had 954 checked against a limit of 20). When a count is
// used up it gives back what it spent and refuses the attempt with the
// time until the next one is allowed. It returns the counters it spent on,
// for release.
func (l *FailureLimiter) reserve(ctx context.Context, counters []string) ([]string, error) {
	if l == nil || len(counters) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	var spent []string
	for _, c := range counters {
		res, err := l.rl.AllowN(ctx, c, l.limit, 1)
		if err != nil {
			l.log.WarnContext(ctx, "failed-attempt limit not checked: redis did not answer", "error", err.Error())
			return spent, nil
		}
		if res.Allowed == 0 {
			l.release(ctx, spent)
			return nil, tooManyFailures(res.RetryAfter)
		}
		spent = append(spent, c)
	}
	return spent, nil
}

// tooManyFailures is the refusal of an attempt while its count is used up;
// retryAfter is the time until the count allows one more.
func tooManyFailures(retryAfter time.Duration) *problem.Error {
	p := problem.New(problem.TooManyRequests, CodeTooManyFailedAttempts,
		"Too many failed authentication attempts; retry in "+strconv.Itoa(max(1, int(retryAfter.Round(time.Second).Seconds())))+" s.")
	p.RetryAfter = retryAfter
	return p
}

// admit lets one more check of counters cs run on this replica unless one
// of them already has the limit's worth of checks running, and returns the
// function that ends it. Each check in flight has spent a failure of its
// counts and not yet given it back, so a check past the limit would be
// refused by the count in Redis anyway; admit refuses it without asking
// Redis. Without it, attempts sent at once made the limit ask Redis as
// many times at once, and on a loaded replica the answers that took longer
// than redisTimeout let their attempts through: of 1,000 wrong keys sent
// at once from one address, 427 to 698 were checked. Now one address has
// at most the limit's worth of questions to Redis in flight per replica.
func (l *FailureLimiter) admit(cs []string) (done func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cs {
		if l.inFlight[c] >= l.limit.Burst {
			return nil, false
		}
	}
	for _, c := range cs {
		l.inFlight[c]++
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, c := range cs {
			if l.inFlight[c]--; l.inFlight[c] <= 0 {
				delete(l.inFlight, c)
			}
		}
	}, true
}

// release gives back the failures that reserve spent, for an attempt that
// did not fail.
func (l *FailureLimiter) release(ctx context.Context, spent []string) {
	if l == nil || len(spent) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer cancel()
	interval := l.limit.Period.Seconds() / float64(l.limit.Rate)
	for _, c := range spent {
		// redis_rate stores its counts under its own "rate:" prefix.
		if err := refund.Run(ctx, l.rc, []string{"rate:" + c}, interval).Err(); err != nil {
			l.log.WarnContext(ctx, "successful attempt not given back: redis did not answer", "error", err.Error())
			return
		}
	}
}

// checkTimeout bounds a shared check of a credential (guard), which no
// single request's cancellation stops.
const checkTimeout = 10 * time.Second

// guard runs attempt, the check of credential, unless a count of the
// attempt is used up: it spends a failure of each count first (reserve)
// and gives it back unless the attempt is refused for its credential. A
// missing credential (not_authenticated) and a malformed token request are
// not attempts.
//
// Attempts with the same credential and counts that run at once share one
// check and one spent failure: a client that sends its new token or key
// with 32 requests at once is not refused for having 32 checks in flight,
// and a guesser gains nothing, as only different credentials are guesses.
// So attempt must only check: what it returns is handed to every caller
// that shares it (a token pair is issued after it, for each caller).
func guard[T any](ctx context.Context, l *FailureLimiter, credential string, attempt func(context.Context) (T, error)) (T, error) {
	cs := counters(ctx)
	if l == nil || len(cs) == 0 {
		return attempt(ctx)
	}
	h := sha256.Sum256([]byte(credential))
	flight := strings.Join(cs, "\x00") + "\x00" + string(h[:])
	v, err, _ := l.flights.Do(flight, func() (any, error) {
		// The check is shared: the first caller's hang-up must not fail
		// the others.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkTimeout)
		defer cancel()
		done, ok := l.admit(cs)
		if !ok {
			// The checks in flight will spend the whole count if they
			// fail: one more is allowed an emission interval after that.
			return nil, tooManyFailures(l.limit.Period / time.Duration(l.limit.Rate))
		}
		defer done()
		spent, err := l.reserve(ctx, cs)
		if err != nil {
			return nil, err
		}
		out, err := attempt(ctx)
		if p, ok := problem.As(err); !ok || p.Kind != problem.Unauthenticated || p.Code == CodeNotAuthenticated {
			l.release(ctx, spent)
		}
		return out, err
	})
	out, _ := v.(T)
	return out, err
}

// CheckLogin runs right, the check of a login that is neither an API key
// nor a token (the MONITORING_USER login of the dashboard and the migration
// page), under the count of the client address in ctx, as guard runs the
// check of a key: one failure is spent before right runs and given back if
// it returns true, and while the count is used up it returns a 429
// CodeTooManyFailedAttempts problem without calling right. credential is
// the login as given, which only identifies checks that can be shared. No
// count is kept per login: guesses at it from one address must not lock its
// holder out at every other address. A wrong login is counted for
// monitoring under the channel of ctx (WithChannel), or ChannelMonitoring.
func (l *FailureLimiter) CheckLogin(ctx context.Context, credential string, right func() bool) (bool, error) {
	ok, err := guard(ctx, l, credential, func(context.Context) (bool, error) {
		if right() {
			return true, nil
		}
		return false, errWrongLogin
	})
	l.countFailure(channelOf(ctx, ChannelMonitoring), err)
	if errors.Is(err, errWrongLogin) {
		return false, nil
	}
	return ok, err
}

// errWrongLogin is the failure of a CheckLogin: an Unauthenticated problem,
// so that guard counts it.
var errWrongLogin = problem.New(problem.Unauthenticated, CodeAuthenticationFailed, "Wrong login.")

// CheckLogin is FailureLimiter.CheckLogin with the limiter of s (none
// without WithFailureLimiter).
func (s *Service) CheckLogin(ctx context.Context, credential string, right func() bool) (bool, error) {
	return s.limiter.CheckLogin(ctx, credential, right)
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
