package validate

import "context"

// Subject is the supplier and the external account number that a request
// body names, for the request log: an operator finds the lines of one
// account by them. The API puts one in each request's context before the
// body is parsed, and the code that parses the body notes what it found
// (NoteSubject), so that the body is decoded once.
type Subject struct{ Supplier, Number string }

type subjectKey struct{}

// WithSubject returns ctx carrying s, for NoteSubject to fill.
func WithSubject(ctx context.Context, s *Subject) context.Context {
	return context.WithValue(ctx, subjectKey{}, s)
}

// NoteSubject records the supplier and account number of a parsed body in
// the Subject that ctx carries, if any; empty values change nothing.
func NoteSubject(ctx context.Context, supplier, number string) {
	s, _ := ctx.Value(subjectKey{}).(*Subject)
	if s == nil {
		return
	}
	if supplier != "" {
		s.Supplier = supplier
	}
	if number != "" {
		s.Number = number
	}
}
