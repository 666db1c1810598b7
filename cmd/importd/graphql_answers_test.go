package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A client written against the reference gets a GraphQL answer with a code
// for what it sends: the reference's preSignedKey (a field of its input
// type) is refused with a code of its own, not a schema error; an error the
// GraphQL library finds itself carries extensions.code too; and the
// address without its trailing slash answers as GraphQL, not as a REST 404.
func TestGraphQL_ReferenceInputsAndSpellingsGetAGraphQLAnswer(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	key := s.newKey(t, "ref")
	mutation := `mutation($input: ObtainJSONWebTokenInput!) { obtainServiceToken(input: $input) { token } }`
	for _, tc := range []struct {
		name, path string
		body       map[string]any
		want       string // the error's code; "" for a token
	}{
		{"preSignedKey", "/v1/graphql/", map[string]any{"query": mutation,
			"variables": map[string]any{"input": map[string]any{"preSignedKey": "psk_x"}}}, "pre_signed_keys_not_supported"},
		{"preSignedKey with an API key", "/v1/graphql/", map[string]any{"query": mutation,
			"variables": map[string]any{"input": map[string]any{"preSignedKey": "psk_x", "APIKey": key}}}, "invalid_token_input"},
		{"a field the schema lacks", "/v1/graphql/", map[string]any{"query": `mutation { obtainServiceToken(input: {APIKey: "k"}) { token possibleErrors } }`},
			"graphql_validation_failed"},
		{"an input field the schema lacks", "/v1/graphql/", map[string]any{"query": mutation,
			"variables": map[string]any{"input": map[string]any{"email": "a@b.c"}}}, "graphql_validation_failed"},
		{"no trailing slash", "/v1/graphql", map[string]any{"query": mutation,
			"variables": map[string]any{"input": map[string]any{"APIKey": key}}}, ""},
		{"no trailing slash, refused", "/v1/graphql", map[string]any{"query": mutation,
			"variables": map[string]any{"input": map[string]any{"APIKey": "bik_wrong"}}}, "invalid_api_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.do(t, "POST", tc.path, "", tc.body)
			if r.Status != 200 {
				t.Fatalf("%d %.300s, want a GraphQL answer (200)", r.Status, r.Raw)
			}
			errs, _ := r.Body["errors"].([]any)
			got := ""
			if len(errs) > 0 {
				got = errorCode(t, errs)
			} else if data, _ := r.Body["data"].(map[string]any); data["obtainServiceToken"] == nil {
				t.Fatalf("no token and no error: %.300s", r.Raw)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("code (-want +got):\n%s\n%.300s", d, r.Raw)
			}
		})
	}
}
