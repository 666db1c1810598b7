package payment

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/metrics"
)

// fakeAdapter answers every Fetch with err, after waiting for ctx when wait
// is set.
type fakeAdapter struct {
	err  error
	wait bool
}

func (f fakeAdapter) Fetch(ctx context.Context, _ string) (VendorInstruction, error) {
	if f.wait {
		<-ctx.Done()
		return VendorInstruction{}, &IntermittentError{Reason: "did not answer", Cause: ctx.Err()}
	}
	return VendorInstruction{}, f.err
}

// vendorCalls reads importd_vendor_calls_total by "vendor/outcome".
func vendorCalls(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "importd_vendor_calls_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["vendor"]+"/"+l["outcome"]] = s.GetCounter().GetValue()
		}
	}
	return out
}

func TestMetrics_EveryVendorCallIsCountedByOutcome(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	calls := []struct {
		adapter Adapter
		ctx     context.Context
		timeout time.Duration
	}{
		{fakeAdapter{}, context.Background(), 0},
		{fakeAdapter{err: ErrNotFound}, context.Background(), 0},
		{fakeAdapter{err: &IntermittentError{Reason: "answered 503", Cause: errors.New("503")}}, context.Background(), 0},
		{fakeAdapter{err: protocolErrorf("bad")}, context.Background(), 0},
		{fakeAdapter{err: &RefusedError{Status: "403 Forbidden"}}, context.Background(), 0},
		{fakeAdapter{wait: true}, context.Background(), 10 * time.Millisecond},
		{fakeAdapter{err: errors.New("gone")}, cancelled, 0},
		{fakeAdapter{err: errors.New("odd")}, context.Background(), 0},
	}
	for _, c := range calls {
		ctx := c.ctx
		if c.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.timeout)
			defer cancel()
		}
		_, _ = counted{c.adapter, "ACME", m}.Fetch(ctx, "REF-1")
	}
	want := map[string]float64{"ACME/ok": 1, "ACME/not_found": 1, "ACME/unavailable": 1, "ACME/protocol_error": 1,
		"ACME/refused": 1, "ACME/timeout": 1, "ACME/cancelled": 1, "ACME/error": 1}
	if diff := cmp.Diff(want, vendorCalls(t, m)); diff != "" {
		t.Errorf("importd_vendor_calls_total (-want +got):\n%s", diff)
	}
	// Without metrics nothing is counted and nothing breaks.
	if _, err := (counted{fakeAdapter{}, "ACME", nil}).Fetch(context.Background(), "REF-1"); err != nil {
		t.Fatal(err)
	}
}
