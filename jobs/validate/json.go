package validate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is the JSON type of a Value.
type Kind uint8

// The JSON types. The zero Kind never comes out of Parse.
const (
	KindNull Kind = iota + 1
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

// String returns the JSON name of the kind, as used in error details.
func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "boolean"
	case KindNumber:
		return "number"
	case KindString:
		return "string"
	case KindArray:
		return "array"
	case KindObject:
		return "object"
	}
	return "invalid"
}

// Value is one parsed JSON value. Numbers keep their literal text, so no
// number ever passes through float64, and objects keep every member in input
// order, duplicates included, so that a duplicate key can be reported at its
// own path instead of being silently overwritten as encoding/json does.
type Value struct {
	Kind Kind
	Bool bool
	// Truncated is set by ParseBody on an array with more elements than its
	// item limit, or an object with more than DefaultMaxMembers members:
	// Items or Members holds those up to the limit, and the others were only
	// checked for syntax, never built. Binders refuse such a value with
	// too_many_items. (It sits beside Kind and Bool so that the three share
	// one word: a Value is 88 bytes, not 96, and a parsed account payload's
	// tree about 2 KB smaller.)
	Truncated bool
	// Text is the decoded contents of a string, or the literal of a number.
	Text string
	// Raw is the exact input text of the value, for fields kept as JSON.
	Raw     string
	Items   []Value
	Members []Member
}

// Member is one key of a JSON object with its value.
type Member struct {
	Key   string
	Value Value
}

// SyntaxError is malformed JSON. Offset is the byte offset of the problem.
type SyntaxError struct {
	Offset int
	Msg    string
}

// Error names the offset and the problem.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte offset %d: %s", e.Offset, e.Msg)
}

// MaxDepth is how deeply arrays and objects may nest. The account schema needs
// seven levels; the limit exists because metadata values are free-form and a
// hostile body of a million '[' must not exhaust the stack.
const MaxDepth = 512

// Parse decodes one JSON value that spans all of data (surrounding whitespace
// allowed). It accepts exactly RFC 8259 JSON in UTF-8; escaped lone
// surrogates become U+FFFD, as with encoding/json. It returns a *SyntaxError
// for anything else. Parse keeps every value: request bodies go through
// ParseBody, which bounds what it builds.
//
// Parse exists instead of json.Decoder.Token because it is several times
// faster, allocates one tree, and keeps the information validation needs:
// literal numbers, member order, duplicate keys and raw text.
func Parse(data []byte) (*Value, error) {
	p := parser{s: string(data)}
	p.borrow()
	defer p.giveBack()
	return p.parse(nil)
}

// parse decodes the whole input as one value described by f.
func (p *parser) parse(f *Spec) (*Value, error) {
	p.skipSpace()
	v := new(Value)
	if err := p.value(v, f); err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.i < len(p.s) {
		return nil, p.errorf("invalid character %s after top-level value", quoteByte(p.s[p.i]))
	}
	return v, nil
}

type parser struct {
	s     string
	i     int
	depth int
	buf   []byte // scratch space for strings with escapes
	// limited is set for request bodies (ParseBody): an array keeps at most
	// its item limit of elements, and the tree at most MaxValues values.
	limited bool
	values  int // values kept so far
	// maxValues is the budget of a limited parse.
	maxValues int
	// Elements and members of the arrays and objects being parsed, so that
	// each gets one slice of exactly its length when it is complete instead
	// of a slice grown by appending (up to twice as large, plus garbage).
	items   []Value
	members []Member
	// kept is where the members of completed objects are copied to
	// (keepMembers): slices of a few large allocations instead of one
	// allocation per object.
	kept []Member
	// scratch is where buf, items and members came from (borrow), for
	// giveBack; nil for a parser that borrowed none.
	scratch *scratch
}

// scratch is a parser's working space, kept between parses so that each
// does not grow its stacks again from nothing (for an account payload,
// about 28 KB of garbage a parse).
type scratch struct {
	buf     []byte
	items   []Value
	members []Member
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledScratch is the most elements a pooled stack keeps: the stacks of
// an unusually large body are left to the garbage collector.
const maxPooledScratch = 4096

// borrow gives p pooled stacks; giveBack returns them, emptied.
func (p *parser) borrow() {
	p.scratch = scratchPool.Get().(*scratch)
	p.buf, p.items, p.members = p.scratch.buf[:0], p.scratch.items[:0], p.scratch.members[:0]
}

func (p *parser) giveBack() {
	// A parse that failed midway leaves entries on its stacks, which point
	// into its input; a completed one has emptied them.
	clear(p.items)
	clear(p.members)
	if cap(p.items) > maxPooledScratch || cap(p.members) > maxPooledScratch || cap(p.buf) > 64<<10 {
		return
	}
	p.scratch.buf, p.scratch.items, p.scratch.members = p.buf[:0], p.items[:0], p.members[:0]
	scratchPool.Put(p.scratch)
}

// errTooManyValues is returned by a limited parse that would keep more than
// MaxValues values.
var errTooManyValues = fmt.Errorf("more than %d values", MaxValues)

// keep counts one more value kept in the tree.
func (p *parser) keep() error {
	p.values++
	if p.limited && p.values > p.maxValues {
		return errTooManyValues
	}
	return nil
}

func (p *parser) errorf(format string, args ...any) *SyntaxError {
	return &SyntaxError{Offset: p.i, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) eof() *SyntaxError {
	return &SyntaxError{Offset: len(p.s), Msg: "unexpected end of JSON input"}
}

// quoteByte names an offending byte the way encoding/json does ('x'), or by
// its hex value when it is not ASCII.
func quoteByte(c byte) string {
	switch {
	case c == '\'':
		return `'\''`
	case c == '"':
		return `'"'`
	case c >= utf8.RuneSelf:
		return fmt.Sprintf("byte 0x%02x", c)
	}
	return strconv.QuoteRune(rune(c))
}

func (p *parser) skipSpace() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value parses one value that f describes (see Spec.keepsObject).
func (p *parser) value(v *Value, f *Spec) error {
	if p.i >= len(p.s) {
		return p.eof()
	}
	start := p.i
	switch c := p.s[p.i]; {
	case c == '{':
		if err := p.object(v, f, f.keepsObject()); err != nil {
			return err
		}
	case c == '[':
		if err := p.array(v, f, f.keepsArray()); err != nil {
			return err
		}
	case c == '"':
		s, err := p.str()
		if err != nil {
			return err
		}
		v.Kind, v.Text = KindString, s
	case c == '-' || (c >= '0' && c <= '9'):
		if err := p.number(); err != nil {
			return err
		}
		v.Kind, v.Text = KindNumber, p.s[start:p.i]
	case c == 't':
		if err := p.literal("true"); err != nil {
			return err
		}
		v.Kind, v.Bool = KindBool, true
	case c == 'f':
		if err := p.literal("false"); err != nil {
			return err
		}
		v.Kind = KindBool
	case c == 'n':
		if err := p.literal("null"); err != nil {
			return err
		}
		v.Kind = KindNull
	default:
		return p.errorf("invalid character %s looking for beginning of value", quoteByte(c))
	}
	v.Raw = p.s[start:p.i]
	return nil
}

func (p *parser) literal(word string) error {
	for j := 0; j < len(word); j++ {
		if p.i >= len(p.s) {
			return p.eof()
		}
		if p.s[p.i] != word[j] {
			return p.errorf("invalid character %s in literal %s", quoteByte(p.s[p.i]), word)
		}
		p.i++
	}
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errorf("exceeded maximum nesting depth of %d", MaxDepth)
	}
	return nil
}

// object parses an object that f describes. Unless keep is set it only
// checks the syntax: v gets its Kind and no members. In a limited parse, the
// members beyond DefaultMaxMembers are checked the same way and v is marked
// Truncated.
func (p *parser) object(v *Value, f *Spec, keep bool) error {
	if err := p.enter(); err != nil {
		return err
	}
	p.i++ // '{'
	v.Kind = KindObject
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		if keep {
			v.Members = []Member{}
		}
		p.depth--
		return nil
	}
	base := len(p.members)
	limit := -1
	if keep && p.limited {
		limit = DefaultMaxMembers
	}
	keeping := keep
	// m and it (in array) are declared outside their loops: Go's escape
	// analysis moves a variable of a loop body whose address reaches a
	// recursive call to the heap, one allocation per member.
	var m Member
	for n := 0; ; n++ {
		if keeping && n == limit {
			v.Truncated, keeping = true, false
		}
		if p.i >= len(p.s) {
			return p.eof()
		}
		if p.s[p.i] != '"' {
			return p.errorf("invalid character %s looking for beginning of object key string", quoteByte(p.s[p.i]))
		}
		key, err := p.str()
		if err != nil {
			return err
		}
		p.skipSpace()
		if p.i >= len(p.s) {
			return p.eof()
		}
		if p.s[p.i] != ':' {
			return p.errorf("invalid character %s after object key", quoteByte(p.s[p.i]))
		}
		p.i++
		p.skipSpace()
		m = Member{Key: key}
		child := skipSpec
		if keeping {
			child = f.memberSpec(key)
		}
		if err := p.value(&m.Value, child); err != nil {
			return err
		}
		if keeping {
			if err := p.keep(); err != nil {
				return err
			}
			p.members = append(p.members, m)
		}
		p.skipSpace()
		if p.i >= len(p.s) {
			return p.eof()
		}
		switch p.s[p.i] {
		case ',':
			p.i++
			p.skipSpace()
		case '}':
			p.i++
			if keep {
				v.Members = p.keepMembers(p.members[base:])
				clear(p.members[base:]) // drop references into the tree
				p.members = p.members[:base]
			}
			p.depth--
			return nil
		default:
			return p.errorf("invalid character %s after object key:value pair", quoteByte(p.s[p.i]))
		}
	}
}

// array parses an array that f describes. Unless keep is set it only checks
// the syntax: v gets its Kind and no items. In a limited parse, the elements
// beyond f's item limit are checked the same way and v is marked Truncated.
func (p *parser) array(v *Value, f *Spec, keep bool) error {
	if err := p.enter(); err != nil {
		return err
	}
	p.i++ // '['
	v.Kind = KindArray
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		if keep {
			v.Items = []Value{}
		}
		p.depth--
		return nil
	}
	base := len(p.items)
	child, limit := skipSpec, -1
	if keep {
		child = f.itemSpec()
		if p.limited {
			limit = f.maxItems()
		}
	}
	keeping := keep
	var it Value
	for n := 0; ; n++ {
		if keeping && n == limit {
			v.Truncated, keeping, child = true, false, skipSpec
		}
		it = Value{}
		if err := p.value(&it, child); err != nil {
			return err
		}
		if keeping {
			if err := p.keep(); err != nil {
				return err
			}
			p.items = append(p.items, it)
		}
		p.skipSpace()
		if p.i >= len(p.s) {
			return p.eof()
		}
		switch p.s[p.i] {
		case ',':
			p.i++
			p.skipSpace()
		case ']':
			p.i++
			if keep {
				v.Items = slices.Clone(p.items[base:])
				clear(p.items[base:]) // drop references into the tree
				p.items = p.items[:base]
			}
			p.depth--
			return nil
		default:
			return p.errorf("invalid character %s after array element", quoteByte(p.s[p.i]))
		}
	}
}

// keptChunk bounds the members keepMembers allocates room for at once,
// before the object that needs them: a body is never charged much more than
// the members it has.
const keptChunk = 512

// keepMembers returns a copy of ms, of exactly its length and capacity, for
// an object's Members. The copies of one parse share allocations: the first
// has room for as many members as the input has colons (each member has
// one, besides those inside strings), up to keptChunk, and when that is
// used up the next one has room for keptChunk members. The members of all
// of an account payload's objects thus cost one allocation, not one per
// object. An object of more than a quarter of keptChunk members, but the
// first, gets an allocation of its own: a shared one is then given up only
// for an object of at most a quarter of keptChunk that does not fit, with
// less than a quarter of it unused, which ParseMemory counts on (given up
// for any object that did not fit, one for each object of 300 members left
// 212 of 512 unused).
func (p *parser) keepMembers(ms []Member) []Member {
	if p.kept != nil && len(ms) > keptChunk/4 {
		return append(make([]Member, 0, len(ms)), ms...)
	}
	if len(p.kept)+len(ms) > cap(p.kept) {
		room := keptChunk
		if p.kept == nil {
			room = min(strings.Count(p.s, ":"), keptChunk)
		}
		p.kept = make([]Member, 0, max(room, len(ms)))
	}
	start := len(p.kept)
	p.kept = append(p.kept, ms...)
	return p.kept[start:len(p.kept):len(p.kept)]
}

// number scans a number literal; the caller slices its text.
func (p *parser) number() error {
	s := p.s
	if s[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i >= len(s):
		return p.eof()
	case s[p.i] == '0':
		p.i++
	case s[p.i] >= '1' && s[p.i] <= '9':
		for p.i < len(s) && s[p.i] >= '0' && s[p.i] <= '9' {
			p.i++
		}
	default:
		return p.errorf("invalid character %s in numeric literal", quoteByte(s[p.i]))
	}
	if p.i < len(s) && s[p.i] == '.' {
		p.i++
		if err := p.digits(); err != nil {
			return err
		}
	}
	if p.i < len(s) && (s[p.i] == 'e' || s[p.i] == 'E') {
		p.i++
		if p.i < len(s) && (s[p.i] == '+' || s[p.i] == '-') {
			p.i++
		}
		if err := p.digits(); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) digits() error {
	if p.i >= len(p.s) {
		return p.eof()
	}
	if p.s[p.i] < '0' || p.s[p.i] > '9' {
		return p.errorf("invalid character %s in numeric literal", quoteByte(p.s[p.i]))
	}
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	return nil
}

// str scans a string starting at its opening quote and returns its contents.
// Strings without escapes are substrings of the input and cost nothing.
func (p *parser) str() (string, error) {
	p.i++ // opening quote
	start := p.i
	s := p.s
	for p.i < len(s) {
		c := s[p.i]
		switch {
		case c == '"':
			p.i++
			return s[start : p.i-1], nil
		case c == '\\':
			return p.strEscaped(start)
		case c < 0x20:
			return "", p.errorf("invalid character %s in string literal", quoteByte(c))
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(s[p.i:])
			if r == utf8.RuneError && size == 1 {
				return "", p.errorf("invalid UTF-8 in string literal")
			}
			p.i += size
		}
	}
	return "", p.eof()
}

func (p *parser) strEscaped(start int) (string, error) {
	s := p.s
	b := append(p.buf[:0], s[start:p.i]...)
	for p.i < len(s) {
		c := s[p.i]
		switch {
		case c == '"':
			p.i++
			p.buf = b
			return string(b), nil
		case c == '\\':
			p.i++
			if p.i >= len(s) {
				return "", p.eof()
			}
			e := s[p.i]
			p.i++
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					// A high surrogate pairs with a following \u escape; any
					// other surrogate becomes U+FFFD, as with encoding/json.
					if p.i+1 < len(s) && s[p.i] == '\\' && s[p.i+1] == 'u' {
						save := p.i
						p.i += 2
						r2, err := p.hex4()
						if err != nil {
							return "", err
						}
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							b = utf8.AppendRune(b, d)
							continue
						}
						p.i = save
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
			default:
				p.i--
				return "", p.errorf("invalid character %s in string escape code", quoteByte(e))
			}
		case c < 0x20:
			return "", p.errorf("invalid character %s in string literal", quoteByte(c))
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(s[p.i:])
			if r == utf8.RuneError && size == 1 {
				return "", p.errorf("invalid UTF-8 in string literal")
			}
			b = append(b, s[p.i:p.i+size]...)
			p.i += size
		}
	}
	return "", p.eof()
}

func (p *parser) hex4() (rune, error) {
	var r rune
	for j := 0; j < 4; j++ {
		if p.i >= len(p.s) {
			return 0, p.eof()
		}
		c := p.s[p.i]
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, p.errorf("invalid character %s in \\u hexadecimal character escape", quoteByte(c))
		}
		p.i++
	}
	return r, nil
}
