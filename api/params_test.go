package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
)

// paramsEngine routes /:supplier/:ean/ as the API does (raw path, values
// unescaped) behind refuseMalformedParams, and records what reached the
// handler.
func paramsEngine(reached *[]string) *gin.Engine {
	r := gin.New()
	r.UseRawPath, r.UnescapePathValues = true, true
	r.GET("/:supplier/:ean/", refuseMalformedParams, func(c *gin.Context) {
		*reached = append(*reached, c.Param("supplier"), c.Param("ean"), c.Query("after"))
		c.Status(http.StatusOK)
	})
	return r
}

// A parameter reaches the handler exactly when it is UTF-8 without a NUL,
// whatever bytes it is made of: the handlers pass parameters to
// PostgreSQL, which refuses the others in text. The seeds are the bytes the
// 500s were made with; `make fuzz` tries others.
func FuzzRefuseMalformedParams(f *testing.F) {
	for _, s := range [][3]string{
		{"DEMO", "A-1", ""}, {"DEMO", "\xff\xfe", ""}, {"DEMO", "\x00", ""}, {"\xc3\x28", "A-1", ""},
		{"DEMO", "A-1", "\xff\xfe"}, {"DEMO", "A\tB", "A\t"}, {"é", "a/b", "\xe2\x82"}, {"DEMO", "A-1", "x\x00"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, supplier, ean, after string) {
		if supplier == "" || ean == "" {
			t.Skip("the route needs both path parameters")
		}
		var reached []string
		w := httptest.NewRecorder()
		// Gin unescapes path values as it would a query string: a plain
		// '+' would reach the handler as a space, so it is sent as %2B.
		segment := func(s string) string { return strings.ReplaceAll(url.PathEscape(s), "+", "%2B") }
		path := "/" + segment(supplier) + "/" + segment(ean) + "/?after=" + url.QueryEscape(after)
		paramsEngine(&reached).ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		good := func(s string) bool { return utf8.ValidString(s) && !strings.Contains(s, "\x00") }
		wantReached := good(supplier) && good(ean) && good(after)
		switch {
		case wantReached && w.Code != http.StatusOK:
			t.Fatalf("%q %q %q refused: %d %s", supplier, ean, after, w.Code, w.Body)
		case wantReached && (reached[0] != supplier || reached[1] != ean || reached[2] != after):
			t.Fatalf("%q %q %q reached the handler as %q", supplier, ean, after, reached)
		case !wantReached && (w.Code != http.StatusBadRequest || reached != nil):
			t.Fatalf("%q %q %q: %d, handler reached %v; want 400", supplier, ean, after, w.Code, reached != nil)
		case !wantReached:
			var body struct {
				Errors []struct{ Attr string } `json:"errors"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || len(body.Errors) == 0 {
				t.Fatalf("400 body %s: %v", w.Body, err)
			}
		}
	})
}
