package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// statusOf is the one table that maps error kinds to HTTP statuses. The
// data-import endpoints answer only the statuses of spec section 7.2 (200,
// 201, 400, 401, 404, 429, 500):
//
//   - A failure of the service's side (a dependency down, a job that failed
//     after its retries or is still running after the wait, an intermittent
//     vendor failure) is 500, as 7.2 gives "unexpected error" and the
//     intermittent vendor failure, with its own code and a Retry-After
//     (retryAfterOf).
//   - A body too large or not JSON, and a method a path does not serve, are
//     400: the request cannot succeed in this form, and 7.2 has no 405, 413
//     or 415. Their codes (method_not_allowed, request_too_large,
//     unsupported_media_type) tell them apart.
//
// Only a readiness probe answers 503, for load balancers and orchestrators.
var statusOf = map[problem.Kind]int{
	problem.Invalid:           http.StatusBadRequest,
	problem.NotFound:          http.StatusNotFound,
	problem.Unauthenticated:   http.StatusUnauthorized,
	problem.TooManyRequests:   http.StatusTooManyRequests,
	problem.Unavailable:       http.StatusInternalServerError,
	problem.Timeout:           http.StatusInternalServerError,
	problem.TooLarge:          http.StatusBadRequest,
	problem.UnsupportedMedia:  http.StatusBadRequest,
	problem.MethodNotAllowed:  http.StatusBadRequest,
	problem.RetryableUpstream: http.StatusInternalServerError,
	problem.NotReady:          http.StatusServiceUnavailable,
	problem.Internal:          http.StatusInternalServerError,
}

// retryAfterOf is the Retry-After of the kinds a caller should retry as is,
// for an error that does not set its own: the service-side failures, which
// pass without the caller changing anything.
var retryAfterOf = map[problem.Kind]time.Duration{
	problem.Unavailable:       serviceRetryAfter,
	problem.Timeout:           serviceRetryAfter,
	problem.RetryableUpstream: serviceRetryAfter,
}

// codeDatabaseUnavailable is the code of a request, or a readiness probe,
// that found PostgreSQL out of reach.
const codeDatabaseUnavailable = "database_unavailable"

// serviceRetryAfter is a few seconds: long enough not to hammer a
// dependency that is restarting, short against a migration run.
const serviceRetryAfter = 5 * time.Second

// errorBody is the spec's section 7 body. Extra fields are merged at the top level.
func errorBody(p *problem.Error) gin.H {
	errs := p.Errors
	if errs == nil {
		errs = []problem.FieldError{}
	}
	body := gin.H{"detail": p.Detail, "code": p.Code, "errors": errs}
	for k, v := range p.Extra {
		body[k] = v
	}
	return body
}

// writeError renders any error as a section 7 body. Errors that are not
// *problem.Error, and Internal ones, are logged in full with the request id
// and shown to the caller only as a generic message.
func writeError(c *gin.Context, err error) {
	if clientGone(c, err) {
		// The client hung up (E5 and the vendor waits notice it while they
		// wait): no answer reaches it, and the service did nothing wrong,
		// so it is neither an ERROR line nor a 500 in the metrics.
		logger(c).InfoContext(c.Request.Context(), "client closed the request",
			"request_id", requestID(c), "route", c.FullPath(), "error", err.Error())
		c.AbortWithStatus(StatusClientClosedRequest)
		return
	}
	p, ok := problem.As(err)
	if (!ok || p.Kind == problem.Internal) && db.IsUnavailable(err) {
		// PostgreSQL restarting or out of reach: a service failure that
		// passes, answered as one (500, Retry-After) rather than as an
		// unexpected error that a client may not retry.
		logger(c).WarnContext(c.Request.Context(), "database unavailable",
			"request_id", requestID(c), "route", c.FullPath(), "error", err.Error())
		p, ok = problem.New(problem.Unavailable, codeDatabaseUnavailable, "The database is unavailable. Retry later."), true
	}
	if !ok || p.Kind == problem.Internal {
		logger(c).ErrorContext(c.Request.Context(), "internal error",
			"request_id", requestID(c), "route", c.FullPath(), "error", err.Error())
		p = problem.New(problem.Internal, problem.CodeInternal,
			"An unexpected error occurred. Quote request id "+requestID(c)+" when reporting it.")
	}
	countValidationErrors(c, p)
	c.Set(errorCodeKey, p.Code)
	c.Abort()
	writeProblem(c.Writer, p)
}

// StatusClientClosedRequest is the status logged and counted for a request
// whose client hung up before its answer: nginx's 499 "client closed
// request". No client ever receives it.
const StatusClientClosedRequest = 499

// clientGone reports whether the request failed because its client closed
// the connection: its context was cancelled, and the error is what the
// handler was doing then (context.Canceled from a wait, a driver's
// "canceling statement" from a query: an internal error). An answer of its
// own (a body read that timed out also cancels the request's context, and
// answers request_body_timeout) is still written.
func clientGone(c *gin.Context, err error) bool {
	if err == nil || !errors.Is(c.Request.Context().Err(), context.Canceled) {
		return false
	}
	p, ok := problem.As(err)
	return !ok || p.Kind == problem.Internal || errors.Is(err, context.Canceled)
}

// writeProblem renders p on a plain http.ResponseWriter, for the handlers
// that Gin does not run (the dashboard's basic auth).
func writeProblem(w http.ResponseWriter, p *problem.Error) {
	status := prepare(w.Header(), p)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	// Details quote what the caller sent ('<token>', 'a & b'); HTML escaping
	// would show them as \u003c and \u0026.
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(errorBody(p))
}

// prepare sets the headers that go with p and returns its status.
func prepare(h http.Header, p *problem.Error) int {
	status, found := statusOf[p.Kind]
	if !found {
		status = http.StatusInternalServerError
	}
	retryAfter := p.RetryAfter
	if retryAfter <= 0 {
		retryAfter = retryAfterOf[p.Kind]
	}
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(max(1, int(retryAfter.Seconds()))))
	}
	if status == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
		h.Set("WWW-Authenticate", `Token realm="api"`)
	}
	return status
}
