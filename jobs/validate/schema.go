// Package validate checks decoded JSON payloads against a declared schema and
// binds them into typed Go structs in the same walk, collecting every problem
// at its dot path instead of stopping at the first.
//
// A schema is built once, at package initialisation, from Object, Field and
// Scalar values. The same schema drives the validation and the generated
// reference documentation (Markdown), so that the two cannot drift apart.
//
// Binding uses accessor functions (func(*T) *V) rather than reflection: the
// walk runs once per request on the hot path, and accessors cost a direct
// call each.
package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// The generic problem codes the schema itself produces. Semantic rules of a
// payload add their own codes on top.
const (
	CodeInvalid          = "invalid"          // wrong JSON type, or null where not allowed, or a malformed number
	CodeRequired         = "required"         // a required field is missing
	CodeBlank            = "blank"            // a string that must have content is empty or only spaces
	CodeMaxLength        = "max_length"       // a string has more characters than allowed
	CodeInvalidChoice    = "invalid_choice"   // a value outside a closed set
	CodeInvalidDate      = "invalid_date"     // not a real date in YYYY-MM-DD form
	CodeInvalidDatetime  = "invalid_datetime" // not a real instant in RFC 3339 form
	CodeMinValue         = "min_value"        // a negative count or measure
	CodeUnknownField     = "unknown_field"    // a field the schema does not document
	CodeDuplicateKey     = "duplicate_key"    // the same key twice in one JSON object
	CodeNotSupported     = "not_supported"    // an element of a list that must be empty
	CodeNullCharacters   = "null_characters_not_allowed"
	CodeNumberOutOfRange = "number_out_of_range" // a number inside a free-form object that storage cannot hold
)

// Type is the JSON shape a field accepts, as named in the reference.
type Type uint8

// The field types.
const (
	TypeString Type = iota + 1
	TypeInteger
	TypeDecimal
	TypeBoolean
	TypeDate
	TypeDatetime
	TypeObject     // an object with the fields of Spec.Object
	TypeObjectList // an array of such objects
	TypeJSONObject // any JSON object, kept as JSON
	TypeEmptyList  // an array that must be empty
)

// String names the type for the reference.
func (t Type) String() string {
	switch t {
	case TypeString:
		return "string"
	case TypeInteger:
		return "integer"
	case TypeDecimal:
		return "decimal number"
	case TypeBoolean:
		return "boolean"
	case TypeDate:
		return "date `YYYY-MM-DD`"
	case TypeDatetime:
		return "datetime (RFC 3339, stored in UTC)"
	case TypeObject:
		return "object"
	case TypeObjectList:
		return "array of object"
	case TypeJSONObject:
		return "JSON object"
	case TypeEmptyList:
		return "array (empty)"
	}
	return "?"
}

// Spec describes one field: what the walk checks and what the reference
// shows. Options fill it in.
type Spec struct {
	Name       string
	Type       Type
	Required   bool
	Nullable   bool     // null is accepted and treated as omitted
	AllowBlank bool     // "" (or only spaces) is accepted for a string
	MaxLength  int      // in characters; 0 means no limit
	Choices    []string // closed set of accepted strings
	// OpenCode accepts any code of at most MaxCodeLength characters: the
	// spec lists such values "in use", which is an example, not the whole
	// set, and no source fixes their form (lower case and a leading digit,
	// as in 3PH, are codes too).
	OpenCode    bool
	NonNegative bool
	// Object describes the fields of an object, or of each element of an
	// array of objects.
	Object *ObjectSpec
	// Note is shown in the reference: a format, a default, or the billing
	// reason why an optional-looking field is required.
	Note string
	// Codes are the codes of rules that run outside the schema walk (for
	// example a phone number check), listed in the reference with the field.
	Codes []string
	// MaxItems limits the elements of an array field (see ParseBody); List
	// and EmptyList set DefaultMaxItems unless given MaxItems.
	MaxItems int

	item   *Spec // the elements of an array of objects
	custom bool  // bound by a Custom function, which may read any value
}

// Option sets a property of a Spec.
type Option func(*Spec)

// Required makes a missing field a "required" problem.
func Required() Option { return func(s *Spec) { s.Required = true } }

// Nullable accepts null and treats it as if the field were omitted.
func Nullable() Option { return func(s *Spec) { s.Nullable = true } }

// AllowBlank accepts an empty string.
func AllowBlank() Option { return func(s *Spec) { s.AllowBlank = true } }

// MaxLength limits a string to n characters (not bytes).
func MaxLength(n int) Option { return func(s *Spec) { s.MaxLength = n } }

// OneOf limits a string to a closed set of values.
func OneOf(values ...string) Option { return func(s *Spec) { s.Choices = values } }

// OpenCode accepts any code of at most MaxCodeLength characters, for
// values the spec lists only as examples "in use"; a longer one is refused
// with invalid_choice. As for every string, "" is refused as blank unless
// AllowBlank is also given, and U+0000 is refused.
func OpenCode() Option { return func(s *Spec) { s.OpenCode = true } }

// MaxCodeLength bounds open codes (OpenCode): far above any real code, it
// keeps a code a code rather than a text.
const MaxCodeLength = 64

// isOpenCode reports whether v is a code: not empty and at most
// MaxCodeLength characters.
func isOpenCode(v string) bool {
	return v != "" && (len(v) <= MaxCodeLength || utf8.RuneCountInString(v) <= MaxCodeLength)
}

// NonNegative refuses numbers below zero.
func NonNegative() Option { return func(s *Spec) { s.NonNegative = true } }

// Note adds a sentence to the field's row in the reference.
func Note(text string) Option { return func(s *Spec) { s.Note = text } }

// Codes lists the codes of rules checked outside the walk, for the reference.
func Codes(codes ...string) Option { return func(s *Spec) { s.Codes = append(s.Codes, codes...) } }

func newSpec(name string, t Type, opts []Option) *Spec {
	s := &Spec{Name: name, Type: t}
	for _, o := range opts {
		o(s)
	}
	return s
}

// checkString applies the string rules of s and reports each problem.
func (s *Spec) checkString(w *Walker, v string) bool {
	if strings.IndexByte(v, 0) >= 0 {
		// PostgreSQL text and jsonb cannot hold NUL; refusing it here keeps a
		// valid payload storable.
		w.Add(CodeNullCharacters, "Null characters are not allowed.")
		return false
	}
	if !s.AllowBlank && strings.TrimSpace(v) == "" {
		w.Add(CodeBlank, "This field may not be blank.")
		return false
	}
	if s.MaxLength > 0 && len(v) > s.MaxLength && utf8.RuneCountInString(v) > s.MaxLength {
		w.Add(CodeMaxLength, "Ensure this field has no more than %d characters.", s.MaxLength)
		return false
	}
	if s.OpenCode && !(s.AllowBlank && v == "") && !isOpenCode(v) {
		w.Add(CodeInvalidChoice, "A code has at most %d characters.", MaxCodeLength)
		return false
	}
	if s.Choices != nil && !slices.Contains(s.Choices, v) {
		w.Add(CodeInvalidChoice, "%q is not a valid choice. Valid choices: %s.", v, strings.Join(s.Choices, ", "))
		return false
	}
	return true
}

// ErrorCodes lists every code the walk can report for this field, followed
// by its Codes, for the reference.
func (s *Spec) ErrorCodes() []string {
	var c []string
	if s.Required {
		c = append(c, CodeRequired)
	}
	c = append(c, CodeInvalid)
	switch s.Type {
	case TypeString:
		c = append(c, CodeNullCharacters)
		if !s.AllowBlank {
			c = append(c, CodeBlank)
		}
		if s.MaxLength > 0 {
			c = append(c, CodeMaxLength)
		}
		if s.Choices != nil || s.OpenCode {
			c = append(c, CodeInvalidChoice)
		}
	case TypeDate:
		c = append(c, CodeInvalidDate)
	case TypeDatetime:
		c = append(c, CodeInvalidDatetime)
	case TypeJSONObject:
		c = append(c, CodeNullCharacters, CodeNumberOutOfRange, CodeTooManyItems)
	case TypeEmptyList:
		c = append(c, CodeNotSupported)
	}
	if s.NonNegative {
		c = append(c, CodeMinValue)
	}
	if s.MaxItems > 0 {
		c = append(c, CodeTooManyItems)
	}
	for _, x := range s.Codes {
		if !slices.Contains(c, x) {
			c = append(c, x)
		}
	}
	return c
}

// Field is one member of an Object[T]: its Spec and how its value is checked
// and stored into a *T.
type Field[T any] struct {
	Spec *Spec
	bind func(w *Walker, v *Value, dst *T)
}

// nullable handles null for every field kind: accepted and ignored when the
// spec allows it, an "invalid" problem otherwise. It reports whether the walk
// should go on with the value.
func nullable(w *Walker, s *Spec, v *Value) bool {
	if v.Kind != KindNull {
		return true
	}
	if !s.Nullable {
		w.Add(CodeInvalid, "This field may not be null.")
	}
	return false
}

// Req is a required scalar field stored in a plain V.
func Req[T, V any](name string, sc Scalar[V], at func(*T) *V, opts ...Option) Field[T] {
	s := newSpec(name, sc.typ, append([]Option{Required()}, opts...))
	return Field[T]{Spec: s, bind: func(w *Walker, v *Value, dst *T) {
		if !nullable(w, s, v) {
			return
		}
		if x, ok := sc.parse(w, s, v); ok {
			*at(dst) = x
		}
	}}
}

// Opt is a scalar field stored in a *V that stays nil when the field is
// omitted, so that the normalised payload omits it too. Add Required() for a
// field that is required only in some variants of a union.
func Opt[T, V any](name string, sc Scalar[V], at func(*T) **V, opts ...Option) Field[T] {
	s := newSpec(name, sc.typ, opts)
	return Field[T]{Spec: s, bind: func(w *Walker, v *Value, dst *T) {
		if !nullable(w, s, v) {
			return
		}
		if x, ok := sc.parse(w, s, v); ok {
			*at(dst) = &x
		}
	}}
}

// Obj is a field whose value is an object of schema o.
func Obj[T, U any](name string, o *Object[U], at func(*T) **U, opts ...Option) Field[T] {
	s := newSpec(name, TypeObject, opts)
	s.Object = o.spec
	return Field[T]{Spec: s, bind: func(w *Walker, v *Value, dst *T) {
		if !nullable(w, s, v) {
			return
		}
		if v.Kind != KindObject {
			wrongType(w, "an object", v)
			return
		}
		u := new(U)
		o.Bind(w, v, u)
		*at(dst) = u
	}}
}

// List is a field whose value is an array of objects of schema o. The Go
// slice has one element per array element, also for elements with problems,
// so that indexes in later rules match the input. An empty array yields an
// empty, non-nil slice, so that it encodes as [] again.
//
// An array longer than its item limit (MaxItems, DefaultMaxItems by
// default) is a too_many_items problem at its path; ParseBody keeps only the
// elements up to the limit, which are bound as usual.
func List[T, U any](name string, o *Object[U], at func(*T) *[]U, opts ...Option) Field[T] {
	s := newSpec(name, TypeObjectList, append([]Option{MaxItems(DefaultMaxItems)}, opts...))
	s.Object = o.spec
	s.item = &Spec{Name: name, Type: TypeObject, Object: o.spec}
	return Field[T]{Spec: s, bind: func(w *Walker, v *Value, dst *T) {
		if !nullable(w, s, v) {
			return
		}
		if v.Kind != KindArray {
			wrongType(w, "an array", v)
			return
		}
		if v.Truncated {
			tooManyItems(w, s.MaxItems)
		}
		out := make([]U, len(v.Items))
		for i := range v.Items {
			w.PushIndex(i)
			if it := &v.Items[i]; it.Kind != KindObject {
				wrongType(w, "an object", it)
			} else {
				o.Bind(w, it, &out[i])
			}
			w.Pop()
		}
		*at(dst) = out
	}}
}

// JSONObject is a field whose value may be any JSON object. It is kept as
// compact JSON with <, > and & escaped the way encoding/json writes them, so
// that encoding the result and validating it again yields the same bytes.
func JSONObject[T any](name string, at func(*T) *json.RawMessage, opts ...Option) Field[T] {
	s := newSpec(name, TypeJSONObject, opts)
	return Field[T]{Spec: s, bind: func(w *Walker, v *Value, dst *T) {
		if !nullable(w, s, v) {
			return
		}
		if v.Kind != KindObject {
			wrongType(w, "an object", v)
			return
		}
		if !CheckFreeForm(w, v, s) {
			return
		}
		*at(dst) = compactJSON(v.Raw)
	}}
}

// compactJSON returns raw (which Parse accepted) as compact JSON with <, >
// and & escaped the way encoding/json writes them, so that encoding it again
// yields the same bytes.
func compactJSON(raw string) json.RawMessage {
	var compact, escaped bytes.Buffer
	compact.Grow(len(raw))
	_ = json.Compact(&compact, []byte(raw)) // cannot fail: Parse accepted it
	json.HTMLEscape(&escaped, compact.Bytes())
	return json.RawMessage(escaped.Bytes())
}

// EmptyList is an array field whose elements are not accepted (yet): each
// element is a not_supported problem carrying detail. An empty array is kept
// as an empty array. Its item limit, as List's, bounds the problems one
// array can cause.
func EmptyList[T any](name string, at func(*T) *[]json.RawMessage, detail string, opts ...Option) Field[T] {
	s := newSpec(name, TypeEmptyList, append([]Option{MaxItems(DefaultMaxItems)}, opts...))
	return Field[T]{Spec: s, bind: func(w *Walker, v *Value, dst *T) {
		if !nullable(w, s, v) {
			return
		}
		if v.Kind != KindArray {
			wrongType(w, "an array", v)
			return
		}
		if v.Truncated {
			tooManyItems(w, s.MaxItems)
		}
		for i := range v.Items {
			w.PushIndex(i)
			w.Add(CodeNotSupported, "%s", detail)
			w.Pop()
		}
		*at(dst) = []json.RawMessage{}
	}}
}

// CheckFreeForm walks a free-form value v of field s (nil for a value
// without a field of its own) for what the schema cannot see otherwise:
// duplicate keys, NUL characters (which jsonb refuses), numbers beyond what
// PostgreSQL's numeric can hold, arrays that ParseBody cut at their item
// limit (s's for v itself, DefaultMaxItems inside it) and objects it cut at
// DefaultMaxMembers. It reports each problem at its path and returns whether
// there was none. Its work is linear in the size of v.
func CheckFreeForm(w *Walker, v *Value, s *Spec) bool {
	ok := true
	if v.Truncated {
		if v.Kind == KindObject {
			tooManyMembers(w)
		} else {
			tooManyItems(w, s.maxItems())
		}
		ok = false
	}
	switch v.Kind {
	case KindString:
		if strings.IndexByte(v.Text, 0) >= 0 {
			w.Add(CodeNullCharacters, "Null characters are not allowed.")
			ok = false
		}
	case KindNumber:
		if !numericInRange(v.Text) {
			w.Add(CodeNumberOutOfRange, "This number is too large or too precise to be stored.")
			ok = false
		}
	case KindArray:
		for i := range v.Items {
			w.PushIndex(i)
			ok = CheckFreeForm(w, &v.Items[i], nil) && ok
			w.Pop()
		}
	case KindObject:
		repeated := repeatedKeys(v.Members)
		for i := range v.Members {
			m := &v.Members[i]
			w.Push(m.Key)
			if strings.IndexByte(m.Key, 0) >= 0 {
				w.Add(CodeNullCharacters, "Null characters are not allowed.")
				ok = false
			}
			if repeated != nil && repeated[i] {
				w.Add(CodeDuplicateKey, "Duplicate key %q in object.", m.Key)
				ok = false
			}
			ok = CheckFreeForm(w, &m.Value, nil) && ok
			w.Pop()
		}
	}
	return ok
}

// numericInRange reports whether a JSON number literal fits PostgreSQL's
// numeric type as jsonb stores it: the exponent is what can overflow, so a
// literal with a moderate exponent (or none) is fine.
func numericInRange(lit string) bool {
	i := strings.IndexAny(lit, "eE")
	if i < 0 {
		return len(lit) <= 1000
	}
	exp := lit[i+1:]
	exp = strings.TrimLeft(exp, "+-")
	exp = strings.TrimLeft(exp, "0")
	return len(exp) <= 3 && i <= 1000
}

// Custom is a field with its own binding, for shapes the constructors above
// do not cover. spec.Name must be set. ParseBody keeps the whole value of a
// custom field, with at most spec.MaxItems (else DefaultMaxItems) elements
// if it is an array; the binding checks Value.Truncated.
func Custom[T any](spec *Spec, bind func(w *Walker, v *Value, dst *T)) Field[T] {
	spec.custom = true
	return Field[T]{Spec: spec, bind: bind}
}

// fieldSet is the fields accepted in one shape of an object.
type fieldSet[T any] struct {
	fields   []Field[T]
	index    map[string]int
	required []int
}

func newFieldSet[T any](fields []Field[T], requireAll bool) *fieldSet[T] {
	fs := &fieldSet[T]{index: make(map[string]int, len(fields))}
	for _, f := range fields {
		if _, dup := fs.index[f.Spec.Name]; dup {
			continue // a field shared by several variants of a union
		}
		fs.index[f.Spec.Name] = len(fs.fields)
		if f.Spec.Required && requireAll {
			fs.required = append(fs.required, len(fs.fields))
		}
		fs.fields = append(fs.fields, f)
	}
	return fs
}

// ObjectSpec describes an object for the reference. Variants is set for a
// union, whose accepted fields depend on the value of Discriminator.
type ObjectSpec struct {
	Fields        []*Spec
	Discriminator string
	Variants      []VariantSpec
	// OtherVariants is set when the union also accepts discriminator codes
	// without a variant of their own, keeping their other fields as given.
	OtherVariants bool

	index map[string]*Spec // every field by name, for the body parser
}

// VariantSpec is the extra fields of a union for some discriminator values.
type VariantSpec struct {
	Values []string
	Fields []*Spec
}

// Object is the schema of a JSON object bound into a T.
type Object[T any] struct {
	spec     *ObjectSpec
	plain    *fieldSet[T] // every field; for a union, used when the variant is unknown
	disc     string
	variants map[string]*fieldSet[T]
	common   *fieldSet[T] // a union's common fields
	// other, when set, receives the members of a union object whose
	// discriminator is a code without a variant (see AcceptOtherVariants).
	other func(*T) *map[string]json.RawMessage
	// maxValues is the value budget of a body of this schema (ParseBody);
	// zero means MaxValues.
	maxValues int
}

// WithMaxValues lowers the value budget of a request body of this schema
// (ParseBody) from MaxValues to n, sized to what a real body of the
// endpoint holds: a parsed value costs about 100 bytes of tree, so a 2 MB
// body of a million numbers took 105 MB under the global budget. It
// returns o, at package initialisation.
func (o *Object[T]) WithMaxValues(n int) *Object[T] {
	if n <= 0 || n > MaxValues {
		panic("validate.WithMaxValues: n must be from 1 to MaxValues")
	}
	o.maxValues = n
	return o
}

// MaxValues is the value budget of a request body of this schema.
func (o *Object[T]) MaxValues() int {
	if o.maxValues > 0 {
		return o.maxValues
	}
	return MaxValues
}

// NewObject returns the schema of an object with the given fields.
func NewObject[T any](fields ...Field[T]) *Object[T] {
	o := &Object[T]{spec: &ObjectSpec{}, plain: newFieldSet(fields, true)}
	for _, f := range fields {
		o.spec.Fields = append(o.spec.Fields, f.Spec)
	}
	o.spec.buildIndex()
	return o
}

// Variant lists the fields a union accepts, on top of its common fields,
// when its discriminator has one of Values.
type Variant[T any] struct {
	Values []string
	Fields []Field[T]
}

// NewUnion returns the schema of an object whose accepted fields depend on
// the string value of disc, which must be one of the common fields. The
// variants' values become the discriminator's closed set of choices. Fields
// of the same name in several variants must bind to the same place.
//
// When the discriminator is missing or unknown, a field is accepted if any
// variant has it, and only the common required fields are required: the
// caller then hears about the discriminator, not about a cascade of fields
// that would be fine once it is fixed.
func NewUnion[T any](disc string, common []Field[T], variants ...Variant[T]) *Object[T] {
	o := &Object[T]{spec: &ObjectSpec{Discriminator: disc}, disc: disc, variants: map[string]*fieldSet[T]{}}
	var choices []string
	all := slices.Clone(common)
	for _, v := range variants {
		vs := VariantSpec{Values: v.Values}
		for _, f := range v.Fields {
			vs.Fields = append(vs.Fields, f.Spec)
		}
		o.spec.Variants = append(o.spec.Variants, vs)
		set := newFieldSet(append(slices.Clone(common), v.Fields...), true)
		for _, val := range v.Values {
			o.variants[val] = set
			choices = append(choices, val)
		}
		all = append(all, v.Fields...)
	}
	found := false
	for _, f := range common {
		o.spec.Fields = append(o.spec.Fields, f.Spec)
		if f.Spec.Name == disc {
			f.Spec.Choices = choices
			found = true
		}
	}
	if !found {
		panic(fmt.Sprintf("validate.NewUnion: discriminator %q is not a common field", disc))
	}
	o.spec.buildIndex()
	o.common = newFieldSet(slices.Clone(common), true)
	o.plain = newFieldSet(all, false)
	for i, f := range o.plain.fields {
		if f.Spec.Required && slices.ContainsFunc(common, func(c Field[T]) bool { return c.Spec == f.Spec }) {
			o.plain.required = append(o.plain.required, i)
		}
	}
	return o
}

// AcceptOtherVariants makes a union accept, besides its variants' values,
// any discriminator value that is a code (see OpenCode).
// Such an object is checked against the common fields; every other member
// is accepted and stored in the map that at returns, as compact JSON, after
// the checks that keep it storable (no NUL character, no duplicate key, no
// number beyond PostgreSQL's numeric). It returns o, at package
// initialisation.
func (o *Object[T]) AcceptOtherVariants(at func(*T) *map[string]json.RawMessage) *Object[T] {
	if o.disc == "" {
		panic("validate.AcceptOtherVariants: not a union")
	}
	o.other = at
	o.spec.OtherVariants = true
	for _, f := range o.spec.Fields {
		if f.Name == o.disc {
			f.OpenCode = true
			f.Choices = nil
		}
	}
	return o
}

// Spec describes the object for the reference.
func (o *Object[T]) Spec() *ObjectSpec { return o.spec }

// Bind checks the object v against the schema and stores what is valid into
// dst. Every member is checked: unknown and duplicate keys are problems at
// their own path, and each missing required field is a problem at the path it
// should have had. An object that ParseBody cut at DefaultMaxMembers is a
// too_many_items problem at its path, and its missing fields are not
// reported, as they may be among the members cut. The walker's path must be
// that of v.
func (o *Object[T]) Bind(w *Walker, v *Value, dst *T) {
	if v.Kind != KindObject {
		wrongType(w, "an object", v)
		return
	}
	if v.Truncated {
		tooManyMembers(w)
	}
	fs := o.plain
	other := false
	if o.disc != "" {
		for i := range v.Members {
			if m := &v.Members[i]; m.Key == o.disc {
				if m.Value.Kind == KindString {
					if vs, ok := o.variants[m.Value.Text]; ok {
						fs = vs
					} else if o.other != nil && isOpenCode(m.Value.Text) {
						fs, other = o.common, true
					}
				}
				break
			}
		}
	}
	// Most objects have few fields; the seen flags live on the stack.
	var seenBuf [64]bool
	var seen []bool
	if len(fs.fields) <= len(seenBuf) {
		seen = seenBuf[:len(fs.fields)]
	} else {
		seen = make([]bool, len(fs.fields))
	}
	var repeated []bool
	if other {
		repeated = repeatedKeys(v.Members)
	}
	for i := range v.Members {
		m := &v.Members[i]
		w.Push(m.Key)
		idx, ok := fs.index[m.Key]
		switch {
		case !ok && other:
			if repeated != nil && repeated[i] {
				w.Add(CodeDuplicateKey, "Duplicate key %q in object.", m.Key)
			} else {
				o.keepOther(w, m, dst)
			}
		case !ok:
			w.Add(CodeUnknownField, "Unknown field %q.", m.Key)
		case seen[idx]:
			w.Add(CodeDuplicateKey, "Duplicate key %q in object.", m.Key)
		default:
			seen[idx] = true
			fs.fields[idx].bind(w, &m.Value, dst)
		}
		w.Pop()
	}
	for _, idx := range fs.required {
		if !seen[idx] && !v.Truncated {
			w.Push(fs.fields[idx].Spec.Name)
			w.Add(CodeRequired, "This field is required.")
			w.Pop()
		}
	}
}

// keepOther stores member m of an object of another variant, as given; the
// caller has refused a key given twice.
func (o *Object[T]) keepOther(w *Walker, m *Member, dst *T) {
	extra := o.other(dst)
	if strings.IndexByte(m.Key, 0) >= 0 {
		w.Add(CodeNullCharacters, "Null characters are not allowed.")
		return
	}
	if !CheckFreeForm(w, &m.Value, nil) {
		return
	}
	if *extra == nil {
		*extra = map[string]json.RawMessage{}
	}
	(*extra)[m.Key] = compactJSON(m.Value.Raw)
}
