// Package validatetest holds what the tests of several endpoints need to
// drive jobs/validate's checkpoints.
package validatetest

import (
	"context"

	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// CancelAt returns a context that records the phases its checkpoints see
// and is cancelled at the checkpoint of phase stop ("" never), as a
// request is when its client hangs up.
func CancelAt(stop v.Phase) (context.Context, *[]v.Phase) {
	ctx, cancel := context.WithCancel(context.Background())
	seen := new([]v.Phase)
	return v.WithCheckpoints(ctx, func(p v.Phase) {
		*seen = append(*seen, p)
		if p == stop {
			cancel()
		}
	}), seen
}
