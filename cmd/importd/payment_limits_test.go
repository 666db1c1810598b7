package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/admin"
)

// e2Body is an E2 request for supplier PAY with n accounts; with dup, every
// second account repeats the one before it.
func e2Body(n int, dup bool) string {
	var b strings.Builder
	b.WriteString(`{"import_supplier_code": "PAY", "external_business_identifier": "BIZ", "vendor": "OK", "reference": "R", "type": "CARD", "accounts": [`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		k := i
		if dup {
			k = i / 2
		}
		fmt.Fprintf(&b, `{"external_account_number": "A-%07d"}`, k)
	}
	b.WriteString(`]}`)
	return b.String()
}

// A large E2 body must not hold the service for long: a key that
// cannot see the supplier gets the not-found answer at once, and with
// visibility the duplicate and per-account checks take linear time up to the
// limit of 10,000 accounts.
func TestPaymentInstruction_LargeBusinessBodyTakesLinearTime(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	for _, code := range []string{"PAY", "OTHER"} {
		if _, err := admin.CreateSupplier(context.Background(), s.db, admin.Supplier{Code: code}); err != nil {
			t.Fatal(err)
		}
	}
	blind := s.accessToken(t, s.newKey(t, "blind", "OTHER"))
	all := s.accessToken(t, s.newKey(t, "all"))

	t.Run("a key that cannot see the supplier", func(t *testing.T) {
		// Only the supplier is refused, whatever the body holds: nothing
		// is checked per account. The time grows with the body no faster
		// than reading it (linear; a check per account against the others
		// would make the ratio about 100), compared as a ratio within the
		// test because the machine's load moves absolute times.
		measure := func(n int) time.Duration {
			body := e2Body(n, false)
			best := time.Duration(1<<63 - 1)
			for range 2 {
				start := time.Now()
				r := s.do(t, "POST", pathE2, blind, body)
				best = min(best, time.Since(start))
				if r.Status != 400 || r.Body["code"] != "payment_instruction_failed_validation" {
					t.Fatalf("%d %.300s", r.Status, r.Raw)
				}
				if d := cmp.Diff([]string{"import_supplier_not_found@import_supplier_code"}, codesAt(t, r)); d != "" {
					t.Errorf("errors (-want +got):\n%s", d)
				}
			}
			return best
		}
		small, large := measure(20_000), measure(200_000)
		if ratio := float64(large) / float64(small); ratio >= 25 {
			t.Errorf("20k accounts took %v, 200k %v: ratio %.1f, want < 25 (linear)", small, large, ratio)
		}
	})

	t.Run("a key that sees the supplier", func(t *testing.T) {
		// The fastest of two runs, to keep other tests' load out of the ratio.
		measure := func(n int) time.Duration {
			body := e2Body(n, true)
			best := time.Duration(1<<63 - 1)
			for range 2 {
				start := time.Now()
				r := s.do(t, "POST", pathE2, all, body)
				best = min(best, time.Since(start))
				if r.Status != 400 {
					t.Fatalf("%d %.300s", r.Status, r.Raw)
				}
				if got := len(r.Body["errors"].([]any)); got != n+2 {
					t.Fatalf("%d errors, want %d (each account once, the business and the vendor)", got, n+2)
				}
			}
			return best
		}
		small, large := measure(2_500), measure(10_000)
		if ratio := float64(large) / float64(small); ratio >= 8 {
			t.Errorf("2.5k accounts took %v, 10k %v: ratio %.1f, want < 8 (linear)", small, large, ratio)
		}
	})
}
