package account

import (
	"runtime"
	"strings"
	"testing"

	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// An account payload of 2 MB whose metadata held a million numbers cost
// 105 MB of parsed tree (16 requests at once, 1.75 GB): the body parser
// kept up to 1,048,576 values of any body. The account schema now has a
// budget of its own, 250 times the example account's values, and such a
// body is refused as request_too_large once the budget is spent, having
// built at most that much. Not parallel: it measures the process's
// allocations, which other tests running at the same time would add to.
func TestParseBody_AccountValueBudgetRefusesAMillionNumbers(t *testing.T) {
	numbers := "[" + strings.TrimSuffix(strings.Repeat("1,", 1000), ",") + "]"
	var b strings.Builder
	b.WriteString(`{"external_account_number":"A-1","import_supplier":"DEMO","metadata":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"key":"k","value":{"n":` + numbers + `}}`)
	}
	b.WriteString(`]}`)
	body := []byte(b.String())

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	root, perr := accountSchema.ParseBody(body)
	runtime.ReadMemStats(&after)
	if root != nil || perr == nil || perr.Kind != problem.TooLarge || perr.Code != validate.CodeRequestTooLarge {
		t.Fatalf("a million numbers: %v, want request_too_large", perr)
	}
	// The parser copies the body once; the tree stops at the budget, about
	// 100 bytes a value.
	if alloc, limit := after.TotalAlloc-before.TotalAlloc, uint64(len(body))+uint64(validate.AccountMaxValues)*200; alloc > limit {
		t.Errorf("allocated %d MiB for a %d MiB body, want at most %d MiB", alloc>>20, len(body)>>20, limit>>20)
	}
	if !strings.Contains(perr.Detail, "50000") {
		t.Errorf("detail %q does not name the budget", perr.Detail)
	}
	// The example account is far inside the budget.
	if _, perr := accountSchema.ParseBody(fixture(t)); perr != nil {
		t.Errorf("the example account: %v", perr)
	}
}
