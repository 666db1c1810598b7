package validate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

func TestParse_KeepsNumberTextMemberOrderAndDuplicates(t *testing.T) {
	t.Parallel()
	v, err := Parse([]byte(` {"b": 1.50, "a": [true, null, "x\u00e9\n"], "b": -0e+3} `))
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, m := range v.Members {
		got = append(got, m.Key+"="+m.Value.Raw)
	}
	if diff := cmp.Diff([]string{"b=1.50", `a=[true, null, "x\u00e9\n"]`, "b=-0e+3"}, got); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	if s := v.Members[1].Value.Items[2].Text; s != "xé\n" {
		t.Errorf("string = %q, want %q", s, "xé\n")
	}
	if n := v.Members[0].Value; n.Kind != KindNumber || n.Text != "1.50" {
		t.Errorf("number = %v %q", n.Kind, n.Text)
	}
}

func TestParse_RejectsMalformedInputWithItsOffset(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		in     string
		offset int
	}{
		{"empty body", ``, 0},
		{"trailing comma in object", `{"a":1,}`, 7},
		{"missing colon", `{"a" 1}`, 5},
		{"unquoted key", `{a:1}`, 1},
		{"leading zero", `[01]`, 2},
		{"bare fraction dot", `[1.]`, 3},
		{"truncated", `{"a":[1,2`, 9},
		{"second value", `{} {}`, 3},
		{"control character in string", "[\"a\tb\"]", 3},
		{"bad escape", `["\x"]`, 3},
		{"invalid UTF-8", "[\"\xff\"]", 2},
		{"single quotes", `{'a':1}`, 1},
		{"NaN", `[NaN]`, 1},
		{"bad literal", `[tru]`, 4},
		{"byte order mark", "\xef\xbb\xbf{}", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.in))
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) error = %v, want *SyntaxError", tt.in, err)
			}
			if se.Offset != tt.offset {
				t.Errorf("offset = %d, want %d (%v)", se.Offset, tt.offset, se)
			}
			if !strings.Contains(se.Error(), "byte offset") {
				t.Errorf("error %q does not name the offset", se)
			}
		})
	}
}

func TestParse_LimitsNestingDepth(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	if _, err := Parse([]byte(deep)); err == nil {
		t.Fatal("Parse accepted nesting deeper than MaxDepth")
	}
	ok := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := Parse([]byte(ok)); err != nil {
		t.Fatalf("Parse refused nesting of exactly MaxDepth: %v", err)
	}
}

func TestParse_SurrogatesDecodeLikeEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00x"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`} {
		v, err := Parse([]byte(in))
		if err != nil {
			t.Fatalf("Parse(%s): %v", in, err)
		}
		var want string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if v.Text != want {
			t.Errorf("Parse(%s) = %q, encoding/json gives %q", in, v.Text, want)
		}
	}
}

// FuzzParse checks that Parse accepts exactly what encoding/json accepts
// (for UTF-8 input: encoding/json lets invalid UTF-8 through, Parse refuses
// it) and decodes strings to the same text, and that every number in the
// tree reads as math/big reads it (checkNumber).
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[1,-2.5e3,"x\"y",true,false,null]}`, `"\u00e9\ud83d\ude00"`, `{"a":1,"a":2}`, ` 0 `, `[1,]`, `{"a" 1}`, "\"\xff\"", `[1e2,2.5E-1,1E+2,-0.0e0,1e999]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data)
		if !utf8.Valid(data) {
			if err == nil && !utf8.ValidString(v.Raw) {
				t.Fatalf("Parse accepted invalid UTF-8 %q", data)
			}
			return
		}
		valid := json.Valid(data)
		if (err == nil) != valid {
			t.Fatalf("Parse(%q) error = %v, json.Valid = %v", data, err, valid)
		}
		if err == nil && v.Kind == KindString {
			var want string
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			if v.Text != want {
				t.Fatalf("Parse(%q).Text = %q, encoding/json gives %q", data, v.Text, want)
			}
		}
		if err == nil {
			eachNumber(v, func(lit string) { checkNumber(t, lit) })
		}
	})
}

// eachNumber calls fn with the literal of every number in v.
func eachNumber(v *Value, fn func(lit string)) {
	switch v.Kind {
	case KindNumber:
		fn(v.Text)
	case KindArray:
		for i := range v.Items {
			eachNumber(&v.Items[i], fn)
		}
	case KindObject:
		for i := range v.Members {
			eachNumber(&v.Members[i].Value, fn)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	data := []byte(`{"customers":[{"given_name":"Amelia","family_name":"Hughes","email":"a@b.co.uk","date_of_birth":"1984-03-12"}],` +
		`"supply_addresses":[{"supply_address1":"14 Albert Road","supply_points":[{"supply_type":"ELECTRICITY","meters":[{"serial_number":"E21","meter_type":{"amps_low":5,"volts_low":216.2}}]}]}]}`)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// The objects of one parse share the allocations of their members, and
// each one's Members is a slice of exactly its length and capacity, so
// that appending to one never overwrites another's.
func TestParse_ObjectsShareMemberAllocations(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"first": {"a": "x:y", "b": 1}`)
	for i := range 50 {
		fmt.Fprintf(&b, `, "o%d": {"k": %d}`, i, i)
	}
	b.WriteString(`}`)
	v, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	first := v.Members[0].Value.Members
	if len(first) != 2 || cap(first) != 2 {
		t.Fatalf("first object: len %d cap %d, want 2 and 2", len(first), cap(first))
	}
	_ = append(first, Member{Key: "c"})
	if got := v.Members[1].Value.Members[0].Key; got != "k" {
		t.Errorf("appending to one object changed the next: its first key is %q", got)
	}
	if got := v.Members[1].Key; got != "o0" {
		t.Errorf("appending to one object changed its parent: second key %q", got)
	}
	// The members of the objects completed one after another lie one
	// after another in one allocation.
	for i := range 50 {
		want := unsafe.Add(unsafe.Pointer(&first[0]), (2+i)*int(unsafe.Sizeof(Member{})))
		if got := unsafe.Pointer(&v.Members[1+i].Value.Members[0]); got != want {
			t.Fatalf("object o%d's members are not next to the previous object's", i)
		}
	}
}

// A Value is 88 bytes on a 64-bit platform: Kind, Bool and Truncated share
// a word.
func TestValue_Size(t *testing.T) {
	t.Parallel()
	if unsafe.Sizeof(uintptr(0)) == 8 && unsafe.Sizeof(Value{}) != 88 {
		t.Errorf("a Value is %d bytes, want 88", unsafe.Sizeof(Value{}))
	}
}
