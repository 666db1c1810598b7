package validate

import (
	"context"
	"errors"
	"fmt"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// CodeParseError is the top-level code of a request body that is not JSON,
// or not a JSON object. Such an answer has no entries in errors.
const CodeParseError = "parse_error"

// ParseBody parses the body of a request of schema o into the tree that
// o.Bind walks. Every endpoint's body goes through it, so that a body
// refused on one endpoint is refused on all of them with the same answer.
//
// The schema bounds what is built, so that a body cannot make the service
// build a tree many times its size: an array keeps at most its item limit
// of elements (MaxItems, else DefaultMaxItems) and the others are only
// checked for syntax (Bind then reports too_many_items); a value the binding
// does not read (an unknown field, an array where a string belongs, a body
// that is not an object) keeps only its kind; and the tree keeps at most
// the schema's value budget (MaxValues unless WithMaxValues lowered it).
//
// It returns the root object, or a *problem.Error: of kind Invalid with code
// parse_error for malformed JSON (the detail names the byte offset of the
// problem) or valid JSON that is not an object (the detail names what the
// body is); of kind TooLarge with code request_too_large for a body with
// more values than the budget.
func (o *Object[T]) ParseBody(body []byte) (*Value, *problem.Error) {
	return parseBody(body, &Spec{Type: TypeObject, Object: o.spec}, o.MaxValues())
}

// ParseBody parses a request body without a schema (the GraphQL request) as
// Object.ParseBody does: any JSON object, with DefaultMaxItems elements per
// array.
func ParseBody(body []byte) (*Value, *problem.Error) {
	return parseBody(body, freeForm, MaxValues)
}

func parseBody(body []byte, root *Spec, maxValues int) (*Value, *problem.Error) {
	p := parser{s: string(body), limited: true, maxValues: maxValues}
	p.borrow()
	defer p.giveBack()
	v, err := p.parse(root)
	switch {
	case errors.Is(err, errTooManyValues):
		return nil, problem.New(problem.TooLarge, CodeRequestTooLarge,
			fmt.Sprintf("The request body has more than %d JSON values; send the items in several requests.", maxValues))
	case err != nil:
		return nil, problem.New(problem.Invalid, CodeParseError, "JSON parse error: "+err.Error()+".")
	}
	if v.Kind != KindObject {
		return nil, problem.New(problem.Invalid, CodeParseError, "The request body must be a JSON object, not "+v.Kind.String()+".")
	}
	return v, nil
}

// Decode is the one decode step of every endpoint that takes a body: it
// parses body (ParseBody), ends the parse phase (Checkpoint Parsed), binds
// the tree to dst with each field's problems in w (Bind), and ends the
// bind phase (Checkpoint Bound). What an endpoint checks beyond its fields
// comes after it.
//
// It returns the tree, for a caller that reads more of it than dst holds.
// The error is the parse_error *problem.Error of a body that is not a JSON
// object (dst is then untouched), or the cancellation of a request whose
// client hung up (Checkpoint's, wrapping ctx's; dst is bound when it
// came after the bind).
func (o *Object[T]) Decode(ctx context.Context, body []byte, w *Walker, dst *T) (*Value, error) {
	root, perr := o.ParseBody(body)
	if perr != nil {
		return nil, perr
	}
	if err := Checkpoint(ctx, Parsed); err != nil {
		return root, err
	}
	o.Bind(w, root, dst)
	if err := Checkpoint(ctx, Bound); err != nil {
		return root, err
	}
	return root, nil
}
