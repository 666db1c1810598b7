package api

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"
)

// appender writes its own encoding, as *account.Account does.
type appender struct {
	text string
	err  error
}

func (a appender) AppendJSON(b []byte) ([]byte, error) { return append(b, a.text...), a.err }

// writeJSON answers a jsonAppender's own bytes and anything else as
// encoding/json writes it without HTML escaping, each ended by a newline,
// whatever answer its pooled buffer held before; an encoding that fails is
// a 500.
func TestWriteJSON_AppenderOrEncodingJSON(t *testing.T) {
	t.Parallel()
	type answer struct {
		Status int
		Body   string
	}
	cases := []struct {
		name string
		v    any
		want answer
	}{
		{"appender", appender{text: `{"a":"<b>"}`}, answer{200, "{\"a\":\"<b>\"}\n"}},
		{"encoding/json", map[string]string{"a": "<b>&"}, answer{200, "{\"a\":\"<b>&\"}\n"}},
		{"short after long", appender{text: `{}`}, answer{200, "{}\n"}},
		{"appender fails", appender{text: `{`, err: errors.New("broken")}, answer{500, ""}},
		{"encoding/json fails", map[string]any{"f": func() {}}, answer{500, ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for range 3 { // the pool hands back buffers other answers used
				writeJSON(testContext(), 200, appender{text: `{"long":"` + string(make([]byte, 500)) + `"}`})
				w := httptest.NewRecorder()
				c, _ := gin.CreateTestContext(w)
				c.Request = httptest.NewRequest("POST", "/", nil)
				writeJSON(c, 200, tc.v)
				got := answer{w.Code, w.Body.String()}
				if tc.want.Status != 200 {
					got.Body = ""
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Fatalf("(-want +got):\n%s", diff)
				}
			}
		})
	}
}

func testContext() *gin.Context {
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest("POST", "/", nil)
	return c
}

// readAllSized reads what io.ReadAll reads, whatever size a client
// announced, and stops at the first error as io.ReadAll does.
func TestReadAllSized_AsReadAll(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("0123456789", 700) // 7,000 bytes
	broken := errors.New("connection reset")
	cases := []struct {
		name string
		r    func() io.Reader
		size int64
	}{
		{"size announced", func() io.Reader { return strings.NewReader(body) }, int64(len(body))},
		{"size unknown", func() io.Reader { return strings.NewReader(body) }, -1},
		{"announced too small", func() io.Reader { return strings.NewReader(body) }, 10},
		{"announced too large", func() io.Reader { return strings.NewReader(body) }, 64 << 10},
		{"empty", func() io.Reader { return strings.NewReader("") }, 0},
		{"a byte at a time", func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) }, int64(len(body))},
		{"data with EOF", func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) }, int64(len(body))},
		{"fails midway", func() io.Reader { return io.MultiReader(strings.NewReader(body), iotest.ErrReader(broken)) }, 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want, wantErr := io.ReadAll(tc.r())
			got, gotErr := readAllSized(tc.r(), tc.size)
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("body (-io.ReadAll +readAllSized):\n%s", diff)
			}
			if !errors.Is(gotErr, wantErr) {
				t.Errorf("error %v, io.ReadAll's %v", gotErr, wantErr)
			}
		})
	}
}
