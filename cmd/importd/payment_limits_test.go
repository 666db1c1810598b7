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
	// The business exists, so that its accounts are checked: an unknown
	// business is answered alone (404) before any account is.
	if _, err := s.db.Exec(`INSERT INTO businesses (supplier_id, external_business_identifier, business_type, company_number, company_name)
		SELECT id, 'BIZ', 'LTD', '01234567', 'Pay Ltd' FROM import_suppliers WHERE code = 'PAY'`); err != nil {
		t.Fatal(err)
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
		assertGrowsLinearly(t, 20_000, 200_000, 25, measure)
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
				if got := len(r.Body["errors"].([]any)); got != n+1 {
					t.Fatalf("%d errors, want %d (each account once and the vendor)", got, n+1)
				}
			}
			return best
		}
		assertGrowsLinearly(t, 2_500, 10_000, 8, measure)
	})
}

// assertGrowsLinearly fails unless measure(large) takes less than limit
// times measure(small) in at least one of five tries. A check that is
// quadratic in the body never does (a body four times larger takes about
// sixteen times longer); a linear one can, on a loaded machine, once in a
// while, when other tests take the CPU during the large body's request, so
// one try proves nothing either way, and the first try that shows linear
// time ends the test.
func assertGrowsLinearly(t *testing.T, small, large int, limit float64, measure func(n int) time.Duration) {
	t.Helper()
	var tries []string
	for range 5 {
		s, l := measure(small), measure(large)
		ratio := float64(l) / float64(s)
		if ratio < limit {
			return
		}
		tries = append(tries, fmt.Sprintf("%v and %v (ratio %.1f)", s, l, ratio))
	}
	t.Errorf("%d and %d items took, in five tries, %s: want a ratio under %.0f (linear) at least once",
		small, large, strings.Join(tries, "; "), limit)
}
