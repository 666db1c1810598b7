package payment

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
	v "github.com/bulkimport/bulkimport/jobs/validate"
	"github.com/bulkimport/bulkimport/jobs/validate/validatetest"
)

// A request whose client hung up stops at the next phase of its checks:
// the schema's binding and E2's rules after it do not run for no one. A
// body with problems, refused field by field on a live request, comes back
// as the cancellation.
func TestParse_ACancelledRequestStopsBetweenItsPhases(t *testing.T) {
	t.Parallel()
	noVendor := accountBody("ACC-1", vendorOK, "CARD-1", TypeCard)
	delete(noVendor, "vendor")
	endpoints := []struct {
		name  string
		parse func(ctx context.Context) (problem.List, error)
		code  string // the problem of a live request
	}{
		{"E9 account", func(ctx context.Context) (problem.List, error) {
			_, errs, err := parseAccountRequest(ctx, raw(t, noVendor))
			return errs, err
		}, v.CodeRequired},
		{"E2 business", func(ctx context.Context) (problem.List, error) {
			_, errs, err := parseBusinessRequest(ctx, raw(t, businessBody("BIZ-1", "CARD-1", "ACC-1", "ACC-1")))
			return errs, err
		}, CodeDuplicateAccount},
	}
	for _, ep := range endpoints {
		t.Run(ep.name, func(t *testing.T) {
			t.Parallel()
			tests := []struct {
				stop v.Phase
				seen []v.Phase
			}{
				{v.Parsed, []v.Phase{v.Parsed}},
				{v.Bound, []v.Phase{v.Parsed, v.Bound}},
				{"", []v.Phase{v.Parsed, v.Bound}},
			}
			for _, tc := range tests {
				ctx, seen := validatetest.CancelAt(tc.stop)
				errs, err := ep.parse(ctx)
				if diff := cmp.Diff(tc.seen, *seen); diff != "" {
					t.Errorf("cancelled after the %q: phases (-want +got):\n%s", tc.stop, diff)
				}
				var codes []string
				for _, e := range errs {
					codes = append(codes, e.Code)
				}
				if tc.stop == "" {
					if err != nil || !cmp.Equal(codes, []string{ep.code}) {
						t.Errorf("live: %v %v, want the problem %s", err, codes, ep.code)
					}
					continue
				}
				if !errors.Is(err, context.Canceled) || len(codes) > 0 {
					t.Errorf("cancelled after the %q: %v %v, want the cancellation alone", tc.stop, err, codes)
				}
			}
		})
	}
}

// E9 and E2 of a client that hung up answer the cancellation, which is no
// problem of the request (the API logs it as a closed request, not a 500),
// before the database is asked anything about the request; E2's large body
// of 10,000 accounts is not bound.
func TestCreate_ACancelledRequestStopsBeforeItsChecks(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	b.account(t, b.demo, "ACC-1", 0)
	var accounts []string
	for i := range maxAccounts {
		accounts = append(accounts, fmt.Sprintf("ACC-%05d", i))
	}
	large := raw(t, businessBody("BIZ-1", "CARD-1", accounts...))
	endpoints := []struct {
		name   string
		create func(ctx context.Context) error
	}{
		{"E9 account", func(ctx context.Context) error {
			_, err := b.svc.CreateForAccount(ctx, raw(t, accountBody("ACC-1", vendorOK, "CARD-1", TypeCard)), visible)
			return err
		}},
		{"E2 business", func(ctx context.Context) error {
			_, err := b.svc.CreateForBusiness(ctx, large, visible)
			return err
		}},
	}
	for _, ep := range endpoints {
		t.Run(ep.name, func(t *testing.T) {
			t.Parallel()
			for _, phases := range [][]v.Phase{{v.Parsed}, {v.Parsed, v.Bound}} {
				stop := phases[len(phases)-1]
				ctx, seen := validatetest.CancelAt(stop)
				err := ep.create(ctx)
				if _, isProblem := problem.As(err); !errors.Is(err, context.Canceled) || isProblem {
					t.Errorf("cancelled after the %s: %v, want the cancellation", stop, err)
				}
				if diff := cmp.Diff(phases, *seen); diff != "" {
					t.Errorf("cancelled after the %s: phases (-want +got):\n%s", stop, diff)
				}
			}
			if n := b.count(t, `SELECT count(*) FROM payment_instructions`); n != 0 {
				t.Errorf("cancelled requests stored %d instructions", n)
			}
		})
	}
}
