package postimport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/problem"
	v "github.com/bulkimport/bulkimport/jobs/validate"
	"github.com/bulkimport/bulkimport/jobs/validate/validatetest"
)

// cancelEndpoint is one of E6, E7 and E8 as the cancellation tests drive it.
type cancelEndpoint struct {
	name string
	// phases are the checkpoints of a live request, in order.
	phases []v.Phase
	// parse runs the endpoint's parse and checks on body and returns the
	// codes of the problems found, and how many times it asked for today.
	parse func(ctx context.Context, body []byte) (codes []string, todays int, err error)
	// refused is a body with a problem that only the rules after the
	// binding find, and code that problem's.
	refused []byte
	code    string
	// large returns a valid body of many items for the account ean.
	large func(ean string) []byte
	// create runs the endpoint, and stored counts what it wrote for ean.
	create func(b *bundle, ctx context.Context, body []byte) error
	stored string
}

func codesOf(errs problem.List) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Code)
	}
	return out
}

func cancelEndpoints(t *testing.T) []cancelEndpoint {
	today := func(n *int) func(string) v.Date {
		return func(string) v.Date { *n++; return v.DateOf(testNow) }
	}
	return []cancelEndpoint{
		{
			name:   "E6 notes",
			phases: []v.Phase{v.Parsed, v.Bound},
			parse: func(ctx context.Context, body []byte) ([]string, int, error) {
				_, errs, err := parseNotes(ctx, body)
				return codesOf(errs), 0, err
			},
			refused: notesBody(t, "EXT-0", obj{"body": "b"}, obj{"is_pinned": true}),
			code:    note.CodeEmpty,
			large: func(ean string) []byte {
				var notes []obj
				for i := range MaxNotes {
					notes = append(notes, obj{"body": fmt.Sprintf("note %d", i), "created_at": "2025-01-11T10:00:00Z"})
				}
				return body(t, obj{"import_supplier": laxCode, "external_account_number": ean, "notes": notes})
			},
			create: func(b *bundle, ctx context.Context, body []byte) error {
				_, err := b.svc.CreateNotes(ctx, body, visible)
				return err
			},
			stored: `SELECT count(*) FROM notes n JOIN accounts a ON a.id = n.account_id WHERE a.external_account_number = $1`,
		},
		{
			name:   "E7 transactions",
			phases: []v.Phase{v.Parsed, v.Bound, v.LookedUp},
			parse: func(ctx context.Context, body []byte) ([]string, int, error) {
				var errs problem.List
				var n int
				_, err := parseTransactions(ctx, body, today(&n), &errs)
				return codesOf(errs), n, err
			},
			refused: txBody(t, "EXT-0", charge("T1", "2025-06-01", "1.00"), charge("T1", "2025-06-02", "2.00")),
			code:    CodeDuplicateTransactionIDs,
			large: func(ean string) []byte {
				var txs []obj
				for i := range 2000 {
					txs = append(txs, charge(fmt.Sprintf("T%05d", i), "2025-06-01", "1.00"))
				}
				return body(t, obj{"import_supplier": laxCode, "external_account_number": ean, "transactions": txs})
			},
			create: func(b *bundle, ctx context.Context, body []byte) error {
				_, err := b.svc.CreateTransactions(ctx, body, nil, visible)
				return err
			},
			stored: `SELECT count(*) FROM transactions t JOIN accounts a ON a.id = t.account_id WHERE a.external_account_number = $1`,
		},
		{
			name:   "E8 statements",
			phases: []v.Phase{v.Parsed, v.Bound, v.LookedUp},
			parse: func(ctx context.Context, body []byte) ([]string, int, error) {
				var n int
				_, errs, err := parseStatements(ctx, body, today(&n))
				return codesOf(errs), n, err
			},
			refused: stBody(t, "EXT-0", statement("S1", "2025-01-01", "2025-01-31"), statement("S1", "2025-02-01", "2025-02-28")),
			code:    CodeDuplicateStatementIDs,
			large: func(ean string) []byte {
				var sts []obj
				for i := range MaxStatements {
					sts = append(sts, statement(fmt.Sprintf("S%04d", i), "2024-01-01", "2024-02-01"))
				}
				return body(t, obj{"import_supplier": laxCode, "external_account_number": ean, "statements": sts})
			},
			create: func(b *bundle, ctx context.Context, body []byte) error {
				_, err := b.svc.CreateStatements(ctx, body, visible)
				return err
			},
			stored: `SELECT count(*) FROM historical_statements h JOIN accounts a ON a.id = h.account_id WHERE a.external_account_number = $1`,
		},
	}
}

// A request whose client hung up stops at the next phase of its checks:
// the schema's binding, the look-up of the supplier's "today" and the
// rules after them do not run for no one. A body with a rule's problem,
// refused field by field on a live request, comes back as the
// cancellation.
func TestParse_ACancelledRequestStopsBetweenItsPhases(t *testing.T) {
	t.Parallel()
	for _, ep := range cancelEndpoints(t) {
		t.Run(ep.name, func(t *testing.T) {
			t.Parallel()
			for i := range len(ep.phases) + 1 {
				// i phases run before the cancellation; len(ep.phases) is
				// the live request.
				var stop v.Phase
				want := ep.phases
				if i < len(ep.phases) {
					stop, want = ep.phases[i], ep.phases[:i+1]
				}
				ctx, seen := validatetest.CancelAt(stop)
				codes, todays, err := ep.parse(ctx, ep.refused)
				if diff := cmp.Diff(want, *seen); diff != "" {
					t.Errorf("cancelled after the %q: phases (-want +got):\n%s", stop, diff)
				}
				// The endpoints with a look-up ask for today once, unless
				// they stop before it.
				wantTodays := 0
				if slices.Contains(want, v.LookedUp) {
					wantTodays = 1
				}
				if todays != wantTodays {
					t.Errorf("cancelled after the %q: asked for today %d times, want %d", stop, todays, wantTodays)
				}
				if stop == "" {
					if err != nil || !cmp.Equal(codes, []string{ep.code}) {
						t.Errorf("live: %v %v, want the problem %s", err, codes, ep.code)
					}
					continue
				}
				if !errors.Is(err, context.Canceled) || len(codes) > 0 {
					t.Errorf("cancelled after the %q: %v %v, want the cancellation alone", stop, err, codes)
				}
			}
		})
	}
}

// A large valid body of a client that hung up answers the cancellation,
// which is no problem of the request (the API logs it as a closed request,
// not a 500), and writes nothing; the same body on a live request is
// written.
func TestCreate_ACancelledRequestWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, ep := range cancelEndpoints(t) {
		t.Run(ep.name, func(t *testing.T) {
			t.Parallel()
			ean := b.newAccount(t, acct{supplier: laxCode})
			data := ep.large(ean)
			for i := range ep.phases {
				stop := ep.phases[i]
				ctx, seen := validatetest.CancelAt(stop)
				err := ep.create(b, ctx, data)
				if _, isProblem := problem.As(err); !errors.Is(err, context.Canceled) || isProblem {
					t.Errorf("cancelled after the %s: %v, want the cancellation", stop, err)
				}
				if diff := cmp.Diff(ep.phases[:i+1], *seen); diff != "" {
					t.Errorf("cancelled after the %s: phases (-want +got):\n%s", stop, diff)
				}
			}
			if n := b.count(t, ep.stored, ean); n != 0 {
				t.Errorf("cancelled requests wrote %d items", n)
			}
			if err := ep.create(b, context.Background(), data); err != nil {
				t.Fatalf("the same body on a live request: %v", err)
			}
			if n := b.count(t, ep.stored, ean); n == 0 {
				t.Error("the live request wrote nothing")
			}
		})
	}
}
