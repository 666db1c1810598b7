package api

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// The data-import endpoints answer only the statuses of spec section 7.2;
// service-side failures are 500 with Retry-After, and only the readiness
// probe's kind is 503.
func TestWriteError_StatusAndRetryAfterByKind(t *testing.T) {
	t.Parallel()
	type answer struct {
		Status     int
		RetryAfter string
		Code       string
	}
	cases := []struct {
		name string
		err  *problem.Error
		want answer
	}{
		{"invalid", problem.New(problem.Invalid, "invalid", "x"), answer{400, "", "invalid"}},
		{"body too large", problem.New(problem.TooLarge, "request_too_large", "x"), answer{400, "", "request_too_large"}},
		{"body not JSON", problem.New(problem.UnsupportedMedia, "unsupported_media_type", "x"), answer{400, "", "unsupported_media_type"}},
		{"method not served", problem.New(problem.MethodNotAllowed, "method_not_allowed", "x"), answer{400, "", "method_not_allowed"}},
		{"not found", problem.New(problem.NotFound, "not_found", "x"), answer{404, "", "not_found"}},
		{"unauthenticated", problem.New(problem.Unauthenticated, "not_authenticated", "x"), answer{401, "", "not_authenticated"}},
		{"limit with its own Retry-After", &problem.Error{Kind: problem.TooManyRequests, Code: "concurrency_limit_exceeded", RetryAfter: 7 * time.Second},
			answer{429, "7", "concurrency_limit_exceeded"}},
		{"dependency down", problem.New(problem.Unavailable, "queue_unavailable", "x"), answer{500, "5", "queue_unavailable"}},
		{"still in progress", &problem.Error{Kind: problem.Timeout, Code: "account_processing_in_progress", RetryAfter: 2 * time.Second},
			answer{500, "2", "account_processing_in_progress"}},
		{"intermittent vendor failure", problem.New(problem.RetryableUpstream, "payment_vendor_unavailable", "x"), answer{500, "5", "payment_vendor_unavailable"}},
		{"unexpected", problem.New(problem.Internal, problem.CodeInternal, "x"), answer{500, "", problem.CodeInternal}},
		{"readiness probe", problem.New(problem.NotReady, "redis_unavailable", "x"), answer{503, "", "redis_unavailable"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest("GET", "/", nil)
			writeError(c, tc.err)
			var body map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %s: %v", w.Body.Bytes(), err)
			}
			got := answer{w.Code, w.Header().Get("Retry-After"), body["code"].(string)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
