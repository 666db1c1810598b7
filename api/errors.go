package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// statusOf is the one table that maps error kinds to HTTP statuses.
var statusOf = map[problem.Kind]int{
	problem.Invalid:           http.StatusBadRequest,
	problem.NotFound:          http.StatusNotFound,
	problem.Unauthenticated:   http.StatusUnauthorized,
	problem.TooManyRequests:   http.StatusTooManyRequests,
	problem.Unavailable:       http.StatusServiceUnavailable,
	problem.Timeout:           http.StatusServiceUnavailable,
	problem.TooLarge:          http.StatusRequestEntityTooLarge,
	problem.UnsupportedMedia:  http.StatusUnsupportedMediaType,
	problem.MethodNotAllowed:  http.StatusMethodNotAllowed,
	problem.RetryableUpstream: http.StatusInternalServerError,
	problem.Internal:          http.StatusInternalServerError,
}

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
	p, ok := problem.As(err)
	if !ok || p.Kind == problem.Internal {
		logger(c).ErrorContext(c.Request.Context(), "internal error",
			"request_id", requestID(c), "route", c.FullPath(), "error", err.Error())
		p = problem.New(problem.Internal, problem.CodeInternal,
			"An unexpected error occurred. Quote request id "+requestID(c)+" when reporting it.")
	}
	countValidationErrors(c, p)
	c.AbortWithStatusJSON(prepare(c.Writer.Header(), p), errorBody(p))
}

// writeProblem renders p on a plain http.ResponseWriter, for the handlers
// that Gin does not run (the dashboard's basic auth).
func writeProblem(w http.ResponseWriter, p *problem.Error) {
	status := prepare(w.Header(), p)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody(p))
}

// prepare sets the headers that go with p and returns its status.
func prepare(h http.Header, p *problem.Error) int {
	status, found := statusOf[p.Kind]
	if !found {
		status = http.StatusInternalServerError
	}
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(max(1, int(p.RetryAfter.Seconds()))))
	}
	if status == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
		h.Set("WWW-Authenticate", `Token realm="api"`)
	}
	return status
}
