package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTopLevelFields_CountsFieldsThroughFragmentsUpToTwo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query string
		want  int
	}{
		{`mutation { obtainServiceToken(input: {APIKey: "k"}) { token } }`, 1},
		{`{ ping }`, 1},
		{`mutation { a: obtainServiceToken(input: {APIKey: "k"}) { token } b: obtainServiceToken(input: {APIKey: "k"}) { token } c: ping }`, 2},
		{`mutation { ...F } fragment F on Mutation { a: ping b: ping }`, 2},
		{`mutation { ...F ...F } fragment F on Mutation { ping }`, 1},
		{`mutation { ... on Mutation { ping } ping }`, 2},
		{`query A { ping } query B { ping }`, 2},
		{`not graphql {`, 0},
	} {
		if d := cmp.Diff(tc.want, topLevelFields(tc.query)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.query, d)
		}
	}
}

func FuzzTopLevelFields(f *testing.F) {
	f.Add(`mutation { obtainServiceToken(input: {APIKey: "k"}) { token } }`)
	f.Add(`mutation { ...F } fragment F on Mutation { ...F ping }`)
	f.Fuzz(func(t *testing.T, q string) {
		if n := topLevelFields(q); n < 0 || n > 2 {
			t.Fatalf("topLevelFields(%q) = %d", q, n)
		}
	})
}
