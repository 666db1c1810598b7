package progress

import (
	"testing"
	"time"
)

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "1.1", "1763856000000000.42", "x.1", "1.", ".1", "-1.1", "1.-1", "99999999999999999999.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseCursor(s)
		if err != nil || s == "" {
			return
		}
		if c.id <= 0 || c.at.Year() > 9999 {
			t.Fatalf("parseCursor(%q) accepted %v", s, c)
		}
		again, err := parseCursor(c.String())
		if err != nil || again != c {
			t.Fatalf("round trip of %q: %v %v", s, again, err)
		}
	})
}

func TestCursor_RoundTripsAtMicrosecondPrecision(t *testing.T) {
	t.Parallel()
	c := cursor{at: time.Date(2026, 11, 23, 10, 0, 0, 123456000, time.UTC), id: 7}
	got, err := parseCursor(c.String())
	if err != nil || got != c {
		t.Fatalf("parseCursor(%q) = %v, %v; want %v", c.String(), got, err, c)
	}
}
