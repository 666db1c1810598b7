package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/validate"
)

// A request whose client hung up while its body was being checked ends
// with the cancellation that validate.Checkpoint returns, wrapped by the
// endpoint's code: it is logged as a closed request (INFO, status 499),
// never as an internal error or a 500.
func TestWriteError_ACancelledValidationIsAClosedRequest(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := gin.New()
	e.Use(withRequestID, withLogger(slog.New(slog.NewJSONHandler(&buf, nil))), logRequests)
	e.POST("/business/", func(c *gin.Context) {
		if err := validate.Checkpoint(c.Request.Context(), validate.Parsed); err != nil {
			writeError(c, fmt.Errorf("business: %w", err))
			return
		}
		c.Status(201)
	})
	gone, hangUp := context.WithCancel(context.Background())
	hangUp()
	for _, ctx := range []context.Context{gone, context.Background()} {
		req := httptest.NewRequest("POST", "/business/", nil).WithContext(ctx)
		req.Header.Set("X-Request-Id", "r1")
		e.ServeHTTP(httptest.NewRecorder(), req)
	}

	type line struct {
		Level, Msg, RequestID string
		Status                float64
	}
	var got []line
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line %s: %v", sc.Bytes(), err)
		}
		level, _ := l["level"].(string)
		msg, _ := l["msg"].(string)
		id, _ := l["request_id"].(string)
		status, _ := l["status"].(float64)
		got = append(got, line{level, msg, id, status})
	}
	want := []line{
		{"INFO", "client closed the request", "r1", 0},
		{"INFO", "request", "r1", StatusClientClosedRequest},
		{"INFO", "request", "r1", 201},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}
