package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/bulkimport/bulkimport/jobs/auth"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

const (
	requestIDKey = "request_id"
	principalKey = "principal"
	loggerKey    = "logger"
)

func requestID(c *gin.Context) string { return c.GetString(requestIDKey) }

type requestIDCtxKey struct{}

// requestIDFrom returns the request id stored in ctx, for code that sees only
// a context (GraphQL resolvers).
func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDCtxKey{}).(string)
	return id
}

// withRequestID takes the caller's X-Request-Id when it is short and plain,
// otherwise makes one, and echoes it in the response.
func withRequestID(c *gin.Context) {
	id := c.GetHeader("X-Request-Id")
	if id == "" || len(id) > 64 || strings.ContainsFunc(id, func(r rune) bool { return r < '!' || r > '~' }) {
		b := make([]byte, 8)
		rand.Read(b)
		id = hex.EncodeToString(b)
	}
	c.Set(requestIDKey, id)
	c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), requestIDCtxKey{}, id))
	c.Header("X-Request-Id", id)
	c.Next()
}

// withClientAddr stores the client's address in the request's context for
// the failed-authentication limit (auth.FailureLimiter). It is the
// connection's address, or what X-Forwarded-For says when the connection
// comes from one of Config.TrustedProxies (gin's ClientIP).
func withClientAddr(c *gin.Context) {
	c.Request = c.Request.WithContext(auth.WithClientAddr(c.Request.Context(), c.ClientIP()))
	c.Next()
}

// withLogger makes log available to the middleware and to writeError, which
// are plain functions shared by every engine of this package.
func withLogger(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Set(loggerKey, log)
		c.Next()
	}
}

// logger returns the logger that withLogger stored. Every engine this
// package builds runs withLogger before any handler that logs; a context
// without it (a handler exercised on its own in a test) logs to stderr
// rather than nowhere.
func logger(c *gin.Context) *slog.Logger {
	if l, ok := c.Get(loggerKey); ok {
		return l.(*slog.Logger)
	}
	return stderrLogger
}

var stderrLogger = slog.New(slog.NewJSONHandler(os.Stderr, nil))

// logRequests writes one line per request. It logs the route pattern, never
// the raw path, because paths carry account numbers (personal data).
func logRequests(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	attrs := []any{"request_id", requestID(c), "method", c.Request.Method, "route", route,
		"status", c.Writer.Status(), "duration_ms", float64(time.Since(start).Microseconds()) / 1000,
		"bytes", c.Writer.Size()}
	if code := c.GetString(errorCodeKey); code != "" {
		attrs = append(attrs, "code", code)
	}
	supplier, number := c.Param("supplier"), c.Param("ean")
	if s, ok := c.Get(subjectKey); ok {
		if body := *s.(*validate.Subject); body != (validate.Subject{}) {
			supplier, number = body.Supplier, body.Number
		}
	}
	if supplier != "" {
		attrs = append(attrs, "supplier", supplier)
	}
	if number != "" {
		attrs = append(attrs, "external_account_number", number)
	}
	logger(c).InfoContext(c.Request.Context(), "request", attrs...)
}

// Keys of what the request log reports besides the request itself: the
// error code written, and the supplier and account a body names (noted by
// the code that parses the body, validate.NoteSubject), so that an operator
// can find the lines of one account.
const (
	errorCodeKey = "error_code"
	subjectKey   = "subject"
)

// bodyReadKey is set once readJSON has read the whole request body.
const bodyReadKey = "body_read"

// recoverPanics turns a panic into a logged 500 with the section 7 body, so
// that no stack trace reaches a caller.
func recoverPanics(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if err, ok := r.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(r)
			}
			logger(c).ErrorContext(c.Request.Context(), "panic", "request_id", requestID(c), "route", c.FullPath(), "panic", r)
			writeError(c, problem.New(problem.Internal, problem.CodeInternal, "panic"))
		}
	}()
	c.Next()
}

// readJSON reads the request body within the size limit and checks that it is
// declared as JSON. The body is returned raw: validators decode it themselves
// so that they can report positions and exact numbers.
func (s *Server) readJSON(c *gin.Context) ([]byte, error) {
	return s.readJSONLimit(c, s.cfg.MaxBodyBytes)
}

// maxBodyPresize bounds the buffer readAllSized allocates from a request's
// Content-Length before any of the body has arrived, so that a client that
// announces a large body and sends none costs no more than this.
const maxBodyPresize = 64 << 10

// readAllSized is io.ReadAll into a buffer of size+1 bytes at first (the
// one more byte takes the read that meets the end), grown as io.ReadAll
// grows it only when the body is longer: a body read from 512 bytes up by
// doubling left twice its size as garbage per request.
func readAllSized(r io.Reader, size int64) ([]byte, error) {
	b := make([]byte, 0, max(size, 511)+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // room to read into, as io.ReadAll makes
		}
	}
}

// readJSONLimit is readJSON with a limit of its own; the reader stops at
// limit bytes, so a larger body is never held in memory.
func (s *Server) readJSONLimit(c *gin.Context, limit int64) ([]byte, error) {
	ct := c.GetHeader("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil, problem.New(problem.UnsupportedMedia, "unsupported_media_type",
			"The request body must be JSON, sent with Content-Type: application/json.")
	}
	// The deadline is set here, not as the server's ReadTimeout: that one
	// stays on the connection after the body is read, and its expiry would
	// cancel the context of a request still being answered (E5 waits, lists
	// stream).
	rc := http.NewResponseController(c.Writer)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout))
	body, err := readAllSized(http.MaxBytesReader(c.Writer, c.Request.Body, limit), min(c.Request.ContentLength, limit, maxBodyPresize))
	if err == nil {
		// After a failed read the deadline stays: net/http then gives up
		// draining the rest of the body at once and closes the connection
		// after the answer.
		_ = rc.SetReadDeadline(time.Time{})
		c.Set(bodyReadKey, true)
		subject := &validate.Subject{}
		c.Set(subjectKey, subject)
		c.Request = c.Request.WithContext(validate.WithSubject(c.Request.Context(), subject))
	}
	if err == nil {
		if err := s.chargeBody(c, body); err != nil {
			return nil, err
		}
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, problem.New(problem.TooLarge, "request_too_large",
			"The request body exceeds the limit of "+byteSize(limit)+".")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, problem.New(problem.Invalid, "request_body_timeout",
			"The request body was not received within "+s.cfg.BodyReadTimeout.String()+".")
	}
	if err != nil {
		return nil, problem.New(problem.Invalid, validate.CodeParseError, "The request body could not be read.")
	}
	return body, nil
}

// LargeBody is the size from which a request body is charged to the
// replica's budget of body memory (Config.BodyMemory). Smaller bodies,
// nearly all of them, are free: each is bounded (its parse holds at most
// about 10 MB, by validate.ParseMemory), and so are the requests one key
// has in flight.
const LargeBody = 64 << 10

// bodyCost is what a body is charged: what the request holds because of
// it, counted twice. It holds the body as read, what its parse builds
// (validate.ParseMemory: the values, not the bytes; a 2 MB body of a
// million numbers builds 88 MB of tree, a 2 MB string almost nothing), and
// what the binding builds from the tree while the tree is still reachable:
// a quarter more (E7's transactions, the most, build a fifth). It counts
// twice because the request's memory stays in the heap after it ends, as
// garbage, until the collector runs, and Go's collector (GOGC=100) lets
// the heap grow to twice what it found in use: charged about once (52
// times their size), 64 E1 bodies of a million numbers grew the process
// by 2.1 times BODY_MEMORY.
func bodyCost(body []byte) int64 {
	return 2 * (int64(cap(body)) + validate.ParseMemory(body)*5/4)
}

// codeTooManyLargeRequests (429) refuses a large body when the replica's
// budget of body memory stays spent for HTTP_BODY_READ_TIMEOUT.
const codeTooManyLargeRequests = "too_many_large_requests"

// chargeBody charges a body to the replica's budget of body memory
// (bodyCost) until the request ends (releaseBody), waiting for room up to
// the body timeout: without it, 16 requests of 2 MB held 1.75 GB of parsed
// trees, and 64 per key about 6.7 GB. The charge is taken at once, before
// the parse, so that no request holds part of the budget while it waits
// for more. A charge is at most the whole budget, so a body alone always
// fits.
func (s *Server) chargeBody(c *gin.Context, body []byte) error {
	if len(body) < LargeBody || s.bodies == nil {
		return nil
	}
	cost := min(bodyCost(body), s.cfg.BodyMemory)
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.BodyReadTimeout)
	defer cancel()
	if err := s.bodies.Acquire(ctx, cost); err != nil {
		p := problem.New(problem.TooManyRequests, codeTooManyLargeRequests,
			"The service is parsing as many large request bodies as its memory allows; retry shortly, or send smaller batches.")
		p.RetryAfter = time.Second
		return p
	}
	c.Set(bodyCostKey, cost)
	return nil
}

// releaseBody gives back the request's charge of body memory once every
// handler has returned.
func (s *Server) releaseBody(c *gin.Context) {
	c.Next()
	if cost, ok := c.Get(bodyCostKey); ok {
		s.bodies.Release(cost.(int64))
	}
}

// bodyCostKey holds what chargeBody charged for the request's body.
const bodyCostKey = "body_cost"

func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return itoa(n>>10) + " KiB"
	}
	return itoa(n) + " bytes"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// boundBodyRead puts the body's read deadline (Config.BodyReadTimeout) on
// a request that has a body before anything else runs. A client could
// otherwise announce a body, send none, and hold its connection for ever:
// net/http drains up to 256 KiB of an unread body before it answers, with
// no deadline of its own, and a refusal before the body is read
// (authentication, 404) never reads it. 1,000 unauthenticated POSTs that
// announced 200,000 bytes and stayed silent held 1,000 connections past
// 60 s. readJSON sets the deadline anew and clears it once the body is
// read; a request refused without reading it keeps it.
func (s *Server) boundBodyRead(c *gin.Context) {
	if c.Request.ContentLength != 0 {
		_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout))
	}
	c.Next()
}

// closeUnreadBody makes a refusal that comes before the request body is
// read close the connection at once instead of reading a body that no one
// will look at (see boundBodyRead): a client that is refused its
// credentials does not get the body timeout to hold the connection.
func closeUnreadBody(c *gin.Context) {
	if c.Request.ContentLength == 0 || c.GetBool(bodyReadKey) {
		return
	}
	c.Header("Connection", "close")
	_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now())
}

// authenticate requires an Authorization header in one of the forms of
// auth.AuthenticateHeader and stores the principal for the handlers.
func (s *Server) authenticate(c *gin.Context) {
	p, err := s.auth.AuthenticateHeader(c.Request.Context(), c.GetHeader("Authorization"))
	if err != nil {
		closeUnreadBody(c)
		writeError(c, err)
		return
	}
	c.Set(principalKey, p)
	c.Next()
}

func principal(c *gin.Context) auth.Principal {
	p, _ := c.Get(principalKey)
	pr, _ := p.(auth.Principal)
	return pr
}

// clearWriteDeadline removes a write deadline left on a keep-alive
// connection by the previous response: a streamed list keeps its last
// per-write deadline in place so that net/http's final flush is bounded too,
// and the next request on the connection must not inherit it.
func clearWriteDeadline(c *gin.Context) {
	_ = http.NewResponseController(c.Writer).SetWriteDeadline(time.Time{})
	c.Next()
}

// callerKey names whose caps a request counts against (limitInFlight,
// poolShares): its API key, or, on the migration page, the key sent as
// the password or the operator's login (operatorCaller).
func callerKey(c *gin.Context) int64 {
	if v, ok := c.Get(callerKeyKey); ok {
		if id, ok := v.(int64); ok {
			return id
		}
	}
	return principal(c).KeyID
}

// callerKeyKey holds the caller's id where it is not an API principal's
// (the migration page).
const callerKeyKey = "caller_key"

// operatorCaller is the callerKey of the MONITORING_USER login on the
// migration page. API key ids start at 1.
const operatorCaller int64 = -1

// limitInFlight refuses a request when the caller's API key already has max
// requests in flight on this replica. Without it one client holding many
// slow requests (lists it does not read, E5 calls it abandons) could take
// every database connection and stall every other client. The count is per
// replica, as the database pool it protects is.
func limitInFlight(max int) gin.HandlerFunc {
	var mu sync.Mutex
	inFlight := map[int64]int{}
	return func(c *gin.Context) {
		key := callerKey(c)
		mu.Lock()
		n := inFlight[key]
		if n >= max {
			mu.Unlock()
			p := problem.New(problem.TooManyRequests, "too_many_requests_in_flight",
				"This API key has "+strconv.Itoa(max)+" requests in progress; wait for one to finish.")
			p.RetryAfter = time.Second
			closeUnreadBody(c)
			writeError(c, p)
			return
		}
		inFlight[key] = n + 1
		mu.Unlock()
		defer func() {
			mu.Lock()
			if inFlight[key]--; inFlight[key] == 0 {
				delete(inFlight, key)
			}
			mu.Unlock()
		}()
		c.Next()
	}
}

// poolShareWait is how long a request waits for its key's share of the
// database pool (poolShares) before it is refused.
const poolShareWait = 30 * time.Second

// poolShares lets at most share requests of one API key run at once on
// this replica; the others wait for a slot up to wait, then get 429
// too_many_requests_in_flight. Requests hold database connections, and
// MAX_IN_FLIGHT_PER_KEY (64) is more than the pool has (20 by default):
// without a share, one key's requests could take every connection, and
// every other supplier's would wait. Every route that reads or writes the
// database for a key takes it (TestRoutes_EveryDatabaseRouteTakesTheKeysShare);
// the reconciliation stream once did not, and 16 of one key's took the
// pool and another supplier's E10 to a 2.5 s median. share zero caps
// nothing.
type poolShares struct {
	share int
	wait  time.Duration
	mu    sync.Mutex
	slots map[int64]chan struct{}
	users map[int64]int
}

func newPoolShares(share int, wait time.Duration) *poolShares {
	return &poolShares{share: share, wait: wait, slots: map[int64]chan struct{}{}, users: map[int64]int{}}
}

// acquire waits for one of key's slots until ctx ends or the wait is
// over; it returns the release, or false when no slot came.
func (p *poolShares) acquire(ctx context.Context, key int64) (release func(), ok bool) {
	p.mu.Lock()
	sem, found := p.slots[key]
	if !found {
		sem = make(chan struct{}, p.share)
		p.slots[key] = sem
	}
	p.users[key]++
	p.mu.Unlock()
	leave := func() {
		p.mu.Lock()
		if p.users[key]--; p.users[key] == 0 {
			delete(p.users, key)
			delete(p.slots, key)
		}
		p.mu.Unlock()
	}
	timer := time.NewTimer(p.wait)
	defer timer.Stop()
	select {
	case sem <- struct{}{}:
		return func() { <-sem; leave() }, true
	case <-ctx.Done():
	case <-timer.C:
	}
	leave()
	return nil, false
}

// handler is the middleware that takes the caller's slot for the request.
func (p *poolShares) handler() gin.HandlerFunc {
	if p.share <= 0 {
		return func(c *gin.Context) { c.Next() }
	}
	return func(c *gin.Context) {
		release, ok := p.acquire(c.Request.Context(), callerKey(c))
		if !ok {
			if err := c.Request.Context().Err(); err != nil {
				writeError(c, err)
				return
			}
			e := problem.New(problem.TooManyRequests, "too_many_requests_in_flight",
				"This API key has "+strconv.Itoa(p.share)+" requests using the database on this replica; wait for one to finish.")
			e.RetryAfter = time.Second
			closeUnreadBody(c)
			writeError(c, e)
			return
		}
		defer release()
		c.Next()
	}
}
