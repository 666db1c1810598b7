package api

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
)

// externalFontLink matches the <link> tags of Asynqmon's page (v0.7.2) that
// load the Roboto and Material Icons stylesheets from Google Fonts.
var externalFontLink = regexp.MustCompile(`<link[^>]*href="https://fonts\.googleapis\.com/[^"]*"[^>]*>`)

// withoutExternalFonts serves Asynqmon's page without the stylesheets it
// loads from Google Fonts. They are the dashboard's only requests to
// another host, and a render-blocking stylesheet that a firewall drops
// (rather than refuses) leaves the page blank until the browser gives up
// on it. Without them the page uses the system's sans-serif font; its
// icons are SVG and need no font. Only HTML answers are rewritten: the API
// under /api/ and the assets under /static/ pass as they are.
func withoutExternalFonts(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(r.URL.Path, MonitoringRoot)
		if r.Method != http.MethodGet || strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/static/") {
			h.ServeHTTP(w, r)
			return
		}
		rec := &bufferedResponse{header: http.Header{}}
		h.ServeHTTP(rec, r)
		body := rec.body.Bytes()
		if rec.header.Get("Content-Type") == "" {
			// Asynqmon writes its page without a type and leaves it to
			// net/http's sniffing, which the buffer bypasses.
			rec.header.Set("Content-Type", http.DetectContentType(body))
		}
		if strings.HasPrefix(rec.header.Get("Content-Type"), "text/html") {
			body = externalFontLink.ReplaceAll(body, nil)
			rec.header.Del("Content-Length")
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(body)
	})
}

// bufferedResponse holds an answer of Asynqmon's page handler (a few
// kilobytes: the index page and its icons) so that it can be rewritten.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
