package main

import (
	"bytes"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A 10 MiB token request is refused at 16 KiB without being read or decoded
// whole. Not parallel: the allocation measure must not count other tests.
func TestGraphQL_LargeBodyIsRefusedWithoutReadingIt(t *testing.T) {
	s := startService(t, "api", nil)
	big := `{"query":"mutation { obtainServiceToken(input: {APIKey: \"x\"}) { token } }","variables":{"v":[` +
		strings.Repeat(`{"a":1},`, 10<<20/8) + `{}]}}`
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	req, _ := http.NewRequest("POST", s.base+"/v1/graphql/", bytes.NewReader([]byte(big)))
	req.Header.Set("Content-Type", "application/json")
	r := doReq(t, req)
	runtime.ReadMemStats(&after)
	var code any
	if errs, _ := r.Body["errors"].([]any); len(errs) > 0 {
		code = errorCode(t, errs)
	}
	got := map[string]any{"status": r.Status, "code": code}
	want := map[string]any{"status": 200, "code": "request_too_large"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("answer (-want +got):\n%s\n%s", d, r.Raw)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 50<<20 {
		t.Errorf("one refused request allocated %d MiB", alloc>>20)
	}
}

// One request attempts one credential: aliased or repeated top-level fields
// are refused before any of them runs. 5,000 aliases no longer fit in the
// body limit; 200 do, but not in the query's bounds (checkQueryShape); 10
// fit in both.
func TestGraphQL_MoreThanOneTopLevelFieldIsRefused(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	key := s.newKey(t, "one")
	aliases := func(n int) string {
		var b strings.Builder
		b.WriteString("mutation {")
		for i := range n {
			fmt.Fprintf(&b, " a%d: obtainServiceToken(input: {APIKey: %q}) { token }", i, key)
		}
		b.WriteString(" }")
		return b.String()
	}
	for _, tc := range []struct {
		name, query string
		wantStatus  int
		wantCode    string
	}{
		{"one field", aliases(1), 200, ""},
		{"two aliases", aliases(2), 200, "too_many_operations"},
		{"10 aliases", strings.ReplaceAll(aliases(10), key, "k"), 200, "too_many_operations"},
		{"200 aliases", strings.ReplaceAll(aliases(200), key, "k"), 200, "query_too_complex"},
		{"5000 aliases", strings.ReplaceAll(aliases(5000), key, "k"), 200, "request_too_large"},
		{"two fields in inline fragments", `mutation { ... on Mutation { obtainServiceToken(input: {APIKey: "k"}) { token } } ... on Mutation { ping: obtainServiceToken(input: {APIKey: "k"}) { token } } }`, 200, "too_many_operations"},
		{"a field in a named fragment", `mutation { ...A } fragment A on Mutation { obtainServiceToken(input: {APIKey: "k"}) { token } }`, 200, "fragments_not_supported"},
		{"two operations", `query A { ping } query B { ping }`, 200, "too_many_operations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.do(t, "POST", "/v1/graphql/", "", map[string]any{"query": tc.query})
			got := map[string]any{"status": r.Status, "code": ""}
			if r.Status != 200 {
				got["code"] = r.Body["code"]
			} else if errs, _ := r.Body["errors"].([]any); len(errs) > 0 {
				got["code"] = errorCode(t, errs)
			}
			want := map[string]any{"status": tc.wantStatus, "code": tc.wantCode}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("answer (-want +got):\n%s\n%.300s", d, r.Raw)
			}
		})
	}
}

// The count of top-level fields was bypassed by what graphql-go accepts
// and the count's parser (gqlparser) refuses: with a "\x62" escape in one
// string, 40 aliases each tried a credential. Now the resolver counts the
// credentials it is asked to check, and the query's bounds are read with a
// lexer of GraphQL's specification, which has no such escape: the request
// is refused before any credential is checked.
func TestGraphQL_EscapesDoNotBypassTheOneFieldRule(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", map[string]string{"AUTH_FAILURE_LIMIT": "1000"})
	var b strings.Builder
	b.WriteString(`mutation { a: obtainServiceToken(input: {APIKey: "\x62ik_x"}) { token }`)
	for i := range 12 {
		fmt.Fprintf(&b, " b%d: obtainServiceToken(input: {APIKey: \"bik_%08dxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}) { token }", i, i)
	}
	b.WriteString(" }")
	r := s.do(t, "POST", "/v1/graphql/", "", map[string]any{"query": b.String()})
	errs, _ := r.Body["errors"].([]any)
	got := map[string]int{}
	for _, e := range errs {
		got[errorCode(t, []any{e})]++
	}
	want := map[string]int{"query_syntax_error": 1}
	if d := cmp.Diff(want, got); r.Status != 200 || d != "" {
		t.Errorf("%d; error codes (-want +got):\n%s\n%.300s", r.Status, d, r.Raw)
	}
}
