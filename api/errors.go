package api

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"bulkimport/jobs/problem"
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
		slog.ErrorContext(c.Request.Context(), "internal error",
			"request_id", requestID(c), "route", c.FullPath(), "error", err.Error())
		p = problem.New(problem.Internal, "internal_error",
			"An unexpected error occurred. Quote request id "+requestID(c)+" when reporting it.")
	}
	countValidationErrors(c, p)
	status, found := statusOf[p.Kind]
	if !found {
		status = http.StatusInternalServerError
	}
	if p.RetryAfter > 0 {
		secs := int(p.RetryAfter.Seconds())
		if secs < 1 {
			secs = 1
		}
		c.Header("Retry-After", strconv.Itoa(secs))
	}
	if status == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", `Token realm="api"`)
	}
	c.AbortWithStatusJSON(status, errorBody(p))
}
