package payment

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// A vendor that refuses the request (a 4xx other than 404 and 429) will
// refuse it the same way each time: the persistent failure of spec E9, 400
// without a retry, and nothing stored.
func TestCreateForAccount_VendorRefusalIsPersistent(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	for _, status := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusUnprocessableEntity} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			var asked atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				asked.Add(1)
				w.WriteHeader(status)
			}))
			t.Cleanup(srv.Close)
			vendor := "REFUSES_" + strconv.Itoa(status)
			if _, err := AddVendor(context.Background(), b.db, Vendor{Name: vendor, BaseURL: srv.URL, Timeout: time.Second,
				Attempts: testAttempts, Backoff: 10 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			ext := "ACC-" + vendor
			b.account(t, b.demo, ext, 0)
			_, err := b.svc.CreateForAccount(context.Background(), raw(t, accountBody(ext, vendor, "CARD-1", TypeCard)), visible)
			p := asProblem(t, err)
			type answer struct {
				Kind   problem.Kind
				Code   string
				Attrs  []string
				Asked  int64
				Stored int
			}
			var attrs []string
			for _, e := range p.Errors {
				attrs = append(attrs, e.Attr)
			}
			got := answer{p.Kind, p.Code, attrs, asked.Load(), b.count(t, `SELECT count(*) FROM payment_instructions pi
				JOIN accounts a ON a.id = pi.account_id WHERE a.external_account_number = $1`, ext)}
			if diff := cmp.Diff(answer{problem.Invalid, CodeVendorRefused, []string{"reference"}, 1, 0}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
