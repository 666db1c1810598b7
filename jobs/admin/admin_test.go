package admin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCanonicalStatus_AcceptsAnyCase(t *testing.T) {
	t.Parallel()
	got := map[string]string{}
	for _, s := range []string{"ongoing", "PAUSED", "Complete", "cOmPlEtE", "done", ""} {
		got[s] = CanonicalStatus(s)
	}
	want := map[string]string{"ongoing": StatusOngoing, "PAUSED": StatusPaused, "Complete": StatusComplete,
		"cOmPlEtE": StatusComplete, "done": "done", "": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
