// Package problem defines the service's error values. Every error that reaches
// a caller is a *problem.Error with a stable Code; the HTTP layer maps its Kind
// to a status in one table and renders the spec's section 7 body from it.
package problem

import (
	"errors"
	"fmt"
	"time"
)

// CodeInternal is the code of an unexpected error, whose detail is never
// shown.
const CodeInternal = "internal_error"

// Kind classifies an error for transport mapping. It says what went wrong from
// the caller's point of view, not which HTTP status it becomes.
type Kind int

// The kinds in use. The zero Kind is Internal so that a forgotten kind never
// looks like a caller mistake.
const (
	Internal          Kind = iota // unexpected; detail is never shown to the caller
	Invalid                       // the request cannot succeed in this form
	NotFound                      // the addressed resource does not exist (or is not visible)
	Unauthenticated               // missing, malformed, expired or revoked credentials
	TooManyRequests               // a limit is exceeded; retry later
	Unavailable                   // a dependency (PostgreSQL, Redis) is unreachable
	Timeout                       // the work goes on, but no result came in time (an error, not a success: nothing to show yet)
	TooLarge                      // the request body exceeds the configured limit
	UnsupportedMedia              // the request body is not JSON
	MethodNotAllowed              // the route exists for another method
	RetryableUpstream             // an external system failed intermittently; retry as is
	NotReady                      // a readiness probe's answer: a dependency of this process is unreachable
)

// FieldError is one problem at one place of the input. Attr is the dot path of
// the offending input ("customers.0.landline"); it is empty for problems that
// concern the request as a whole.
type FieldError struct {
	Detail string `json:"detail"`
	Code   string `json:"code"`
	Attr   string `json:"attr"`
}

// Error is the service's error value. Code is stable and machine-readable;
// Detail is for people and may change wording.
type Error struct {
	Kind   Kind
	Code   string
	Detail string
	// Errors lists every individual problem, each at its own path.
	Errors []FieldError
	// Extra holds additional top-level fields of the response body, such as
	// external_account_number on an "already imported" answer.
	Extra map[string]any
	// RetryAfter, when set, becomes the Retry-After header.
	RetryAfter time.Duration
	// Cause is the underlying error, logged but never shown to callers.
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Detail, e.Cause)
	}
	return e.Code + ": " + e.Detail
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// New returns an error of the given kind.
func New(kind Kind, code, detail string) *Error {
	return &Error{Kind: kind, Code: code, Detail: detail}
}

// Invalidf returns an Invalid error whose only field error sits at attr.
// The top-level code is the field code too, which is what callers expect for
// single-problem refusals.
func Invalidf(code, attr, format string, args ...any) *Error {
	d := fmt.Sprintf(format, args...)
	return &Error{Kind: Invalid, Code: code, Detail: d, Errors: []FieldError{{Detail: d, Code: code, Attr: attr}}}
}

// With adds an extra top-level field to the response body and returns e.
func (e *Error) With(key string, value any) *Error {
	if e.Extra == nil {
		e.Extra = map[string]any{}
	}
	e.Extra[key] = value
	return e
}

// As reports whether err is (or wraps) a *Error and returns it.
func As(err error) (*Error, bool) {
	var p *Error
	if errors.As(err, &p) {
		return p, true
	}
	return nil, false
}

// Wrap returns an Internal error that keeps err as its cause.
func Wrap(err error, op string) *Error {
	return &Error{Kind: Internal, Code: CodeInternal, Detail: "An unexpected error occurred.", Cause: fmt.Errorf("%s: %w", op, err)}
}

// List collects field errors, so that validation reports every problem at once.
type List []FieldError

// Add records one problem.
func (l *List) Add(attr, code, format string, args ...any) {
	*l = append(*l, FieldError{Detail: fmt.Sprintf(format, args...), Code: code, Attr: attr})
}

// Err returns nil when the list is empty, otherwise an Invalid error with the
// given top-level code and detail that carries every collected problem.
func (l List) Err(code, detail string) *Error {
	if len(l) == 0 {
		return nil
	}
	return &Error{Kind: Invalid, Code: code, Detail: detail, Errors: l}
}

// Record is the stored and transported form of an error: the section 7
// body. It is what import_processes.last_error holds and what the worker
// publishes to a waiting API request.
type Record struct {
	Detail string         `json:"detail"`
	Code   string         `json:"code"`
	Errors []FieldError   `json:"errors"`
	Extra  map[string]any `json:"extra,omitempty"`
}

// ToRecord returns the record of a caller-facing error. Internal errors are
// recorded with a generic detail, as they are shown.
func (e *Error) ToRecord() Record {
	r := Record{Detail: e.Detail, Code: e.Code, Errors: e.Errors, Extra: e.Extra}
	if e.Kind == Internal {
		r = Record{Detail: "An unexpected error occurred.", Code: CodeInternal}
	}
	if r.Errors == nil {
		r.Errors = []FieldError{}
	}
	return r
}

// Invalid returns the record as an Invalid error.
func (r Record) Invalid() *Error {
	return &Error{Kind: Invalid, Code: r.Code, Detail: r.Detail, Errors: r.Errors, Extra: r.Extra}
}
