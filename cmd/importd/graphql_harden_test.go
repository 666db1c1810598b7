package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The one-top-level-field rule was bypassed by a comment as well as by an
// escape (TestGraphQL_EscapesDoNotBypassTheOneFieldRule): a request whose
// aliases the count before execution misread tried a credential with each.
// Whatever a comment hides or ends with, at most one credential of a
// request is checked; every other field is refused with
// too_many_operations, before execution or by the resolver.
func TestHarden_CommentsDoNotBypassTheOneFieldRule(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", map[string]string{"AUTH_FAILURE_LIMIT": "1000"})
	field := func(i int) string {
		return fmt.Sprintf("a%d: obtainServiceToken(input: {APIKey: \"bik_%08dxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}) { token }", i, i)
	}
	fields := func(sep string) string {
		var b strings.Builder
		b.WriteString("mutation { " + field(0))
		for i := 1; i <= 40; i++ {
			b.WriteString(sep + field(i))
		}
		b.WriteString(" }")
		return b.String()
	}
	tests := []struct{ name, query string }{
		{"a comment with a closing brace between fields", fields(" # } \"\n ")},
		{"comments ended by a carriage return", fields(" # x\r ")},
		{"comments ended by CRLF", fields(" # x\r\n ")},
		{"a comment before the operation", "# mutation { ping }\n" + fields(" ")},
		{"a comment after the operation", fields(" ") + " # { a: ping }"},
		{"commas and a comment", fields(", # ,\n")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.do(t, "POST", "/v1/graphql/", "", map[string]any{"query": tc.query})
			errs, _ := r.Body["errors"].([]any)
			got := map[string]int{}
			for _, e := range errs {
				got[errorCode(t, []any{e})]++
			}
			// Refused before execution, or the first field checked and
			// the 40 others refused by the resolver.
			before := map[string]int{"too_many_operations": 1}
			resolver := map[string]int{"invalid_api_key": 1, "too_many_operations": 40}
			if r.Status != 200 || !cmp.Equal(before, got) && !cmp.Equal(resolver, got) {
				t.Errorf("%d; error codes %v, want %v or %v\n%.300s", r.Status, got, before, resolver, r.Raw)
			}
		})
	}
}
