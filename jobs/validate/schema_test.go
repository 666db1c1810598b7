package validate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

type pet struct {
	Kind   string          `json:"kind"`
	Name   *string         `json:"name,omitzero"`
	Wings  *int64          `json:"wings,omitzero"`
	Barks  *bool           `json:"barks,omitzero"`
	Weight *Decimal        `json:"weight,omitzero"`
	Born   *Date           `json:"born,omitzero"`
	Extra  json.RawMessage `json:"extra,omitzero"`
}

type owner struct {
	ID    string            `json:"id"`
	Pets  []pet             `json:"pets,omitzero"`
	Home  *home             `json:"home,omitzero"`
	Later []json.RawMessage `json:"later,omitzero"`
	Seen  *Datetime         `json:"seen,omitzero"`
}

type home struct {
	Street string `json:"street"`
}

var (
	homeSchema = NewObject(Req("street", StringValue, func(h *home) *string { return &h.Street }, MaxLength(5)))
	petSchema  = NewUnion("kind",
		[]Field[pet]{
			Req("kind", StringValue, func(p *pet) *string { return &p.Kind }),
			Opt("name", StringValue, func(p *pet) **string { return &p.Name }, AllowBlank(), Nullable()),
			Opt("weight", DecimalValue, func(p *pet) **Decimal { return &p.Weight }, NonNegative()),
			Opt("born", DateValue, func(p *pet) **Date { return &p.Born }),
			JSONObject("extra", func(p *pet) *json.RawMessage { return &p.Extra }),
		},
		Variant[pet]{Values: []string{"BIRD"}, Fields: []Field[pet]{
			Opt("wings", IntegerValue, func(p *pet) **int64 { return &p.Wings }, Required(), NonNegative()),
		}},
		Variant[pet]{Values: []string{"DOG"}, Fields: []Field[pet]{
			Opt("barks", BooleanValue, func(p *pet) **bool { return &p.Barks }),
		}},
	)
	ownerSchema = NewObject(
		Req("id", StringValue, func(o *owner) *string { return &o.ID }, Codes("owner_unknown")),
		List("pets", petSchema, func(o *owner) *[]pet { return &o.Pets }),
		Obj("home", homeSchema, func(o *owner) **home { return &o.Home }, Required()),
		EmptyList("later", func(o *owner) *[]json.RawMessage { return &o.Later }, "Not yet."),
		Opt("seen", DatetimeValue, func(o *owner) **Datetime { return &o.Seen }),
	)
)

func bindOwner(t *testing.T, in string) (owner, problem.List) {
	t.Helper()
	v, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var w Walker
	var o owner
	ownerSchema.Bind(&w, v, &o)
	return o, w.Errors
}

type pair struct{ Attr, Code string }

func pairs(l problem.List) []pair {
	p := []pair{}
	for _, e := range l {
		p = append(p, pair{e.Attr, e.Code})
	}
	return p
}

func TestObjectBind_ReportsEveryProblemAtItsPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []pair
	}{
		{"valid", `{"id":"o1","home":{"street":"Elm"},"pets":[{"kind":"BIRD","wings":2},{"kind":"DOG","barks":true,"name":null}],"later":[]}`, []pair{}},
		{"missing required fields", `{"pets":[{}]}`, []pair{{"pets.0.kind", CodeRequired}, {"id", CodeRequired}, {"home", CodeRequired}}},
		{"variant field required only in its variant", `{"id":"o","home":{"street":"a"},"pets":[{"kind":"BIRD"},{"kind":"DOG"}]}`, []pair{{"pets.0.wings", CodeRequired}}},
		{"field of another variant is unknown", `{"id":"o","home":{"street":"a"},"pets":[{"kind":"DOG","wings":2}]}`, []pair{{"pets.0.wings", CodeUnknownField}}},
		{"unknown discriminator accepts any variant's field", `{"id":"o","home":{"street":"a"},"pets":[{"kind":"CAT","wings":2,"fur":1}]}`,
			[]pair{{"pets.0.kind", CodeInvalidChoice}, {"pets.0.fur", CodeUnknownField}}},
		{"unknown and duplicate keys", `{"id":"o","id":"p","home":{"street":"a","door":1},"x":1,"":2}`,
			[]pair{{"id", CodeDuplicateKey}, {"home.door", CodeUnknownField}, {"x", CodeUnknownField}, {`""`, CodeUnknownField}}},
		{"wrong types", `{"id":1,"home":[],"pets":{},"seen":true}`,
			[]pair{{"id", CodeInvalid}, {"home", CodeInvalid}, {"pets", CodeInvalid}, {"seen", CodeInvalid}}},
		{"null where not allowed", `{"id":null,"home":null,"pets":[null]}`,
			[]pair{{"id", CodeInvalid}, {"home", CodeInvalid}, {"pets.0", CodeInvalid}}},
		{"string rules", `{"id":" ","home":{"street":"Long Road"}}`, []pair{{"id", CodeBlank}, {"home.street", CodeMaxLength}}},
		{"max length counts characters not bytes", `{"id":"o","home":{"street":"ééééé"}}`, []pair{}},
		{"null character", `{"id":"a\u0000b","home":{"street":"a"}}`, []pair{{"id", CodeNullCharacters}}},
		{"numbers", `{"id":"o","home":{"street":"a"},"pets":[{"kind":"BIRD","wings":2.5},{"kind":"BIRD","wings":-1,"weight":1e9999},{"kind":"BIRD","wings":99999999999999999999,"weight":-0.5}]}`,
			[]pair{{"pets.0.wings", CodeInvalid}, {"pets.1.wings", CodeMinValue}, {"pets.1.weight", CodeInvalid}, {"pets.2.wings", CodeInvalid}, {"pets.2.weight", CodeMinValue}}},
		{"dates", `{"id":"o","home":{"street":"a"},"seen":"2025-01-01T10:00:00","pets":[{"kind":"DOG","born":"2023-02-29"}]}`,
			[]pair{{"seen", CodeInvalidDatetime}, {"pets.0.born", CodeInvalidDate}}},
		{"free-form object", `{"id":"o","home":{"street":"a"},"pets":[{"kind":"DOG","extra":{"a":{"b":1,"b":2},"c":["\u0000"],"d":1e99999}},{"kind":"DOG","extra":[]}]}`,
			[]pair{{"pets.0.extra.a.b", CodeDuplicateKey}, {"pets.0.extra.c.0", CodeNullCharacters}, {"pets.0.extra.d", CodeNumberOutOfRange}, {"pets.1.extra", CodeInvalid}}},
		{"non-empty empty list", `{"id":"o","home":{"street":"a"},"later":[{},1]}`, []pair{{"later.0", CodeNotSupported}, {"later.1", CodeNotSupported}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, errs := bindOwner(t, tt.in)
			if diff := cmp.Diff(tt.want, pairs(errs)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			for _, e := range errs {
				if e.Detail == "" {
					t.Errorf("problem at %s has no detail", e.Attr)
				}
			}
		})
	}
}

func TestObjectBind_StoresValuesAndEncodesThemBackUnchanged(t *testing.T) {
	t.Parallel()
	in := `{"id":"o","home":{"street":"Elm"},"later":[],"seen":"2025-01-01T10:00:00Z",` +
		`"pets":[{"kind":"BIRD","wings":2,"weight":0.50,"born":"2024-02-29","extra":{ "a" : "<b>", "n": 1.0 }},{"kind":"DOG","name":""}]}`
	o, errs := bindOwner(t, in)
	if len(errs) != 0 {
		t.Fatalf("problems: %v", errs)
	}
	out, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"o","pets":[{"kind":"BIRD","wings":2,"weight":0.50,"born":"2024-02-29","extra":{"a":"\u003cb\u003e","n":1.0}},{"kind":"DOG","name":""}],` +
		`"home":{"street":"Elm"},"later":[],"seen":"2025-01-01T10:00:00Z"}`
	if string(out) != want {
		t.Errorf("encoding:\n got %s\nwant %s", out, want)
	}
	again, errs := bindOwner(t, string(out))
	if len(errs) != 0 {
		t.Fatalf("problems on the encoding: %v", errs)
	}
	if diff := cmp.Diff(o, again); diff != "" {
		t.Errorf("binding the encoding changed the value (-first +second):\n%s", diff)
	}
}

func TestReference_ListsEveryFieldWithPathTypeAndCodes(t *testing.T) {
	t.Parallel()
	ref := Reference(ownerSchema.Spec())
	for _, want := range []string{
		"| `id` | string | yes |  | `required`, `invalid`, `null_characters_not_allowed`, `blank`, `owner_unknown` |",
		"| `pets[].kind` | string | yes | one of `BIRD`, `DOG` |",
		"| `pets[].wings` | integer | yes | 0 or more | `required`, `invalid`, `min_value` | Only when kind is BIRD. |",
		"| `pets[].name` | string or null | no | may be empty; null is the same as omitted |",
		"| `home.street` | string | yes | at most 5 characters |",
		"| `pets` | array of object | no | at most 1000 items | `invalid`, `too_many_items` |",
		"| `later` | array (empty) | no | at most 1000 items | `invalid`, `not_supported`, `too_many_items` |",
	} {
		if !strings.Contains(ref, want) {
			t.Errorf("reference lacks %q; got:\n%s", want, ref)
		}
	}
}

func TestDatesAndDecimals_ParseTheirDocumentedForms(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"2024-02-29": true, "2023-02-29": false, "2024-13-01": false, "2024-1-01": false, "24-01-01": false, "2024-04-31": false, "2024-01-01T00:00:00Z": false} {
		if _, ok := ParseDate(s); ok != want {
			t.Errorf("ParseDate(%q) ok = %v, want %v", s, ok, want)
		}
	}
	for s, want := range map[string]Datetime{
		"2024-02-29T23:59:59Z":             "2024-02-29T23:59:59Z",
		"2024-02-29T10:00:00.5Z":           "2024-02-29T10:00:00.5Z",
		"2024-02-29T10:00:00.123456789Z":   "2024-02-29T10:00:00.123456Z",
		"2021-08-24T14:00:00+09:00":        "2021-08-24T05:00:00Z",
		"2024-03-01T00:30:00.250000+01:00": "2024-02-29T23:30:00.25Z",
		"2024-02-29T10:00:00-00:00":        "2024-02-29T10:00:00Z",
		"2024-02-29T24:00:00Z":             "",
		"2024-02-29 10:00:00Z":             "",
		"2024-02-29T10:00:00":              "",
		"2024-02-29T10:00:00,5Z":           "",
		"2024-02-29T10:00:00+0100":         "",
		"2024-02-30T10:00:00Z":             "",
	} {
		got, ok := ParseDatetime(s)
		if ok != (want != "") || got != want {
			t.Errorf("ParseDatetime(%q) = %q, %v; want %q", s, got, ok, want)
		}
	}
	early, _ := ParseDatetime("2024-02-29T10:00:00.5+00:00")
	late, _ := ParseDatetime("2024-02-29T10:00:00.75Z")
	if early.Compare(late) != -1 || late.Compare(early) != 1 || early.Compare(early) != 0 || early.Compare("2024-02-29T10:00:00Z") != 1 {
		t.Errorf("Compare does not order %s and %s", early, late)
	}
	for s, want := range map[string]bool{"0": true, "-0.50": true, "12.345": true, "01": false, "1.": false, ".5": false, "1e2": false, "+1": false, "": false} {
		if _, err := ParsePlainDecimal(s); (err == nil) != want {
			t.Errorf("ParsePlainDecimal(%q) err = %v, want ok %v", s, err, want)
		}
	}
	d, _ := ParsePlainDecimal("216.20")
	if d.String() != "216.20" || d.Decimal().String() != "216.2" {
		t.Errorf("Decimal kept %q / value %s", d.String(), d.Decimal())
	}
}

func TestRepeats_ReportsSecondOccurrencesInShortAndLongLists(t *testing.T) {
	t.Parallel()
	key := func(s *string) string { return *s }
	short := []string{"a", "b", "a", "", "", "b", "a"}
	if diff := cmp.Diff([]int{2, 5, 6}, Repeats(short, key)); diff != "" {
		t.Errorf("short list (-want +got):\n%s", diff)
	}
	long := append(make([]string, 0, 40), short...)
	for i := range 30 {
		long = append(long, fmt.Sprint("k", i%20))
	}
	want := []int{2, 5, 6}
	for i := 20; i < 30; i++ {
		want = append(want, len(short)+i)
	}
	if diff := cmp.Diff(want, Repeats(long, key)); diff != "" {
		t.Errorf("long list (-want +got):\n%s", diff)
	}
}

// Open codes keep only a length limit: lower case and a leading digit
// (3PH) are codes too; no source fixes their form.
func TestOpenCode_AcceptsAnyCodeOfAtMost64Characters(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v    string
		want bool
	}{
		{"ELECTRICITY", true}, {"GAS", true}, {"A", true}, {"KWH_IMPORT_2", true},
		{"A" + strings.Repeat("B", 63), true}, {strings.Repeat("É", 64), true},
		{"gas", true}, {"_GAS", true}, {"3PH", true}, {"GAS-2", true}, {"GÄS", true}, {"Direct Debit", true},
		{"A" + strings.Repeat("B", 64), false}, {strings.Repeat("É", 65), false}, {"", false},
	}
	for _, c := range cases {
		if got := isOpenCode(c.v); got != c.want {
			t.Errorf("isOpenCode(%q) = %v, want %v", c.v, got, c.want)
		}
	}
}

type gadget struct {
	Kind  string                     `json:"kind"`
	Volts *int64                     `json:"volts,omitzero"`
	Since *Date                      `json:"since,omitzero"`
	Other map[string]json.RawMessage `json:"-"`
}

var gadgetSchema = NewUnion("kind",
	[]Field[gadget]{
		Req("kind", StringValue, func(g *gadget) *string { return &g.Kind }),
		Opt("since", DateValue, func(g *gadget) **Date { return &g.Since }),
	},
	Variant[gadget]{Values: []string{"LAMP"}, Fields: []Field[gadget]{
		Opt("volts", IntegerValue, func(g *gadget) **int64 { return &g.Volts }),
	}},
).AcceptOtherVariants(func(g *gadget) *map[string]json.RawMessage { return &g.Other })

func TestUnion_OtherVariantsKeepTheirFieldsAsGiven(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		want  gadget
		probs []pair
	}{
		{"known variant refuses unknown fields", `{"kind":"LAMP","volts":230,"colour":"red"}`,
			gadget{Kind: "LAMP", Volts: new(int64(230))}, []pair{{"colour", CodeUnknownField}}},
		{"other code keeps every other field", `{"kind":"TREATED","since":"2020-01-01","volts":"high","meters":[{"id":1.50}],"note":"<b>"}`,
			gadget{Kind: "TREATED", Since: new(Date("2020-01-01")), Other: map[string]json.RawMessage{
				"volts": json.RawMessage(`"high"`), "meters": json.RawMessage(`[{"id":1.50}]`), "note": json.RawMessage(`"\u003cb\u003e"`)}}, []pair{}},
		{"other code still checks the common fields", `{"kind":"TREATED","since":"2020-02-30"}`,
			gadget{Kind: "TREATED"}, []pair{{"since", CodeInvalidDate}}},
		{"other fields must be storable", `{"kind":"TREATED","a":"\u0000","b":{"c":1,"c":2},"a":1}`,
			gadget{Kind: "TREATED"}, []pair{{"a", CodeNullCharacters}, {"b.c", CodeDuplicateKey}, {"a", CodeDuplicateKey}}},
		{"an other field given twice", `{"kind":"TREATED","a":1,"a":2}`,
			gadget{Kind: "TREATED", Other: map[string]json.RawMessage{"a": json.RawMessage(`1`)}}, []pair{{"a", CodeDuplicateKey}}},
		{"lower-case code is a code too, with its fields kept", `{"kind":"treated","x":1}`,
			gadget{Kind: "treated", Other: map[string]json.RawMessage{"x": json.RawMessage(`1`)}}, []pair{}},
		{"a code over 64 characters is refused, and no field is kept", `{"kind":"` + strings.Repeat("T", 65) + `","x":1}`,
			gadget{}, []pair{{"kind", CodeInvalidChoice}, {"x", CodeUnknownField}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var w Walker
			var g gadget
			gadgetSchema.Bind(&w, v, &g)
			if diff := cmp.Diff(tc.probs, pairs(w.Errors)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("bound value (-want +got):\n%s", diff)
			}
		})
	}
	ref := Reference(gadgetSchema.Spec())
	for _, want := range []string{"| `kind` | string | yes | any code of at most 64 characters", "| `*` | any JSON | no |  | `null_characters_not_allowed`, `duplicate_key`, `number_out_of_range`, `too_many_items` | Only when kind is any other code"} {
		if !strings.Contains(ref, want) {
			t.Errorf("reference lacks %q:\n%s", want, ref)
		}
	}
}

// FuzzParseDatetime checks that an accepted datetime is normalised for
// good: its normal form parses to itself and names the same instant, to the
// microsecond.
func FuzzParseDatetime(f *testing.F) {
	for _, s := range []string{"2024-02-29T23:59:59Z", "2021-08-24T14:00:00+09:00", "2024-02-29T10:00:00.123456789-05:30", "2024-02-29T10:00:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseDatetime(s)
		if !ok {
			return
		}
		again, ok := ParseDatetime(string(d))
		if !ok || again != d {
			t.Fatalf("ParseDatetime(%q) = %q, which parses to %q, %v", s, d, again, ok)
		}
		orig, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("accepted %q, which time.Parse refuses: %v", s, err)
		}
		if !d.Time().Equal(orig.Truncate(time.Microsecond)) {
			t.Fatalf("ParseDatetime(%q) = %q, another instant", s, d)
		}
	})
}

// The problems one request collects are bounded: past MaxProblemBytes of
// them, one too_many_errors ends the list. A body of nested free-form
// objects full of duplicate keys once made 999,000 problems with paths of a
// kilobyte, 1.29 GB held by one request.
func TestWalker_ProblemsPastTheBoundEndInOneTooManyErrors(t *testing.T) {
	t.Parallel()
	var w Walker
	for range 600 {
		w.Push(strings.Repeat("k", 100))
	}
	for i := range 100_000 {
		w.Add(CodeDuplicateKey, "Duplicate key %q in object.", fmt.Sprint(i))
	}
	size := 0
	for _, e := range w.Errors {
		size += len(e.Attr) + len(e.Code) + len(e.Detail)
	}
	last := w.Errors[len(w.Errors)-1]
	if size > MaxProblemBytes || last.Code != CodeTooManyErrors || len(w.Errors) < 100 {
		t.Errorf("%d problems of %d bytes ending in %q; want at most %d bytes ending in %s", len(w.Errors), size, last.Code, MaxProblemBytes, CodeTooManyErrors)
	}
	n := 0
	for _, e := range w.Errors {
		if e.Code == CodeTooManyErrors {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d too_many_errors, want one", n)
	}
}

// Decode is the one decode step of every endpoint: parse, the parse
// phase's checkpoint, bind, the bind phase's. A body that is not an object
// is its parse_error, and a request whose client hung up stops at the
// next phase, with ctx's error.
func TestDecode_ParsesBindsAndStopsBetweenThePhases(t *testing.T) {
	t.Parallel()
	body := []byte(`{"street": "Elm street"}`)
	for _, tc := range []struct {
		name     string
		body     []byte
		cancelAt Phase
		want     []Phase // the phases reached
		bound    bool
		code     string // the error's problem code, "" for none or a cancellation
		canceled bool
	}{
		{"a body with a field's problem", body, "", []Phase{Parsed, Bound}, true, "", false},
		{"not an object", []byte(`[1]`), "", nil, false, CodeParseError, false},
		{"hung up during the parse", body, Parsed, []Phase{Parsed}, false, "", true},
		{"hung up during the bind", body, Bound, []Phase{Parsed, Bound}, true, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var reached []Phase
			ctx = WithCheckpoints(ctx, func(p Phase) {
				reached = append(reached, p)
				if p == tc.cancelAt {
					cancel()
				}
			})
			var w Walker
			var h home
			_, err := homeSchema.Decode(ctx, tc.body, &w, &h)
			code := ""
			if p, ok := problem.As(err); ok {
				code = p.Code
			}
			type result struct {
				Reached       []Phase
				Bound         bool
				Code          string
				Canceled      bool
				FieldProblems int
			}
			want := result{tc.want, tc.bound, tc.code, tc.canceled, 0}
			if tc.bound {
				want.FieldProblems = 1 // the street is longer than 5
			}
			got := result{reached, h.Street != "" || len(w.Errors) > 0, code, errors.Is(err, context.Canceled), len(w.Errors)}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
