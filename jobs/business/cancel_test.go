package business

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
	"github.com/bulkimport/bulkimport/jobs/validate/validatetest"
)

// A request whose client hung up stops at the next phase of its checks:
// the schema's binding and the rules after it (E1's free-form terms among
// them) do not run for no one. A body with a rule's problem, refused field
// by field on a live request, comes back as the cancellation.
func TestParse_ACancelledRequestStopsBetweenItsPhases(t *testing.T) {
	t.Parallel()
	m := request()
	obj(m, "business")["details"] = []any{map[string]any{"key": "k", "value": "1"}, map[string]any{"key": "k", "value": "2"}}
	data := body(t, m)
	tests := []struct {
		name      string
		stop      validate.Phase
		seen      []validate.Phase
		cancelled bool
		codes     []string
	}{
		{"cancelled after the parse", validate.Parsed, []validate.Phase{validate.Parsed}, true, nil},
		{"cancelled after the binding", validate.Bound, []validate.Phase{validate.Parsed, validate.Bound}, true, nil},
		{"live", "", []validate.Phase{validate.Parsed, validate.Bound}, false, []string{CodeDetailsDuplicateKeys}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, seen := validatetest.CancelAt(tc.stop)
			_, errs, err := Parse(ctx, data)
			if got := errors.Is(err, context.Canceled); got != tc.cancelled || (!tc.cancelled && err != nil) {
				t.Errorf("Parse: %v, want cancelled %v", err, tc.cancelled)
			}
			var codes []string
			for _, e := range errs {
				codes = append(codes, e.Code)
			}
			if diff := cmp.Diff(tc.codes, codes); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.seen, *seen); diff != "" {
				t.Errorf("phases (-want +got):\n%s", diff)
			}
		})
	}
}

// largeRequest is a valid E1 body of 200 contracts, each with terms of an
// object of 200 members: about 40,000 values of free-form terms.
func largeRequest() map[string]any {
	m := request()
	terms := map[string]any{}
	for i := range 200 {
		terms[fmt.Sprintf("term-%03d", i)] = i
	}
	var contracts []any
	for i := range 200 {
		contracts = append(contracts, map[string]any{"valid_from_date": "2024-01-01", "identifier": fmt.Sprintf("BC-%03d", i),
			"versions": []any{map[string]any{"applicable_at_date": "2024-01-01", "terms": []any{terms}}}})
	}
	obj(m, "business")["business_contracts"] = contracts
	return m
}

// E1 of a client that hung up answers the cancellation, which is no
// problem of the request (the API logs it as a closed request, not a 500),
// and stores nothing; the same body on a live request is stored.
func TestCreate_ACancelledRequestStoresNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	data := body(t, largeRequest())
	for _, phases := range [][]validate.Phase{{validate.Parsed}, {validate.Parsed, validate.Bound}} {
		stop := phases[len(phases)-1]
		ctx, seen := validatetest.CancelAt(stop)
		_, err := b.svc.Create(ctx, data, visible)
		if _, isProblem := problem.As(err); !errors.Is(err, context.Canceled) || isProblem {
			t.Errorf("cancelled after the %s: %v, want the cancellation", stop, err)
		}
		if diff := cmp.Diff(phases, *seen); diff != "" {
			t.Errorf("cancelled after the %s: phases (-want +got):\n%s", stop, diff)
		}
	}
	var n int
	if err := b.db.Get(&n, `SELECT count(*) FROM businesses`); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d businesses stored by cancelled requests", n)
	}
	if _, err := b.svc.Create(context.Background(), data, visible); err != nil {
		t.Errorf("the same body on a live request: %v", err)
	}
}
