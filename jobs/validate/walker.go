package validate

import (
	"strconv"
	"strings"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// Walker collects problems while a schema walks a decoded payload. It keeps
// the current dot path as a stack of segments and renders it only when a
// problem is recorded, because a valid payload, the common case, never needs
// the string.
type Walker struct {
	// Errors holds every problem found so far, in the order found. Record
	// problems with Add or AddAt, so that HasErrorAt sees them.
	Errors problem.List
	segs   []string
	attrs  map[string]bool // paths with a problem; built on the first HasErrorAt
	// size is what Errors' texts take (problemSize); past MaxProblemBytes
	// no problem is recorded but one CodeTooManyErrors.
	size int
}

// MaxProblemBytes bounds the text of the problems one request collects:
// its attrs, codes and details. Problems are not part of the body budget
// (BODY_MEMORY counts the parse): a 6 MB body whose free-form objects
// nest 480 deep, each with duplicate keys, made 999,000 problems with paths
// of a kilobyte, 1.29 GB held by one request. 8 MiB holds tens of
// thousands of the usual problems (E2's 10,000 unknown accounts take
// 1.5 MB).
const MaxProblemBytes = 8 << 20

// CodeTooManyErrors ends the problems of a request that found more than
// MaxProblemBytes of them: the ones listed are the first found.
const CodeTooManyErrors = "too_many_errors"

// problemSize is what a problem is counted as against MaxProblemBytes: its
// texts, and the strings' and the entry's own headers.
func problemSize(attr, code, detail string) int { return len(attr) + len(code) + len(detail) + 80 }

// Push enters the member key of the current object. The empty key, which
// JSON allows, is written "" so that every path stays non-empty and a
// problem under it still points somewhere.
func (w *Walker) Push(key string) {
	if key == "" {
		key = `""`
	}
	w.segs = append(w.segs, key)
}

// PushIndex enters element i of the current array.
func (w *Walker) PushIndex(i int) { w.segs = append(w.segs, strconv.Itoa(i)) }

// Pop leaves the segment entered last.
func (w *Walker) Pop() { w.segs = w.segs[:len(w.segs)-1] }

// Path returns the current dot path ("customers.0.landline").
func (w *Walker) Path() string { return strings.Join(w.segs, ".") }

// Add records a problem at the current path.
func (w *Walker) Add(code, format string, args ...any) {
	w.AddAt(w.Path(), code, format, args...)
}

// AddAt records a problem at attr, a path built with Attr. Past
// MaxProblemBytes of problems it records one CodeTooManyErrors, then
// nothing more.
func (w *Walker) AddAt(attr, code, format string, args ...any) {
	if w.size > MaxProblemBytes {
		return
	}
	w.Errors.Add(attr, code, format, args...)
	last := w.Errors[len(w.Errors)-1]
	w.size += problemSize(last.Attr, last.Code, last.Detail)
	if w.size > MaxProblemBytes {
		w.Errors[len(w.Errors)-1] = problem.FieldError{Code: CodeTooManyErrors,
			Detail: "The request has more problems than one answer lists; these are the first found. Mend them and send it again."}
		return
	}
	if w.attrs != nil {
		w.attrs[attr] = true
	}
}

// HasErrorAt reports whether a problem was already recorded at attr, so that
// a later rule does not pile a second, less precise problem onto it. The
// index keeps a payload with thousands of problems from making this
// quadratic.
func (w *Walker) HasErrorAt(attr string) bool {
	if w.attrs == nil {
		w.attrs = make(map[string]bool, len(w.Errors))
		for _, e := range w.Errors {
			w.attrs[e.Attr] = true
		}
	}
	return w.attrs[attr]
}

// Repeats returns the indexes of the items whose key (other than "") already
// appeared at a lower index, for "must be unique" rules that report the
// second occurrence. Short lists are compared pairwise; long ones, which only
// a hostile payload has, through a map.
func Repeats[T any](items []T, key func(*T) string) []int {
	var out []int
	if len(items) <= 16 {
		for i := range items {
			k := key(&items[i])
			for j := 0; j < i && k != ""; j++ {
				if key(&items[j]) == k {
					out = append(out, i)
					break
				}
			}
		}
		return out
	}
	seen := make(map[string]bool, len(items))
	for i := range items {
		if k := key(&items[i]); k != "" {
			if seen[k] {
				out = append(out, i)
			}
			seen[k] = true
		}
	}
	return out
}

// Attr joins field names (string) and zero-based indexes (int) into a dot
// path, for rules that run after the walk.
func Attr(parts ...any) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('.')
		}
		switch p := p.(type) {
		case string:
			b.WriteString(p)
		case int:
			b.WriteString(strconv.Itoa(p))
		default:
			panic("validate.Attr: parts must be string or int")
		}
	}
	return b.String()
}
