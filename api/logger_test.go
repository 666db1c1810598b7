package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"
)

// The request log, a panic and the cause of a 500 go to the logger the
// engine was given, not to slog's default logger.
func TestLogger_EngineLogsToTheLoggerItWasGiven(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := gin.New()
	e.Use(withRequestID, withLogger(slog.New(slog.NewJSONHandler(&buf, nil))), logRequests, recoverPanics)
	e.GET("/fails", func(c *gin.Context) { writeError(c, errors.New("disk on fire")) })
	e.GET("/panics", func(c *gin.Context) { panic("kaboom") })
	for _, path := range []string{"/fails", "/panics"} {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("X-Request-Id", path[1:])
		e.ServeHTTP(httptest.NewRecorder(), req)
	}

	type line struct {
		Msg, RequestID, Error, Panic string
		Status                       float64
	}
	var got []line
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line %s: %v", sc.Bytes(), err)
		}
		msg, _ := l["msg"].(string)
		id, _ := l["request_id"].(string)
		cause, _ := l["error"].(string)
		p, _ := l["panic"].(string)
		status, _ := l["status"].(float64)
		got = append(got, line{msg, id, cause, p, status})
	}
	want := []line{
		{Msg: "internal error", RequestID: "fails", Error: "disk on fire"},
		{Msg: "request", RequestID: "fails", Status: 500},
		{Msg: "panic", RequestID: "panics", Panic: "kaboom"},
		{Msg: "internal error", RequestID: "panics", Error: "internal_error: panic"},
		{Msg: "request", RequestID: "panics", Status: 500},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}
