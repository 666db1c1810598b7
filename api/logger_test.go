package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/process"
	"github.com/bulkimport/bulkimport/jobs/validate"
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

// A request line names the error code written and the supplier and account
// the request is about, from the path or from the body.
func TestLogger_RequestLineCarriesCodeSupplierAndAccount(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	s := &Server{cfg: Config{MaxBodyBytes: 1 << 20, BodyReadTimeout: time.Second}}
	e := gin.New()
	e.Use(withRequestID, withLogger(slog.New(slog.NewJSONHandler(&buf, nil))), logRequests)
	e.GET("/status/:supplier/:ean/", func(c *gin.Context) {
		writeError(c, problem.New(problem.NotFound, "import_process_not_found", "none"))
	})
	// E5's decoding, as process.Service.ProcessBody does it before the
	// account is processed.
	e.POST("/process/", func(c *gin.Context) {
		body, err := s.readJSON(c)
		if err != nil {
			writeError(c, err)
			return
		}
		req, err := process.ParseRequest(c.Request.Context(), body)
		if err != nil {
			writeError(c, err)
			return
		}
		validate.NoteSubject(c.Request.Context(), req.ImportSupplierCode, req.ExternalAccountNumber)
		c.JSON(http.StatusOK, gin.H{})
	})
	do := func(method, path, body string) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		e.ServeHTTP(httptest.NewRecorder(), req)
	}
	do("GET", "/status/OCTOPUS/A-1/", "")
	do("POST", "/process/", `{"import_supplier_code": "EDF", "external_account_number": "B-2", "operations_team_name": "Ops"}`)
	do("POST", "/process/", `not json`)

	type line struct {
		Status                 float64
		Code, Supplier, Number string
	}
	var got []line
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line %s: %v", sc.Bytes(), err)
		}
		st, _ := l["status"].(float64)
		code, _ := l["code"].(string)
		sup, _ := l["supplier"].(string)
		num, _ := l["external_account_number"].(string)
		got = append(got, line{st, code, sup, num})
	}
	want := []line{
		{404, "import_process_not_found", "OCTOPUS", "A-1"},
		{200, "", "EDF", "B-2"},
		{400, "parse_error", "", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request lines (-want +got):\n%s", diff)
	}
}
