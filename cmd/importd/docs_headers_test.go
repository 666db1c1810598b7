package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/api"
)

// The API page was served without Content-Security-Policy,
// X-Frame-Options or nosniff: another site could frame it (and its "Try it
// out" with a token typed in) and any file could be sniffed as another
// type. Every file of the page, and its not-found answer, now carries them.
func TestDocs_PageHasSecurityHeaders(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	for _, p := range []string{api.DocsPath, api.DocsPath + "index.html", api.DocsPath + "init.js", api.DocsPath + "swagger-ui.css", api.DocsPath + "nope.js"} {
		res, err := http.Get(s.base + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		got := map[string]string{}
		for _, h := range []string{"X-Frame-Options", "X-Content-Type-Options"} {
			got[h] = res.Header.Get(h)
		}
		if d := cmp.Diff(map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"}, got); d != "" {
			t.Errorf("GET %s (-want +got):\n%s", p, d)
		}
		csp := res.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %q", p, csp, want)
			}
		}
	}
}

// Swagger UI works under the page's policy: in headless Chromium it loads
// the served document and lists its operations, and the browser reports no
// refused script, style or request.
func TestDocs_SwaggerUIRunsUnderItsPolicy(t *testing.T) {
	t.Parallel()
	ctx, problems := browser(t)
	s := startService(t, "api", nil)
	var ops int
	err := chromedp.Run(ctx,
		chromedp.Navigate(s.base+api.DocsPath),
		chromedp.WaitVisible(".opblock", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll(".opblock").length`, &ops),
	)
	if err != nil {
		t.Fatalf("page: %v; browser reported %v", err, problems())
	}
	if ops < 10 {
		t.Errorf("%d operations listed", ops)
	}
	for _, p := range problems() {
		if strings.Contains(p, "Content Security Policy") || strings.Contains(p, "Refused") {
			t.Errorf("the browser refused something: %s", p)
		}
	}
}
