package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// client talks to the service over HTTP with an API key: it obtains access
// tokens through the GraphQL mutation, refreshes them before they expire,
// and retries what the service asks to be retried.
type client struct {
	base    string
	apiKey  string
	hc      *http.Client
	timeout time.Duration
	// maxTransient is how many times a request is retried after a 500, a
	// time-out, a refused connection or a 401 before it gives up.
	maxTransient int
	newBackOff   func() backoff.BackOff

	mu         sync.Mutex
	token      string
	renewAt    time.Time // when the token has used 80% of its life
	refresh    string
	refreshExp time.Time

	refreshes atomic.Int64 // tokens obtained after the first
}

// errConnection says the service could not be reached within the retry
// limit: the run stops (exit 2) and its journal lets the next one go on.
type errConnection struct{ err error }

func (e *errConnection) Error() string { return "cannot reach the service: " + e.err.Error() }
func (e *errConnection) Unwrap() error { return e.err }

// errUsage is a refusal that no retry mends (a bad API key): exit 2.
type errUsage struct{ msg string }

func (e *errUsage) Error() string { return e.msg }

const tokenMutation = `mutation($input: ObtainJSONWebTokenInput!) { obtainServiceToken(input: $input) { token payload refreshToken refreshExpiresIn } }`

// accessToken returns a token with at least a fifth of its life left,
// refreshing it (with the refresh token, else the API key) when needed.
// force renews it whatever its age, after a 401.
func (c *client) accessToken(ctx context.Context, force bool) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.token != "" && !force && now.Before(c.renewAt) {
		return c.token, nil
	}
	first := c.token == ""
	if c.refresh != "" && now.Before(c.refreshExp.Add(-time.Minute)) {
		err := c.obtain(ctx, map[string]any{"refreshToken": c.refresh})
		if err == nil {
			c.refreshes.Add(1)
			return c.token, nil
		}
		var u *errUsage
		if !errors.As(err, &u) {
			return "", err
		}
		// A refused refresh token (its session ended or was revoked):
		// the API key starts a new one.
	}
	if err := c.obtain(ctx, map[string]any{"APIKey": c.apiKey}); err != nil {
		return "", err
	}
	if !first {
		c.refreshes.Add(1)
	}
	return c.token, nil
}

// obtain runs the token mutation with input, retrying transport failures.
func (c *client) obtain(ctx context.Context, input map[string]any) error {
	body, _ := json.Marshal(map[string]any{"query": tokenMutation, "variables": map[string]any{"input": input}})
	transient := 0
	// retry reports a failure to retry, until maxTransient are spent; then
	// it is the connection's failure.
	retry := func(err error) (struct{}, error) {
		if transient++; transient > c.maxTransient {
			return struct{}{}, backoff.Permanent(&errConnection{err})
		}
		return struct{}{}, err
	}
	op := func() (struct{}, error) {
		raw, status, _, err := c.send(ctx, http.MethodPost, "/v1/graphql/", "", body)
		var usage *errUsage
		if errors.As(err, &usage) {
			return struct{}{}, backoff.Permanent(err)
		}
		if err != nil || status >= 500 || status == http.StatusTooManyRequests {
			if err == nil {
				err = fmt.Errorf("token request answered %d", status)
			}
			return retry(err)
		}
		var out struct {
			Data struct {
				ObtainServiceToken *struct {
					Token            string `json:"token"`
					RefreshToken     string `json:"refreshToken"`
					RefreshExpiresIn int64  `json:"refreshExpiresIn"`
					Payload          struct {
						Iat int64 `json:"iat"`
						Exp int64 `json:"exp"`
					} `json:"payload"`
				} `json:"obtainServiceToken"`
			} `json:"data"`
			Errors []struct {
				Message    string `json:"message"`
				Extensions struct {
					ErrorCode string `json:"errorCode"`
					ErrorType string `json:"errorType"`
				} `json:"extensions"`
			} `json:"errors"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return struct{}{}, backoff.Permanent(&errUsage{fmt.Sprintf("token request: %d %s", status, oneLine(raw))})
		}
		// GraphQL answers a failure with HTTP 200: the service's own failure
		// (INTERNAL: PostgreSQL restarting, say) and a throttle are retried
		// as their 500 and 429 would be, not taken for a refused key.
		if len(out.Errors) > 0 {
			if e := out.Errors[0].Extensions; e.ErrorType == "INTERNAL" || e.ErrorType == "THROTTLED" {
				return retry(fmt.Errorf("token request failed: %s: %s", e.ErrorCode, out.Errors[0].Message))
			}
		}
		t := out.Data.ObtainServiceToken
		if len(out.Errors) > 0 || t == nil || t.Token == "" {
			msg := "no token in the answer"
			if len(out.Errors) > 0 {
				msg = out.Errors[0].Extensions.ErrorCode + ": " + out.Errors[0].Message
			}
			return struct{}{}, backoff.Permanent(&errUsage{"token request refused: " + msg})
		}
		iat, exp := time.Unix(t.Payload.Iat, 0), time.Unix(t.Payload.Exp, 0)
		if t.Payload.Exp == 0 || !exp.After(iat) {
			iat, exp = time.Now(), time.Now().Add(time.Minute)
		}
		// Renewing at 80% of the lifetime leaves room for the requests in
		// flight, whatever the lifetime is. The service counts it from a
		// whole second, so when this machine's clock agrees that less is
		// left, 80% of that; a clock far off is not trusted.
		life := exp.Sub(iat)
		if left := time.Until(exp); left > 0 && left < life {
			life = left
		}
		c.token, c.renewAt = t.Token, time.Now().Add(life*4/5)
		c.refresh, c.refreshExp = t.RefreshToken, time.Unix(t.RefreshExpiresIn, 0)
		return struct{}{}, nil
	}
	_, err := backoff.Retry(ctx, op, backoff.WithBackOff(c.newBackOff()), backoff.WithMaxElapsedTime(0))
	return err
}

// send makes one request; its context is cut loose from ctx's cancellation
// so that Ctrl-C lets it finish.
func (c *client) send(ctx context.Context, method, path, token string, body []byte) ([]byte, int, http.Header, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, method, c.base+path, rd)
	if err != nil {
		return nil, 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Token "+token)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, 0, nil, err
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 && res.StatusCode < 400 {
		return nil, res.StatusCode, res.Header, &errUsage{fmt.Sprintf(
			"the service answered %d, a redirect to %q: importctl follows no redirect, as it would send the API key or token along "+
				"(a 307 re-sends the token request, key included, to wherever it points); give the final address with --url",
			res.StatusCode, res.Header.Get("Location"))}
	}
	raw, err := io.ReadAll(io.LimitReader(res.Body, 32<<20))
	if err != nil {
		return nil, 0, nil, err
	}
	return raw, res.StatusCode, res.Header, nil
}

// answer is the service's final answer to one request.
type answer struct {
	Status int
	Body   []byte
}

// counts are what do adds to its step's statistics.
type counts struct {
	retries  int // requests sent again, for any reason
	waits429 int // of which after a 429
}

// do sends the request until it gets an answer that is not to be retried:
// a 429 waits (Retry-After, else exponential backoff with jitter) as often
// as it comes; a 500, a time-out, a refused connection or a 401 is retried
// up to maxTransient times. After that a 5xx is the answer, and a transport
// failure an *errConnection. ctx's cancellation stops the waiting between
// tries (and is returned), never a request in flight.
func (c *client) do(ctx context.Context, method, path string, body []byte, n *counts) (answer, error) {
	transient := 0
	forceToken := false
	tries := 0
	op := func() (answer, error) {
		if tries++; tries > 1 {
			n.retries++
		}
		tok, err := c.accessToken(ctx, forceToken)
		if err != nil {
			return answer{}, backoff.Permanent(err)
		}
		forceToken = false
		raw, status, hdr, err := c.send(ctx, method, path, tok, body)
		var usage *errUsage
		switch {
		case errors.As(err, &usage):
			return answer{}, backoff.Permanent(err)
		case err != nil:
			if transient++; transient > c.maxTransient {
				return answer{}, backoff.Permanent(&errConnection{err})
			}
			return answer{}, err
		case status == http.StatusTooManyRequests:
			n.waits429++
			return answer{}, retryAfter(hdr, errors.New("429"))
		case status == http.StatusUnauthorized:
			forceToken = true
			if transient++; transient > c.maxTransient {
				return answer{Status: status, Body: raw}, nil
			}
			return answer{}, errors.New("401")
		case status >= 500:
			if transient++; transient > c.maxTransient {
				return answer{Status: status, Body: raw}, nil
			}
			return answer{}, retryAfter(hdr, fmt.Errorf("%d", status))
		}
		return answer{Status: status, Body: raw}, nil
	}
	return backoff.Retry(ctx, op, backoff.WithBackOff(c.newBackOff()), backoff.WithMaxElapsedTime(0))
}

// retryAfter is err, or a wait of the header's seconds when the answer
// names one.
func retryAfter(h http.Header, err error) error {
	if s, e := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); e == nil && s > 0 {
		return backoff.RetryAfter(s)
	}
	return err
}

func oneLine(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// refuseRedirects is the CheckRedirect of the client's HTTP client: a
// redirect is returned as the answer (send refuses it) rather than
// followed. Go's client drops the Authorization header on a redirect to
// another host, but re-sends the body of a 307 or 308, and the body of the
// token request holds the API key.
func refuseRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// InsecureURL reports whether base is a plain http:// URL to a host other
// than this machine (localhost or a loopback address), across which the
// API key and the tokens would travel in clear.
func InsecureURL(base string) bool {
	u, err := url.Parse(base)
	if err != nil || !strings.EqualFold(u.Scheme, "http") {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err != nil || !ip.IsLoopback()
}
