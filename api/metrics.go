package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/bulkimport/bulkimport/jobs/metrics"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

const metricsKey = "metrics"

// standardMethods bound the method label: a request with a made-up method
// is counted as OTHER rather than creating a series of its own.
var standardMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// observeRequests counts every request by route pattern and status and
// times it, and makes m available to writeError. The route is Gin's
// pattern (FullPath), never the raw path, because paths carry account
// numbers; a request that matched no route is "unmatched".
func observeRequests(m *metrics.Metrics) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Set(metricsKey, m)
		start := time.Now()
		// Deferred, so that a streamed list aborted with
		// http.ErrAbortHandler is still counted.
		defer func() {
			route := c.FullPath()
			if route == "" {
				route = metrics.Unmatched
			}
			method := c.Request.Method
			if !standardMethods[method] {
				method = "OTHER"
			}
			m.ObserveHTTP(method, route, c.Writer.Status(), time.Since(start))
		}()
		c.Next()
	}
}

// countValidationErrors counts each problem of an Invalid error (a 400) by
// its code. writeError calls it, since every error is rendered there.
func countValidationErrors(c *gin.Context, p *problem.Error) {
	if p.Kind != problem.Invalid {
		return
	}
	v, _ := c.Get(metricsKey)
	m, _ := v.(*metrics.Metrics)
	for _, e := range p.Errors {
		m.ValidationError(e.Code)
	}
}
