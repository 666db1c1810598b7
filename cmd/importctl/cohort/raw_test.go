package cohort

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// NextRaw gives every non-blank line as written, with its number in the
// file, and parses nothing: a malformed line comes back as it is.
func TestNextRaw_GivesNonBlankLinesAsWrittenWithTheirNumbers(t *testing.T) {
	t.Parallel()
	r, err := NewReader(strings.NewReader("{\"a\": 1}\n\n  \nnot json\n{\"b\":\t2}"))
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		Text string
		N    int
	}
	var got []line
	for {
		b, n, err := r.NextRaw()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, line{string(b), n})
	}
	want := []line{{`{"a": 1}`, 1}, {"not json", 4}, {"{\"b\":\t2}", 5}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("lines (-want +got):\n%s", d)
	}
}
