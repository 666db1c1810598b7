package account

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// A request whose client hung up stops at the next phase of its
// validation, wherever it hangs up: the fixture account, valid on a live
// request, comes back as the cancellation after the phase the hang-up
// followed, and no later phase runs.
func TestValidate_ACancelledRequestStopsAtTheNextPhase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := fixture(t)
	all := []validate.Phase{validate.Parsed, validate.Bound, validate.LookedUp}
	for i := range len(all) + 1 {
		var stop validate.Phase
		want := all
		if i < len(all) {
			stop, want = all[i], all[:i+1]
		}
		ctx, cancel := context.WithCancel(context.Background())
		var seen []validate.Phase
		ctx = validate.WithCheckpoints(ctx, func(p validate.Phase) {
			seen = append(seen, p)
			if p == stop {
				cancel()
			}
		})
		_, err := b.v.Validate(ctx, body)
		cancel()
		if diff := cmp.Diff(want, seen); diff != "" {
			t.Errorf("cancelled after the %q: phases (-want +got):\n%s", stop, diff)
		}
		if _, isProblem := problem.As(err); stop == "" && err != nil || stop != "" && (!errors.Is(err, context.Canceled) || isProblem) {
			t.Errorf("cancelled after the %q: %v", stop, err)
		}
	}
}
