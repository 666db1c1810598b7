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
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/bulkimport/bulkimport/jobs/auth"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

const (
	requestIDKey = "request_id"
	principalKey = "principal"
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
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
	}
	c.Set(requestIDKey, id)
	c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), requestIDCtxKey{}, id))
	c.Header("X-Request-Id", id)
	c.Next()
}

// logRequests writes one line per request. It logs the route pattern, never
// the raw path, because paths carry account numbers (personal data).
func logRequests(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	slog.InfoContext(c.Request.Context(), "request",
		"request_id", requestID(c), "method", c.Request.Method, "route", route,
		"status", c.Writer.Status(), "duration_ms", float64(time.Since(start).Microseconds())/1000,
		"bytes", c.Writer.Size())
}

// recoverPanics turns a panic into a logged 500 with the section 7 body, so
// that no stack trace reaches a caller.
func recoverPanics(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if err, ok := r.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(r)
			}
			slog.ErrorContext(c.Request.Context(), "panic", "request_id", requestID(c), "route", c.FullPath(), "panic", r)
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

// readJSONLimit is readJSON with a limit of its own; the reader stops at
// limit bytes, so a larger body is never held in memory.
func (s *Server) readJSONLimit(c *gin.Context, limit int64) ([]byte, error) {
	ct := c.GetHeader("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil, problem.New(problem.UnsupportedMedia, "unsupported_media_type",
			"The request body must be JSON, sent with Content-Type: application/json.")
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, problem.New(problem.TooLarge, "request_too_large",
			"The request body exceeds the limit of "+byteSize(limit)+".")
	}
	if err != nil {
		return nil, problem.New(problem.Invalid, "parse_error", "The request body could not be read.")
	}
	return body, nil
}

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

// authenticate requires an Authorization header in one of the forms of
// auth.AuthenticateHeader and stores the principal for the handlers.
func (s *Server) authenticate(c *gin.Context) {
	p, err := s.auth.AuthenticateHeader(c.Request.Context(), c.GetHeader("Authorization"))
	if err != nil {
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
