package api

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	graphql "github.com/graph-gophers/graphql-go"
	gqlast "github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/bulkimport/bulkimport/jobs/problem"
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

func TestCheckQueryShape_RefusesWhatTheTokenEndpointCannotNeed(t *testing.T) {
	t.Parallel()
	spreads := func(n int) string {
		return "query Q{...F} fragment F on Query{" + strings.Repeat("...F ", n) + "ping}"
	}
	aliases := func(n int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, " a%d: ping", i)
		}
		return b.String() + " }"
	}
	for _, tc := range []struct {
		name, query string
		want        string // the refusal's code; "" for none
	}{
		{"the reference's request", `mutation ObtainKrakenToken($input: ObtainJSONWebTokenInput!) { obtainKrakenToken(input: $input) { token refreshToken refreshExpiresIn payload } }`, ""},
		{"an inline input", `mutation { obtainServiceToken(input: {APIKey: "bik_x"}) { token payload refreshToken refreshExpiresIn __typename } }`, ""},
		{"an inline fragment", `mutation { ... on Mutation { obtainServiceToken(input: {APIKey: "k"}) { token } } }`, ""},
		{"a comment", "# token\nmutation { obtainServiceToken(input: {APIKey: \"k\"}) { token } }", ""},
		{"a block string", `mutation { obtainServiceToken(input: {APIKey: """k"""}) { token } }`, ""},
		{"one self-spread", spreads(1), codeFragmentsNotSupported},
		{"300 self-spreads", spreads(300), codeFragmentsNotSupported},
		{"1,000 self-spreads", spreads(1000), codeQueryTooComplex},
		{"a named fragment after an inline one", `{ ... on Query { ...F } } fragment F on Query { ping }`, codeFragmentsNotSupported},
		{"a spread of a fragment named like a keyword", `{ ...query } fragment query on Query { ping }`, codeFragmentsNotSupported},
		{"255 tokens", aliases(84), ""},
		{"over 256 tokens", aliases(86), codeQueryTooComplex},
		{"over 4 KiB", "{ ping }" + strings.Repeat(" ", maxQueryBytes), codeQueryTooComplex},
		{"comments count as tokens", "{ ping }" + strings.Repeat("#\n", 300), codeQueryTooComplex},
		{"an escape the specification lacks", `mutation { obtainServiceToken(input: {APIKey: "\x62ik"}) { token } }`, codeQuerySyntax},
		{"an unterminated string", `{ ping(a: "x) }`, codeQuerySyntax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := ""
			if err := checkQueryShape(tc.query); err != nil {
				p, ok := problem.As(err)
				if !ok || p.Kind != problem.Invalid {
					t.Fatalf("checkQueryShape: %v, want an Invalid problem", err)
				}
				got = p.Code
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("refusal code (-want +got):\n%s", d)
			}
		})
	}
}

// Whatever checkQueryShape lets through is small, and has no named spread.
func FuzzCheckQueryShape(f *testing.F) {
	f.Add(`mutation { obtainServiceToken(input: {APIKey: "k"}) { token } }`)
	f.Add(`query Q{...F} fragment F on Query{...F ...F ping}`)
	f.Add(`{ ... on Query { ping } }`)
	f.Add("{ ping } # ...F\n")
	f.Fuzz(func(t *testing.T, q string) {
		if checkQueryShape(q) != nil {
			return
		}
		if len(q) > maxQueryBytes {
			t.Fatalf("a query of %d bytes passed", len(q))
		}
		doc, err := parser.ParseQuery(&gqlast.Source{Input: q})
		if err != nil {
			return
		}
		var walk func(gqlast.SelectionSet)
		walk = func(set gqlast.SelectionSet) {
			for _, sel := range set {
				switch sel := sel.(type) {
				case *gqlast.FragmentSpread:
					t.Fatalf("a named spread of %s passed: %q", sel.Name, q)
				case *gqlast.Field:
					walk(sel.SelectionSet)
				case *gqlast.InlineFragment:
					walk(sel.SelectionSet)
				}
			}
		}
		for _, op := range doc.Operations {
			walk(op.SelectionSet)
		}
		for _, fr := range doc.Fragments {
			walk(fr.SelectionSet)
		}
	})
}

// BenchmarkGraphQL_WorstAllowedQuery runs, through the token endpoint's
// schema, the costliest shapes of query that checkQueryShape lets through:
// it prints how long graph-gophers takes on each, which the endpoint's
// bounds keep to milliseconds.
func BenchmarkGraphQL_WorstAllowedQuery(b *testing.B) {
	schema := graphql.MustParseSchema(tokenSchema, &tokenResolver{})
	nested := func(n int) string {
		return strings.Repeat("... on Query { ", n) + "ping" + strings.Repeat(" }", n)
	}
	for _, tc := range []struct{ name, query string }{
		{"aliases", "{" + strings.Repeat(" a: ping", 84) + " }"},
		{"nested inline fragments", "{ " + nested(50) + " }"},
		{"inline fragments side by side", "{" + strings.Repeat(" ... on Query { ping }", 42) + " }"},
	} {
		if err := checkQueryShape(tc.query); err != nil {
			b.Fatalf("%s: %v", tc.name, err)
		}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				schema.Exec(context.Background(), tc.query, "", nil)
			}
		})
	}
}
