package validate

import (
	"bytes"
	"unsafe"
)

// The sizes of what the parser builds: a Value for each array element and
// for the root, a Member for each object member.
const (
	valueBytes  = int64(unsafe.Sizeof(Value{}))
	memberBytes = int64(unsafe.Sizeof(Member{}))
)

// ParseMemory returns at most how many bytes ParseBody, of any schema,
// holds at once while it parses body and after, in the tree it returns. It
// reads body once without building anything, in a fraction of the parse's
// time (BenchmarkParseMemory: a sixth for records like E7's, a
// twenty-fifth for numbers), so that a caller can reserve the memory
// before the parse spends it (the API's budget of body memory does).
//
// The cost is what the values cost, not a multiple of the body's size: a
// 2 MB body of a million numbers builds 88 MB of tree, a 2 MB string
// almost none, and a 1 MB body of 500 nested arrays of 999 numbers each 44
// MB of tree and as much again on the parser's stack of unfinished arrays.
// It counts
//
//   - the parser's copy of body, and the decoded copy of each string that
//     has escapes (with the scratch space the longest one is decoded in);
//   - a Value for each array element and a Member for each object member,
//     as if the schema kept every one (it keeps at most MaxValues of them),
//     the members with the room keepMembers may leave unused;
//   - the peak of the parser's stacks, the elements and members of the
//     arrays and objects still open, while the stacks grow by append (the
//     old array and the new one, a quarter larger, at once);
//   - an eighth more for the size classes that allocations are rounded up
//     to.
//
// Invalid JSON is counted up to where the parser stops (a nesting over
// MaxDepth) or as if it were valid: the parse refuses it having built less.
func ParseMemory(body []byte) int64 {
	sh := scanShape(body)
	// keepMembers leaves less than a quarter of a shared allocation unused,
	// and the last one may be unused but for one member; a large object's
	// members have an allocation of exactly their size.
	tree := valueBytes*(sh.items+1) + memberBytes*(sh.ownMembers+(sh.members-sh.ownMembers)*4/3) + memberBytes*keptChunk
	if sh.items+sh.members > MaxValues {
		tree = min(tree, valueBytes+memberBytes*MaxValues*4/3+memberBytes*keptChunk)
	}
	stacks := valueBytes*min(sh.peakItems, MaxValues) + memberBytes*min(sh.peakMembers, MaxValues)
	// The small fixed part: the parser, its pooled scratch space, the
	// stacks' growth while they are short (they double up to 256 entries)
	// and the rounding of large allocations to whole pages.
	const fixed = 128 << 10
	return int64(len(body)) + (tree+sh.escaped)*9/8 + (stacks+sh.longestEscaped)*9/4 + fixed
}

// shape is what ParseMemory counts in a body.
type shape struct {
	items, members int64 // every array element and object member
	// ownMembers are the members of objects of more than keptChunk/4,
	// which keepMembers gives an allocation of their own.
	ownMembers int64
	// peakItems and peakMembers are the most elements and members of
	// arrays and objects open at once: the parser's stacks hold them.
	peakItems, peakMembers int64
	// escaped is the bytes of the strings that have escapes, which the
	// parser decodes into copies, and longestEscaped the longest of them.
	escaped, longestEscaped int64
}

// scanShape counts the shape of body in one pass that builds nothing.
func scanShape(body []byte) shape {
	var (
		sh                     shape
		openItems, openMembers int64 // elements and members of the open arrays and objects
		depth                  int   // arrays and objects open
		// counts holds, for each open array or object by depth, its
		// elements or members so far, and objects whether it is an object.
		counts  [MaxDepth + 1]int64
		objects [MaxDepth + 1]bool
		// first is set after a '[': its first element, if any, begins at
		// the next byte that is not space; the others follow a comma.
		first bool
	)
	s := body
scan:
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if first {
			first = false
			if c != ']' {
				sh.items++
				counts[depth]++
				openItems++
				sh.peakItems = max(sh.peakItems, openItems)
			}
		}
		switch c {
		case '"':
			end, esc := stringEnd(s, i)
			if esc {
				n := int64(end - i)
				sh.escaped += n
				sh.longestEscaped = max(sh.longestEscaped, n)
			}
			i = end
		case '[', '{':
			if depth == MaxDepth {
				break scan // the parser refuses to nest deeper
			}
			depth++
			counts[depth], objects[depth] = 0, c == '{'
			first = c == '['
		case ']', '}':
			if depth == 0 {
				break scan // nothing is open: the parser stops here
			}
			if objects[depth] {
				openMembers -= counts[depth]
				if counts[depth] > keptChunk/4 {
					sh.ownMembers += counts[depth]
				}
			} else {
				openItems -= counts[depth]
			}
			depth--
		case ',':
			if depth > 0 && !objects[depth] {
				sh.items++
				counts[depth]++
				openItems++
				sh.peakItems = max(sh.peakItems, openItems)
			}
		case ':':
			if depth > 0 && objects[depth] {
				sh.members++
				counts[depth]++
				openMembers++
				sh.peakMembers = max(sh.peakMembers, openMembers)
			}
		}
	}
	return sh
}

// stringEnd returns the offset of the quote that closes the string whose
// opening quote is at s[i] (len(s) if none does), and whether the string
// has escapes.
func stringEnd(s []byte, i int) (int, bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(s[j:], '"')
		if k < 0 {
			return len(s), bytes.IndexByte(s[i+1:], '\\') >= 0
		}
		end := j + k
		// The quote is escaped when an odd number of backslashes precede it.
		b := end
		for b > i+1 && s[b-1] == '\\' {
			b--
		}
		if (end-b)%2 == 0 {
			return end, bytes.IndexByte(s[i+1:end], '\\') >= 0
		}
		j = end + 1
	}
}
