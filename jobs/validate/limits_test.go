package validate

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

type tag struct {
	Name string `json:"name"`
}

type crate struct {
	Name  string            `json:"name"`
	Tags  []tag             `json:"tags,omitzero"`
	Later []json.RawMessage `json:"later,omitzero"`
	Extra json.RawMessage   `json:"extra,omitzero"`
}

var crateSchema = NewObject(
	Req("name", StringValue, func(c *crate) *string { return &c.Name }),
	List("tags", NewObject(Req("name", StringValue, func(t *tag) *string { return &t.Name })),
		func(c *crate) *[]tag { return &c.Tags }, MaxItems(2)),
	EmptyList("later", func(c *crate) *[]json.RawMessage { return &c.Later }, "Not yet.", MaxItems(2)),
	JSONObject("extra", func(c *crate) *json.RawMessage { return &c.Extra }),
)

// bindCrate parses body as a request body of crateSchema and binds it.
func bindCrate(t *testing.T, body string) (crate, *Value, problem.List) {
	t.Helper()
	root, perr := crateSchema.ParseBody([]byte(body))
	if perr != nil {
		t.Fatalf("ParseBody: %v", perr)
	}
	var w Walker
	var c crate
	crateSchema.Bind(&w, root, &c)
	return c, root, w.Errors
}

// zeros is a JSON array of n zeros.
func zeros(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat("0,", n), ",") + "]"
}

func TestParseBody_ArraysBeyondTheirLimitAreReportedAtTheirPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		body     string
		want     []pair
		wantTags int
	}{
		{"list at its limit", `{"name":"c","tags":[{"name":"a"},{"name":"b"}]}`, []pair{}, 2},
		{"list one element over its limit", `{"name":"c","tags":[{"name":"a"},{"name":"b"},{"name":"c"}]}`,
			[]pair{{"tags", CodeTooManyItems}}, 2},
		{"elements up to the limit are still checked, the others not", `{"name":"c","tags":[{},{"name":"b","x":1},{"y":2}]}`,
			[]pair{{"tags", CodeTooManyItems}, {"tags.0.name", CodeRequired}, {"tags.1.x", CodeUnknownField}}, 2},
		{"empty list over its limit", `{"name":"c","later":[1,2,3]}`,
			[]pair{{"later", CodeTooManyItems}, {"later.0", CodeNotSupported}, {"later.1", CodeNotSupported}}, 0},
		{"free-form array at the default limit", `{"name":"c","extra":{"a":` + zeros(DefaultMaxItems) + `}}`, []pair{}, 0},
		{"free-form array over the default limit", `{"name":"c","extra":{"a":[1,{"b":` + zeros(DefaultMaxItems+1) + `}]}}`,
			[]pair{{"extra.a.1.b", CodeTooManyItems}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _, errs := bindCrate(t, tt.body)
			if diff := cmp.Diff(tt.want, pairs(errs)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if len(c.Tags) != tt.wantTags {
				t.Errorf("%d tags bound, want %d", len(c.Tags), tt.wantTags)
			}
			for _, e := range errs {
				if e.Code == CodeTooManyItems && !strings.Contains(e.Detail, "no more than") {
					t.Errorf("detail %q does not state the limit", e.Detail)
				}
			}
		})
	}
}

// members is a JSON object of n members "k0" to "k<n-1>", each holding 1,
// then the members of tail.
func members(n int, tail string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		fmt.Fprintf(&b, `"k%d":1,`, i)
	}
	b.WriteString(tail)
	return strings.TrimSuffix(b.String(), ",") + "}"
}

func TestParseBody_ObjectsBeyondTheMemberLimitAreReportedAtTheirPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want []pair
	}{
		{"free-form object at the limit", `{"name":"c","extra":` + members(DefaultMaxMembers, "") + `}`, []pair{}},
		{"free-form object one member over", `{"name":"c","extra":` + members(DefaultMaxMembers+1, "") + `}`,
			[]pair{{"extra", CodeTooManyItems}}},
		{"nested free-form object over, its members up to the limit still checked",
			`{"name":"c","extra":{"a":[` + members(DefaultMaxMembers-1, `"k0":2,"z":3`) + `]}}`,
			[]pair{{"extra.a.0", CodeTooManyItems}, {"extra.a.0.k0", CodeDuplicateKey}}},
		{"a duplicate among many keys is found", `{"name":"c","extra":` + members(DefaultMaxMembers-1, `"k500":2`) + `}`,
			[]pair{{"extra.k500", CodeDuplicateKey}}},
		{"schema object over: no required field is reported missing", members(DefaultMaxMembers+1, ""),
			[]pair{{"", CodeTooManyItems}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, errs := bindCrate(t, tt.body)
			got := pairs(errs)
			// A schema object's unknown members are each a problem of their own.
			got = slices.DeleteFunc(got, func(p pair) bool { return p.Code == CodeUnknownField })
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			for _, e := range errs {
				if e.Code == CodeTooManyItems && !strings.Contains(e.Detail, fmt.Sprintf("no more than %d members", DefaultMaxMembers)) {
					t.Errorf("detail %q does not state the limit", e.Detail)
				}
			}
		})
	}
}

// TestParseBody_HundredThousandKeysAreRefusedFast reproduces the attack on
// free-form objects: a metadata value of 100,000 keys (1.3 MB) took 16.7 s
// of CPU, as each key was compared with every key before it, in the body's
// free-form values and in the members a union of another variant keeps. The
// body parser now keeps DefaultMaxMembers members of an object and checks
// them in linear time, and the check of a tree that Parse built in full
// (no member limit) is linear too. The bound is far above the milliseconds
// it takes and far below the seconds of the quadratic check.
func TestParseBody_HundredThousandKeysAreRefusedFast(t *testing.T) {
	t.Parallel()
	obj := members(100_000, "")
	tests := []struct {
		name  string
		check func() []pair
		want  []pair
	}{
		{"free-form field", func() []pair {
			_, _, errs := bindCrate(t, `{"name":"c","extra":`+obj+`}`)
			return pairs(errs)
		}, []pair{{"extra", CodeTooManyItems}}},
		{"union of another variant", func() []pair {
			root, perr := gadgetSchema.ParseBody([]byte(`{"kind":"TREATED",` + obj[1:]))
			if perr != nil {
				t.Fatal(perr)
			}
			var w Walker
			var g gadget
			gadgetSchema.Bind(&w, root, &g)
			return pairs(w.Errors)
		}, []pair{{"", CodeTooManyItems}}},
		{"CheckFreeForm of a full tree", func() []pair {
			v, err := Parse([]byte(members(100_000, `"k99999":2`)))
			if err != nil {
				t.Fatal(err)
			}
			var w Walker
			CheckFreeForm(&w, v, nil)
			return pairs(w.Errors)
		}, []pair{{"k99999", CodeDuplicateKey}}},
		{"union of another variant, full tree", func() []pair {
			v, err := Parse([]byte(`{"kind":"TREATED",` + members(100_000, `"k99999":2`)[1:]))
			if err != nil {
				t.Fatal(err)
			}
			var w Walker
			var g gadget
			gadgetSchema.Bind(&w, v, &g)
			return pairs(w.Errors)
		}, []pair{{"k99999", CodeDuplicateKey}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []pair
			if took := cpuTime(func() { got = tt.check() }); took > 3*time.Second {
				t.Errorf("took %v of CPU", took)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseBody_BuildsNothingInsideValuesTheBindingDoesNotRead(t *testing.T) {
	t.Parallel()
	body := `{"name":[1,2],"zzz":{"a":[1]},"tags":[{"name":"a","q":[1]}],"later":[{"a":1}],"extra":{"k":[{"v":1}]}}`
	_, root, errs := bindCrate(t, body)
	want := []pair{{"name", CodeInvalid}, {"zzz", CodeUnknownField}, {"tags.0.q", CodeUnknownField}, {"later.0", CodeNotSupported}}
	if diff := cmp.Diff(want, pairs(errs)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	m := root.Members
	for _, v := range []*Value{&m[0].Value, &m[1].Value, &m[2].Value.Items[0].Members[1].Value, &m[3].Value.Items[0]} {
		if v.Items != nil || v.Members != nil || v.Raw == "" {
			t.Errorf("%s: built %d items and %d members, raw %q; want only its kind and raw text", v.Raw, len(v.Items), len(v.Members), v.Raw)
		}
	}
	// A free-form value is read in full.
	if got := m[4].Value.Members[0].Value.Items[0].Members[0].Key; got != "v" {
		t.Errorf("free-form member = %q, want v", got)
	}
}

func TestParseBody_RefusesABodyWithMoreValuesThanMaxValues(t *testing.T) {
	t.Parallel()
	// Every array is within the default limit; the nesting multiplies them.
	square := "[" + strings.TrimSuffix(strings.Repeat(zeros(DefaultMaxItems)+",", DefaultMaxItems), ",") + "]"
	body := `{"a":` + square + `,"b":` + square + `}`
	for name, parse := range map[string]func([]byte) (*Value, *problem.Error){
		"without a schema": ParseBody,
		"free-form field": func(b []byte) (*Value, *problem.Error) {
			return crateSchema.ParseBody([]byte(`{"extra":` + string(b) + `}`))
		},
	} {
		root, perr := parse([]byte(body))
		if root != nil || perr == nil {
			t.Fatalf("%s: ParseBody accepted %d values", name, 2*DefaultMaxItems*DefaultMaxItems)
		}
		want := &problem.Error{Kind: problem.TooLarge, Code: CodeRequestTooLarge,
			Detail: "The request body has more than 1048576 JSON values; send the items in several requests."}
		if diff := cmp.Diff(want, perr); diff != "" {
			t.Errorf("%s: error (-want +got):\n%s", name, diff)
		}
	}
	// Half of it is fine.
	if _, perr := ParseBody([]byte(`{"a":` + square + `}`)); perr != nil {
		t.Errorf("ParseBody refused %d values: %v", DefaultMaxItems*DefaultMaxItems, perr)
	}
}

// TestParseBody_TenMiBOfZerosIsRefusedFastWithLittleMemory: without limits a
// 10 MiB [0,0,...] body builds a tree of gigabytes and takes seconds to
// refuse. It does not
// call t.Parallel: it measures the process's allocations, which other tests
// running at the same time would add to.
func TestParseBody_TenMiBOfZerosIsRefusedFastWithLittleMemory(t *testing.T) {
	arr := zeros(5 << 20)
	tests := []struct {
		name string
		body string
		want []pair // nil: the body is refused with parse_error
	}{
		{"the body", arr, nil},
		{"an unknown field", `{"name":"c","x":` + arr + `}`, []pair{{"x", CodeUnknownField}}},
		{"a string field", `{"name":` + arr + `}`, []pair{{"name", CodeInvalid}}},
		{"a list", `{"name":"c","tags":` + arr + `}`, []pair{{"tags", CodeTooManyItems}, {"tags.0", CodeInvalid}, {"tags.1", CodeInvalid}}},
		{"a free-form value", `{"name":"c","extra":{"a":` + arr + `}}`, []pair{{"extra.a", CodeTooManyItems}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var perr *problem.Error
			var got []pair
			took := cpuTime(func() {
				var root *Value
				root, perr = crateSchema.ParseBody([]byte(tt.body))
				if perr == nil {
					var w Walker
					var c crate
					crateSchema.Bind(&w, root, &c)
					got = pairs(w.Errors)
				}
			})
			runtime.ReadMemStats(&after)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if tt.want == nil && (perr == nil || perr.Code != CodeParseError) {
				t.Errorf("error = %v, want parse_error", perr)
			}
			// The parser copies the body once; the tree adds little.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2*uint64(len(tt.body))+1<<20 {
				t.Errorf("allocated %d MiB for a %d MiB body", alloc>>20, len(tt.body)>>20)
			}
			if took > 5*time.Second {
				t.Errorf("took %v of CPU", took)
			}
			t.Logf("%v of CPU", took)
		})
	}
}

// FuzzParseBody checks the body parser against Parse: it accepts the same
// inputs, and binding its tree gives the problems that binding Parse's full
// tree gives, unless an array was over its limit (which only the body
// parser sees).
func FuzzParseBody(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"name":"c","tags":[{"name":"a"},{"name":"b"},{"name":"c"}]}`,
		`{"name":[1,{"a":2}],"zzz":{"a":[1]},"tags":[{"name":"a","q":[1]}],"later":[{"a":1},2],"extra":{"k":[{"v":1,"v":2}]}}`,
		`{"tags":{"name":"x"},"extra":[1],"later":{}}`, `{"a":1,}`, `{"tags":[{"name":"\u0000"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		full, err := Parse(data)
		root, perr := crateSchema.ParseBody(data)
		wantOK := err == nil && full.Kind == KindObject
		if (perr == nil) != wantOK {
			t.Fatalf("ParseBody(%q) error = %v; Parse error = %v", data, perr, err)
		}
		if !wantOK {
			return
		}
		if root.Raw != full.Raw {
			t.Fatalf("raw %q, Parse gives %q", root.Raw, full.Raw)
		}
		var w, wFull Walker
		var c, cFull crate
		crateSchema.Bind(&w, root, &c)
		crateSchema.Bind(&wFull, full, &cFull)
		for _, e := range w.Errors {
			if e.Code == CodeTooManyItems {
				return
			}
		}
		if diff := cmp.Diff(wFull.Errors, w.Errors); diff != "" {
			t.Fatalf("ParseBody(%q) problems differ from Parse's (-full +body):\n%s", data, diff)
		}
		if diff := cmp.Diff(cFull, c); diff != "" {
			t.Fatalf("ParseBody(%q) binds differently from Parse (-full +body):\n%s", data, diff)
		}
	})
}
