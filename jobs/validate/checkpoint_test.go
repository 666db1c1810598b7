package validate

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A checkpoint lets a live request go on and stops one whose context is
// done with an error that wraps the context's, so that callers and the API
// can tell a client that hung up from a failure; the hook sees every
// checkpoint, the stopping one included.
func TestCheckpoint_StopsADoneRequestWithItsContextsError(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithTimeout(context.Background(), 0)
	defer cancel2()
	tests := []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"live", context.Background(), nil},
		{"client hung up", cancelled, context.Canceled},
		{"deadline passed", expired, context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var seen []Phase
			ctx := WithCheckpoints(tc.ctx, func(p Phase) { seen = append(seen, p) })
			err := Checkpoint(ctx, Bound)
			if !errors.Is(err, tc.want) {
				t.Errorf("Checkpoint = %v, want %v", err, tc.want)
			}
			if diff := cmp.Diff([]Phase{Bound}, seen); diff != "" {
				t.Errorf("phases seen (-want +got):\n%s", diff)
			}
		})
	}
}
