package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

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
		// 12 fields and their comments fit in the query's bounds of
		// checkQueryShape, so that the rule, not the bounds, refuses them.
		for i := 1; i <= 12; i++ {
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
			// the 12 others refused by the resolver.
			before := map[string]int{"too_many_operations": 1}
			resolver := map[string]int{"invalid_api_key": 1, "too_many_operations": 12}
			if r.Status != 200 || !cmp.Equal(before, got) && !cmp.Equal(resolver, got) {
				t.Errorf("%d; error codes %v, want %v or %v\n%.300s", r.Status, got, before, resolver, r.Raw)
			}
		})
	}
}

// Fragment cycles cost graph-gophers' validation more than the cube of the
// spreads, with no way to stop it once started: 1,000 self-spreads (a
// 5,052-byte body, no login) took 21 s of CPU, 2,500 more than ten
// minutes. The token endpoint refuses such a query before the library
// reads it. Each request has 20 s, far more than a refusal takes and less
// than the smallest of these cost before.
func TestHarden_FragmentCyclesAreRefusedBeforeTheLibrary(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	spreads := func(n int) string {
		return "query Q{...F} fragment F on Query{" + strings.Repeat("...F ", n) + "ping}"
	}
	for _, tc := range []struct {
		name, query, want string
	}{
		{"1,000 self-spreads (the reported body)", spreads(1000), "query_too_complex"},
		{"2,500 self-spreads", spreads(2500), "query_too_complex"},
		{"600 self-spreads, under the size bound", spreads(600), "fragments_not_supported"},
		{"two fragments spreading each other", "query Q{...A} fragment A on Query{" + strings.Repeat("...B ", 300) + "ping} fragment B on Query{" + strings.Repeat("...A ", 300) + "ping}", "fragments_not_supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body, _ := json.Marshal(map[string]any{"query": tc.query})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", s.base+"/v1/graphql/", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			r := doReq(t, req)
			errs, _ := r.Body["errors"].([]any)
			if r.Status != 200 || len(errs) != 1 {
				t.Fatalf("%d %.300s, want 200 and one error", r.Status, r.Raw)
			}
			if d := cmp.Diff(tc.want, errorCode(t, errs)); d != "" {
				t.Errorf("code (-want +got):\n%s", d)
			}
		})
	}
}
