package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bulkimport/bulkimport/jobs/admin"
)

// A large E1 body once held a CPU for minutes with its pairwise duplicate
// checks. Details are now limited to 1,000: a body with 40,000
// is refused at once with too_many_items, and only the details up to the
// limit are checked (every second one repeats the one before).
func TestBusiness_DetailsBeyondTheLimitAreRefusedFast(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	if _, err := admin.CreateSupplier(context.Background(), s.db, admin.Supplier{Code: "DEMO"}); err != nil {
		t.Fatal(err)
	}
	tok := s.accessToken(t, s.newKey(t, "all"))
	m := businessRequest()
	details := make([]any, 40_000)
	for i := range details {
		details[i] = map[string]any{"key": fmt.Sprintf("k%d", i/2), "value": "v"}
	}
	m["business"].(map[string]any)["details"] = details
	start := time.Now()
	r := s.do(t, "POST", "/v1/data-import/business/", tok, m)
	// Generous for -race on a loaded machine; the pairwise checks took
	// minutes.
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("answered in %v, want under 10s", took)
	}
	if r.Status != 400 || r.Body["code"] != "business_failed_validation" {
		t.Fatalf("%d %.300s", r.Status, r.Raw)
	}
	codes := codesAt(t, r)
	if !slices.Contains(codes, "too_many_items@business.details") {
		t.Errorf("no too_many_items@business.details in %.300v", codes)
	}
	if len(codes) != 1+500 {
		t.Errorf("%d problems, want 501 (the limit and every second detail up to it)", len(codes))
	}
	var n int
	if err := s.db.Get(&n, `SELECT count(*) FROM businesses`); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d businesses stored", n)
	}
}
