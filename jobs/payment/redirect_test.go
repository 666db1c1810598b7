package payment

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// vendorAnswer is what a verification that failed at the vendor comes to.
type vendorAnswer struct {
	Kind   problem.Kind
	Code   string
	Asked  int64 // requests the configured vendor received
	Stored int
}

// A vendor that redirects is not followed: the redirect's target
// never hears of the reference, and the answer is the protocol violation
// the operator sees in the logs, tried once, and answered 400: it would
// redirect again (spec E2/E9: a persistent vendor failure).
func TestCreateForAccount_VendorRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			var followed, asked atomic.Int64
			target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				followed.Add(1)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"reference": "CARD-1", "type": "CARD", "status": "ACTIVE"}`))
			}))
			t.Cleanup(target.Close)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				http.Redirect(w, r, target.URL+r.URL.Path, status)
			}))
			t.Cleanup(srv.Close)
			vendor := "REDIRECTS_" + strconv.Itoa(status)
			if _, err := AddVendor(context.Background(), b.db, Vendor{Name: vendor, BaseURL: srv.URL, Timeout: time.Second,
				Attempts: testAttempts, Backoff: 10 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			ext := "ACC-" + vendor
			b.account(t, b.demo, ext, 0)
			_, err := b.svc.CreateForAccount(context.Background(), raw(t, accountBody(ext, vendor, "CARD-1", TypeCard)), visible)
			p := asProblem(t, err)
			got := vendorAnswer{p.Kind, p.Code, asked.Load(), b.count(t, `SELECT count(*) FROM payment_instructions pi
				JOIN accounts a ON a.id = pi.account_id WHERE a.external_account_number = $1`, ext)}
			if diff := cmp.Diff(vendorAnswer{problem.Invalid, CodeVendorProtocolError, 1, 0}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if n := followed.Load(); n != 0 {
				t.Errorf("the redirect was followed %d times", n)
			}
		})
	}
}

// Answers that are not JSON, or larger than the protocol allows, repeat on
// every try: the caller hears 400 (a persistent vendor failure, do not
// retry in this form), not 500 "retry as is".
func TestCreateForAccount_VendorProtocolViolationsAreAnswered400(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter)
	}{
		{"not JSON", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>maintenance</html>"))
		}},
		{"oversized", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"reference": "CARD-1", "type": "CARD", "status": "ACTIVE", "pad": "` + strings.Repeat("x", maxAnswerBytes) + `"}`))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var asked atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				asked.Add(1)
				tc.answer(w)
			}))
			t.Cleanup(srv.Close)
			vendor := "BROKEN_" + strings.ReplaceAll(strings.ToUpper(tc.name), " ", "_")
			if _, err := AddVendor(context.Background(), b.db, Vendor{Name: vendor, BaseURL: srv.URL, Timeout: time.Second,
				Attempts: testAttempts, Backoff: 10 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			ext := "ACC-" + vendor
			b.account(t, b.demo, ext, 0)
			_, err := b.svc.CreateForAccount(context.Background(), raw(t, accountBody(ext, vendor, "CARD-1", TypeCard)), visible)
			p := asProblem(t, err)
			got := vendorAnswer{p.Kind, p.Code, asked.Load(), b.count(t, `SELECT count(*) FROM payment_instructions pi
				JOIN accounts a ON a.id = pi.account_id WHERE a.external_account_number = $1`, ext)}
			if diff := cmp.Diff(vendorAnswer{problem.Invalid, CodeVendorProtocolError, 1, 0}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if len(p.Errors) != 1 || p.Errors[0].Attr != "reference" || !strings.Contains(p.Errors[0].Detail, "do not retry") {
				t.Errorf("errors = %+v", p.Errors)
			}
		})
	}
}

// A vendor stored with an http:// URL to a host on the network, before
// AddVendor refused one, is never called: the reference would cross the
// network in clear.
func TestCreateForAccount_PlainHTTPVendorOffLoopbackIsNotCalled(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	const vendor = "PLAIN_HTTP"
	if _, err := b.db.Exec(`INSERT INTO payment_vendors (name, adapter, base_url, timeout_ms, attempts, backoff_ms)
		VALUES ($1, 'http', 'http://pay.invalid', 1000, 3, 10)`, vendor); err != nil {
		t.Fatal(err)
	}
	ext := "ACC-" + vendor
	b.account(t, b.demo, ext, 0)
	_, err := b.svc.CreateForAccount(context.Background(), raw(t, accountBody(ext, vendor, "CARD-1", TypeCard)), visible)
	p := asProblem(t, err)
	got := vendorAnswer{p.Kind, p.Code, 0, b.count(t, `SELECT count(*) FROM payment_instructions`)}
	if diff := cmp.Diff(vendorAnswer{problem.Invalid, CodeVendorProtocolError, 0, 0}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
