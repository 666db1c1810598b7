package payment

import (
	"context"
	"errors"

	"github.com/bulkimport/bulkimport/jobs/metrics"
)

// WithMetrics makes v count every request to a vendor in m
// (importd_vendor_calls_total) and returns v.
func (v *Verifier) WithMetrics(m *metrics.Metrics) *Verifier {
	v.metrics = m
	return v
}

// counted is an Adapter that counts each call of the one it wraps by its
// outcome when the call ends.
type counted struct {
	Adapter
	vendor  string
	metrics *metrics.Metrics
}

func (a counted) Fetch(ctx context.Context, reference string) (VendorInstruction, error) {
	in, err := a.Adapter.Fetch(ctx, reference)
	a.metrics.VendorCall(a.vendor, callOutcome(ctx, err))
	return in, err
}

// callOutcome classifies the end of one vendor call; ctx is the attempt's,
// bounded by the vendor's timeout.
func callOutcome(ctx context.Context, err error) string {
	var ie *IntermittentError
	var pe *ProtocolError
	var re *RefusedError
	switch {
	case err == nil:
		return metrics.VendorOK
	case errors.Is(err, ErrNotFound):
		return metrics.VendorNotFound
	case errors.As(err, &re):
		return metrics.VendorRefused
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return metrics.VendorTimeout
	case ctx.Err() != nil:
		return metrics.VendorCancelled
	case errors.As(err, &ie):
		return metrics.VendorUnavailable
	case errors.As(err, &pe):
		return metrics.VendorProtocolError
	}
	return metrics.VendorError
}
