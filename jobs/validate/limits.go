package validate

import "fmt"

// The limits that keep one request body from making the service build a
// tree many times its size: without them, a 10 MiB body of [0,0,...] is a
// tree of over a gigabyte and seconds of CPU. The spec shows no array limits (section 8.2); these are
// the service's own, generous enough that a real migration never meets them.
const (
	// DefaultMaxItems is the item limit of a schema's arrays that set none
	// with MaxItems, and of every array inside a free-form value.
	DefaultMaxItems = 1000
	// DefaultMaxMembers is the member limit of every object of a body, in a
	// schema or inside a free-form value. No schema object has a tenth of
	// it; a metadata value with 100,000 keys (a 1.3 MB body) once took
	// 16.7 s of CPU to check, as its duplicate-key check was quadratic.
	DefaultMaxMembers = 1000
	// MaxValues bounds the values (array elements and object members, at
	// every depth) that ParseBody keeps from one body: about 100 MB of
	// tree. The largest valid request, 10,000 transactions with line and tax
	// items, has about a quarter of that.
	MaxValues = 1 << 20
	// AccountMaxValues is the value budget of the account payload (E3,
	// E4): 250 times the 203 values of the example account, and at about
	// 100 bytes of tree a value, 5 MB a request at most.
	AccountMaxValues = 50_000
)

// CodeTooManyItems is the problem of an array with more elements than its
// item limit, or of an object with more members than DefaultMaxMembers,
// reported at the array's or object's path.
const CodeTooManyItems = "too_many_items"

// CodeRequestTooLarge is the top-level code of a body with more than
// MaxValues values, as of a body over MAX_BODY_BYTES.
const CodeRequestTooLarge = "request_too_large"

// MaxItems limits an array to n elements. ParseBody builds the first n and
// only checks the syntax of the others; the binding reports too_many_items.
func MaxItems(n int) Option { return func(s *Spec) { s.MaxItems = n } }

// skipSpec describes a value whose contents the binding never reads (an
// unknown field, an array where a string belongs): ParseBody checks its
// syntax and keeps only its kind and raw text.
var skipSpec = &Spec{}

// freeForm is the root of a body without a schema: any JSON object.
var freeForm = &Spec{Type: TypeJSONObject}

// The methods below tell the body parser what the binding of a value that f
// describes reads. A nil f is a free-form value, read in full; so is the
// value of a Custom field, whose binding may read anything.

// keepsObject reports whether the members of an object are read.
func (f *Spec) keepsObject() bool {
	if f == nil || f.custom {
		return true
	}
	return f.Type == TypeObject || f.Type == TypeJSONObject
}

// keepsArray reports whether the elements of an array are read.
func (f *Spec) keepsArray() bool {
	if f == nil || f.custom {
		return true
	}
	return f.Type == TypeObjectList || f.Type == TypeEmptyList
}

// memberSpec describes the member key of an object that f describes.
func (f *Spec) memberSpec(key string) *Spec {
	if f == nil || f.custom || f.Type != TypeObject || f.Object == nil {
		return nil
	}
	if m := f.Object.field(key); m != nil {
		return m
	}
	if f.Object.OtherVariants {
		return nil // kept as given, after the free-form checks
	}
	return skipSpec // unknown_field: only its presence matters
}

// itemSpec describes the elements of an array that f describes.
func (f *Spec) itemSpec() *Spec {
	switch {
	case f == nil || f.custom:
		return nil
	case f.Type == TypeObjectList:
		return f.item
	}
	return skipSpec // an EmptyList's elements are only counted
}

// maxItems is the item limit of an array that f describes.
func (f *Spec) maxItems() int {
	if f != nil && f.MaxItems > 0 {
		return f.MaxItems
	}
	return DefaultMaxItems
}

// field returns the spec of the member name of the object, in any variant,
// or nil.
func (o *ObjectSpec) field(name string) *Spec {
	if o.index != nil {
		return o.index[name]
	}
	for _, f := range o.Fields {
		if f.Name == name {
			return f
		}
	}
	for _, v := range o.Variants {
		for _, f := range v.Fields {
			if f.Name == name {
				return f
			}
		}
	}
	return nil
}

// buildIndex indexes the fields of o by name for field.
func (o *ObjectSpec) buildIndex() {
	o.index = nil
	idx := map[string]*Spec{}
	for _, f := range o.Fields {
		if _, ok := idx[f.Name]; !ok {
			idx[f.Name] = f
		}
	}
	for _, v := range o.Variants {
		for _, f := range v.Fields {
			if _, ok := idx[f.Name]; !ok {
				idx[f.Name] = f
			}
		}
	}
	o.index = idx
}

// tooManyItems reports an array cut at its item limit.
func tooManyItems(w *Walker, limit int) {
	w.Add(CodeTooManyItems, "Ensure this field has no more than %d elements.", limit)
}

// tooManyMembers reports an object cut at DefaultMaxMembers.
func tooManyMembers(w *Walker) {
	w.Add(CodeTooManyItems, "Ensure this object has no more than %d members.", DefaultMaxMembers)
}

// repeatedKeys reports, for each member of an object, whether its key
// appeared at a lower index; nil means no key repeats. Short objects are
// compared pairwise; long ones, which only a hostile body has, through a
// map, so that the check stays linear (pairwise, 100,000 keys took 16.7 s).
func repeatedKeys(ms []Member) []bool {
	var out []bool
	mark := func(i int) {
		if out == nil {
			out = make([]bool, len(ms))
		}
		out[i] = true
	}
	if len(ms) <= 16 {
		for i := range ms {
			for j := 0; j < i; j++ {
				if ms[j].Key == ms[i].Key {
					mark(i)
					break
				}
			}
		}
		return out
	}
	seen := make(map[string]struct{}, len(ms))
	for i := range ms {
		if _, ok := seen[ms[i].Key]; ok {
			mark(i)
		}
		seen[ms[i].Key] = struct{}{}
	}
	return out
}

// LimitsRule is the paragraph of every RULES.md that explains the item
// limits and names their source.
var LimitsRule = "`" + CodeTooManyItems + "`: an array has more elements than its limit (\"at most N items\" in the table), " +
	"reported at the array's path; the elements beyond the limit are not checked. An array inside a free-form value " +
	"(a JSON object kept as given) has the limit " + fmt.Sprint(DefaultMaxItems) + ", and every object, free-form or not, " +
	"at most " + fmt.Sprint(DefaultMaxMembers) + " members (the same code, at the object's path). Source: the service's own limit (spec section 8.2 " +
	"shows no array lengths), far above what a real migration sends; it keeps one request from making the service build " +
	"a tree many times its size. For the same reason a body with more than its endpoint's budget of JSON values (" + fmt.Sprint(MaxValues) +
	", and " + fmt.Sprint(AccountMaxValues) + " for the account payload of E3 and E4) in all " +
	"(array elements and object members at every depth) gets 400 `" + CodeRequestTooLarge + "`, with no entries in `errors`."
