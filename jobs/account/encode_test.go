package account

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/validate"
)

// encodingJSON is what AppendJSON must equal: the account as a json.Encoder
// without HTML escaping writes it (E3's writeJSON), without the newline.
func encodingJSON(t testing.TB, a *Account) ([]byte, error) {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(a); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func checkAppendJSON(t *testing.T, a *Account) {
	t.Helper()
	want, wantErr := encodingJSON(t, a)
	got, gotErr := a.AppendJSON([]byte("prefix"))
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("AppendJSON error %v, encoding/json error %v", gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	if !bytes.HasPrefix(got, []byte("prefix")) {
		t.Fatalf("AppendJSON did not append: %q", got)
	}
	if diff := cmp.Diff(string(want), string(got[len("prefix"):])); diff != "" {
		t.Fatalf("AppendJSON differs from encoding/json (-want +got):\n%s", diff)
	}
}

func TestAppendJSON_FixtureAsEncodingJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, err := b.v.Validate(context.Background(), fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	checkAppendJSON(t, a)
}

// TestAppendJSON_EveryFieldAsEncodingJSON fills every field of an Account,
// by reflection, with values that encoding/json escapes in every way it
// can, and with nil, empty and set slices and pointers: a field added to
// any type of the payload without its line in encode.go fails here.
func TestAppendJSON_EveryFieldAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			f := filler{r: rand.New(rand.NewPCG(seed, 7)), full: seed < 10}
			var a Account
			f.fill(reflect.ValueOf(&a).Elem())
			checkAppendJSON(t, &a)
		})
	}
}

func TestAppendJSON_ZeroDecimalFailsAsEncodingJSON(t *testing.T) {
	t.Parallel()
	a := &Account{SupplyAddresses: []SupplyAddress{{SupplyPoints: []SupplyPoint{{
		Meters: []Meter{{MeterType: &MeterType{AmpsLow: &validate.Decimal{}}}},
	}}}}}
	checkAppendJSON(t, a)
	if _, err := a.AppendJSON(nil); err == nil {
		t.Fatal("AppendJSON of a zero Decimal did not fail")
	}
}

// FuzzAppendJSONString: any string, in any field, inside a supply point
// (HTML-escaped) or not, encodes as encoding/json encodes it.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkAppendJSON(t, &Account{
			ImportSupplier: s,
			SupplyAddresses: []SupplyAddress{{SupplyPostcode: s, SupplyPoints: []SupplyPoint{{
				SupplyType: s, Identifier: &s,
				Other: map[string]json.RawMessage{s: json.RawMessage(fmt.Sprintf(" [ %q ] ", s))},
			}}}},
		})
	})
}

// trickyStrings are strings that encoding/json escapes, each in a
// different way.
var trickyStrings = []string{
	"", "plain", `quote " and backslash \`, "<b>&amp;</b>", "tab\tnew\nline\rcr\bbs\fff",
	"\x00\x01\x1f\x7f", "line\u2028para\u2029", "invalid \xff\xfe utf-8", "truncated \xe2\x80",
	"münchen ☃ 𝄞", "'single'",
}

// filler sets every field of a value by reflection.
type filler struct {
	r *rand.Rand
	// full sets every pointer and gives every slice elements; otherwise
	// each is nil, empty or set at random.
	full bool
}

func (f filler) str() string {
	if f.r.IntN(3) == 0 {
		return fmt.Sprint("s", f.r.IntN(1000))
	}
	return trickyStrings[f.r.IntN(len(trickyStrings))]
}

var (
	decimalType = reflect.TypeFor[validate.Decimal]()
	rawType     = reflect.TypeFor[json.RawMessage]()
)

// rawValues are JSON texts as a supply point's Other or a metadata value may
// hold them, compact or not.
var rawValues = []string{
	`{}`, `{"a":1}`, ` { "a" : [ 1 , 2.50 ] , "b" : "<&>" } `, `"x\u2028y"`, `null`, `[true,false]`, "\"caf\u00e9 <b>\"",
}

func (f filler) fill(v reflect.Value) {
	switch {
	case v.Type() == decimalType:
		d, err := validate.ParseDecimal([]string{"0", "-1.50", "12345678901234567890.5", "1e3"}[f.r.IntN(4)])
		if err != nil {
			panic(err)
		}
		v.Set(reflect.ValueOf(d))
		return
	case v.Type() == rawType:
		if f.full || f.r.IntN(5) > 0 {
			v.SetBytes([]byte(rawValues[f.r.IntN(len(rawValues))]))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(f.str())
	case reflect.Bool:
		v.SetBool(f.r.IntN(2) == 0)
	case reflect.Int64:
		v.SetInt(f.r.Int64N(1<<40) - 1<<39)
	case reflect.Pointer:
		if f.full || f.r.IntN(3) > 0 {
			p := reflect.New(v.Type().Elem())
			f.fill(p.Elem())
			v.Set(p)
		}
	case reflect.Slice:
		n := 1 + f.r.IntN(2)
		if !f.full {
			switch f.r.IntN(4) {
			case 0:
				return // nil
			case 1:
				n = 0
			}
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			f.fill(s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		if !f.full && f.r.IntN(2) == 0 {
			return
		}
		m := reflect.MakeMap(v.Type())
		for range 1 + f.r.IntN(3) {
			k, val := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			f.fill(k)
			f.fill(val)
			m.SetMapIndex(k, val)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
	default:
		panic("filler: no value for " + v.Type().String())
	}
}

func TestFiller_SetsEveryField(t *testing.T) {
	t.Parallel()
	var a Account
	filler{r: rand.New(rand.NewPCG(1, 2)), full: true}.fill(reflect.ValueOf(&a).Elem())
	enc, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	// Every json name of every struct in the payload appears in the
	// encoding of a full fill.
	for _, name := range jsonNames(reflect.TypeFor[Account](), map[reflect.Type]bool{}) {
		if !strings.Contains(string(enc), `"`+name+`":`) {
			t.Errorf("a full fill does not set %q", name)
		}
	}
}

func jsonNames(t reflect.Type, seen map[reflect.Type]bool) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] || t == decimalType {
		return nil
	}
	seen[t] = true
	var names []string
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || name == "-" {
			continue
		}
		names = append(names, name)
		names = append(names, jsonNames(sf.Type, seen)...)
	}
	return names
}
