package api

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

func TestHints_SmallMismatchesGetAnAnswerThatSaysWhatToDo(t *testing.T) {
	t.Parallel()
	e := gin.New()
	e.Use(withLogger(slog.New(slog.NewJSONHandler(io.Discard, nil))))
	e.NoRoute(notFound)
	e.GET(SchemaPath, serveSchema)
	e.GET("/quotes/", func(c *gin.Context) {
		writeError(c, problem.New(problem.Invalid, "x", "Send 'Authorization: Token <token>' & retry."))
	})
	cases := []struct {
		name, path, accept string
		wantStatus         int
		wantType, wantBody string
	}{
		{"details are not HTML-escaped", "/quotes/", "", 400, "application/json; charset=utf-8",
			`{"code":"x","detail":"Send 'Authorization: Token <token>' & retry.","errors":[]}` + "\n"},
		{"a path without its trailing slash gets a hint", "/v1/data-import/whoami", "", 404, "application/json; charset=utf-8",
			`{"code":"not_found","detail":"No endpoint at this path. The paths of this API end with a slash: try /v1/data-import/whoami/","errors":[]}` + "\n"},
		{"other unknown paths", "/nothing/", "", 404, "application/json; charset=utf-8",
			`{"code":"not_found","detail":"No endpoint at this path.","errors":[]}` + "\n"},
		{"schema as JSON when asked by Accept", SchemaPath, "application/json", 200, "application/json; charset=utf-8", string(openAPIJSON)},
		{"schema as YAML by default", SchemaPath, "", 200, "application/yaml; charset=utf-8", string(OpenAPI)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest("GET", tc.path, nil)
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			w := httptest.NewRecorder()
			e.ServeHTTP(w, req)
			got := []any{w.Code, w.Header().Get("Content-Type"), w.Body.String()}
			want := []any{tc.wantStatus, tc.wantType, tc.wantBody}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", strings.ReplaceAll(diff, `\n`, "\n"))
			}
		})
	}
}
