package progress

import (
	"context"
	"testing"
	"time"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "1.1", "1763856000000000.42", "x.1", "1.", ".1", "-1.1", "1.-1", "99999999999999999999.1",
		"1763856000000000.r42", "1.r", "1.r0", "1.rr1", "r1.1"} {
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
	at := time.Date(2026, 11, 23, 10, 0, 0, 123456000, time.UTC)
	for _, c := range []cursor{{at: at, src: srcProcess, id: 7}, {at: at, src: srcRefusal, id: 7}} {
		got, err := parseCursor(c.String())
		if err != nil || got != c {
			t.Fatalf("parseCursor(%q) = %v, %v; want %v", c.String(), got, err, c)
		}
	}
	if p, r := (cursor{at: at, src: srcProcess, id: 7}).String(), (cursor{at: at, src: srcRefusal, id: 7}).String(); p == r {
		t.Errorf("a process and a refusal of the same time and id have the same cursor %q", p)
	}
}

// Whatever the query string holds, a summary is either refused as invalid
// or answered: nothing reaches PostgreSQL that it refuses (NUL, invalid
// UTF-8, a cursor out of its range). Every refusal is one RULES.md lists.
func FuzzSummarize_FilterIsRefusedOrAnswered(f *testing.F) {
	_, svc := seeded(f)
	for _, s := range [][3]string{{"", "", ""}, {"invalid_phone_number", "customers.0.mobile", ""}, {"a\x00", "", ""},
		{"\xff", "", ""}, {"x", "", "1.1"}, {"x", "y", "-5.3"}, {`"}]`, `\u0000`, "1e9.2"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, code, attr, before string) {
		_, err := svc.Summarize(context.Background(), "ACME", Filter{Code: code, Attr: attr, Before: before}, all, false)
		if p, ok := problem.As(err); err != nil && (!ok || p.Kind != problem.Invalid) {
			t.Fatalf("Summarize(%q, %q, %q): %v", code, attr, before, err)
		}
		if err != nil {
			for _, r := range refusalsOf(t, err) {
				checkDocumented(t, r)
			}
		}
	})
}
