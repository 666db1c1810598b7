package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bulkimport/bulkimport/jobs/admin"
)

// E1's duplicate checks take linear time (issue 20): 4 times the details
// may not take 8 times as long.
func TestBusiness_DuplicateDetailsTakeLinearTime(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	if _, err := admin.CreateSupplier(context.Background(), s.db, admin.Supplier{Code: "DEMO"}); err != nil {
		t.Fatal(err)
	}
	tok := s.accessToken(t, s.newKey(t, "all"))
	measure := func(n int) time.Duration {
		m := businessRequest()
		details := make([]any, n)
		for i := range details {
			details[i] = map[string]any{"key": fmt.Sprintf("k%d", i/2), "value": "v"}
		}
		m["business"].(map[string]any)["details"] = details
		best := time.Duration(1<<63 - 1)
		for range 2 {
			start := time.Now()
			r := s.do(t, "POST", "/v1/data-import/business/", tok, m)
			best = min(best, time.Since(start))
			if r.Status != 400 {
				t.Fatalf("%d %.300s", r.Status, r.Raw)
			}
			if got := len(r.Body["errors"].([]any)); got != n/2 {
				t.Fatalf("%d errors, want %d (every second detail)", got, n/2)
			}
		}
		return best
	}
	small, large := measure(10_000), measure(40_000)
	if ratio := float64(large) / float64(small); ratio >= 8 {
		t.Errorf("10k details took %v, 40k %v: ratio %.1f, want < 8 (linear)", small, large, ratio)
	}
}
