package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
)

// VendorInstruction is what a vendor stores about a payment instruction.
type VendorInstruction struct {
	Reference string
	Type      string
	Status    string
	// Details is every other field of the vendor's answer, as a JSON object.
	Details json.RawMessage
}

// Adapter asks one payment vendor about payment instructions. Adapters for
// vendors with APIs of their own implement it and register in adapters; the
// verification around them (timeouts, retries, storage) stays the same.
type Adapter interface {
	// Fetch returns what the vendor stores about reference. Errors:
	// ErrNotFound when the vendor has no such instruction (persistent), a
	// *RefusedError when the vendor refuses the request as it will each time
	// (persistent), an *IntermittentError when trying again may help (the
	// caller retries), or any other error when the vendor broke its contract
	// (not retried).
	// Fetch stops when ctx ends; the caller bounds each attempt with the
	// vendor's timeout.
	Fetch(ctx context.Context, reference string) (VendorInstruction, error)
}

// ErrNotFound is a vendor's answer that the instruction does not exist.
var ErrNotFound = errors.New("payment instruction not found at vendor")

// IntermittentError is a failure that may pass: a 5xx or 429 answer, a
// timeout, a broken connection.
type IntermittentError struct {
	// Reason says what happened in words fit for the API's caller, without
	// the vendor's address: "answered 503 Service Unavailable".
	Reason string
	Cause  error
}

func (e *IntermittentError) Error() string { return "intermittent vendor failure: " + e.Cause.Error() }

// Unwrap returns the cause.
func (e *IntermittentError) Unwrap() error { return e.Cause }

// IsIntermittent reports whether err is (or wraps) an *IntermittentError.
func IsIntermittent(err error) bool {
	var ie *IntermittentError
	return errors.As(err, &ie)
}

// RefusedError is a vendor's refusal that repeats: an answer 4xx other than
// 404 and 429 (400, 401, 403, 422, ...). The same request would be refused
// the same way again, so it is not retried, and the caller hears 400: the
// persistent vendor failure of spec E2 and E9 ("do not retry in the same
// form").
type RefusedError struct {
	// Status is the vendor's status line, "403 Forbidden".
	Status string
}

func (e *RefusedError) Error() string { return "vendor refused the request: " + e.Status }

// ProtocolError is an answer that breaks the vendor protocol: an unexpected
// status, or a 200 whose body is not an instruction. It is the operator's
// problem; it is not retried, and the caller hears 400 (a persistent vendor
// failure, spec E2 and E9): the same request would fail the same way.
type ProtocolError struct {
	Msg string
}

func (e *ProtocolError) Error() string { return "vendor protocol violation: " + e.Msg }

func protocolErrorf(format string, args ...any) error {
	return &ProtocolError{Msg: fmt.Sprintf(format, args...)}
}

// AdapterHTTP is the adapter of the service's own vendor protocol
// (PROTOCOL.md).
const AdapterHTTP = "http"

// adapterFunc builds the adapter of one vendor. client is shared and has no
// timeout of its own: each attempt's context carries the vendor's.
type adapterFunc func(v Vendor, client *http.Client) (Adapter, error)

// adapters maps a vendor's adapter name to its constructor. To support a
// vendor's own API, add its adapter here; `importctl vendor add --adapter`
// then accepts the name.
var adapters = map[string]adapterFunc{
	AdapterHTTP: newHTTPAdapter,
}

// Adapters returns the names of the adapters, sorted.
func Adapters() []string { return slices.Sorted(maps.Keys(adapters)) }

// newAdapter returns the adapter of v.
func newAdapter(v Vendor, client *http.Client) (Adapter, error) {
	f, ok := adapters[v.Adapter]
	if !ok {
		return nil, fmt.Errorf("vendor %s: unknown adapter %q", v.Name, v.Adapter)
	}
	return f(v, client)
}
