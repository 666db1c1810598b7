package validate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// At 12:30 UTC on 15 June it is already the 16th on Kiritimati (UTC+14)
// and still the 15th in Los Angeles; an empty or unknown zone is UTC. A
// zone asked for twice answers the same.
func TestDateIn_DatesTInTheZone(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 6, 15, 12, 30, 0, 0, time.UTC)
	got := map[string]Date{}
	for _, zone := range []string{"", "UTC", "Pacific/Kiritimati", "America/Los_Angeles", "Nowhere/Land", "Pacific/Kiritimati"} {
		got[zone] = DateIn(at, zone)
	}
	want := map[string]Date{"": "2025-06-15", "UTC": "2025-06-15", "Pacific/Kiritimati": "2025-06-16",
		"America/Los_Angeles": "2025-06-15", "Nowhere/Land": "2025-06-15"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
