package validate

import "github.com/bulkimport/bulkimport/jobs/problem"

// CodeParseError is the top-level code of a request body that is not JSON,
// or not a JSON object. Such an answer has no entries in errors.
const CodeParseError = "parse_error"

// ParseBody parses a request body into the tree that the schemas walk.
// Every endpoint's body goes through it, so that a body refused on one
// endpoint is refused on all of them with the same answer.
//
// It returns the root object, or a *problem.Error of kind Invalid with code
// parse_error: for malformed JSON the detail names the byte offset of the
// problem; for valid JSON that is not an object it names what the body is.
func ParseBody(body []byte) (*Value, *problem.Error) {
	root, err := Parse(body)
	if err != nil {
		return nil, problem.New(problem.Invalid, CodeParseError, "JSON parse error: "+err.Error()+".")
	}
	if root.Kind != KindObject {
		return nil, problem.New(problem.Invalid, CodeParseError, "The request body must be a JSON object, not "+root.Kind.String()+".")
	}
	return root, nil
}
