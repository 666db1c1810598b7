package validate

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

func TestParseBody_RefusesWhatIsNotAJSONObjectWithOneCodeAndWording(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		body   string
		detail string
	}{
		{"empty body", ``, "JSON parse error: invalid JSON at byte offset 0: unexpected end of JSON input."},
		{"truncated object", `{"a":`, "JSON parse error: invalid JSON at byte offset 5: unexpected end of JSON input."},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", "JSON parse error: invalid JSON at byte offset 6: invalid UTF-8 in string literal."},
		{"array", `[{"a":1}]`, "The request body must be a JSON object, not array."},
		{"string", `"{}"`, "The request body must be a JSON object, not string."},
		{"null", `null`, "The request body must be a JSON object, not null."},
		{"number", `1e2`, "The request body must be a JSON object, not number."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root, perr := ParseBody([]byte(tt.body))
			if root != nil || perr == nil {
				t.Fatalf("ParseBody(%q) = %v, %v; want a parse_error", tt.body, root, perr)
			}
			want := &problem.Error{Kind: problem.Invalid, Code: CodeParseError, Detail: tt.detail}
			if diff := cmp.Diff(want, perr); diff != "" {
				t.Errorf("ParseBody(%q) error (-want +got):\n%s", tt.body, diff)
			}
		})
	}
}

func TestParseBody_ReturnsTheObject(t *testing.T) {
	t.Parallel()
	root, perr := ParseBody([]byte(` {"a": 1e2, "a": "x"} `))
	if perr != nil {
		t.Fatal(perr)
	}
	got := []string{}
	for _, m := range root.Members {
		got = append(got, m.Key+"="+m.Value.Raw)
	}
	if diff := cmp.Diff([]string{"a=1e2", `a="x"`}, got); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
}
