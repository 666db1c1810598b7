package accountview

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shopspring/decimal"
)

func TestFieldsList_KeepsOrderAndValuesAsWritten(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		want []Field
	}{
		{"empty", ``, nil},
		{"empty object", `{}`, nil},
		{"order and exact numbers", `{"z": 1.10, "a": {"b": [1e2, null]}, "m": "x\ny"}`, []Field{
			{"z", json.RawMessage(`1.10`)}, {"a", json.RawMessage(`{"b": [1e2, null]}`)}, {"m", json.RawMessage(`"x\ny"`)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var f Fields
			if tc.in != "" {
				if err := json.Unmarshal([]byte(tc.in), &f); err != nil {
					t.Fatal(err)
				}
			}
			got, err := f.List()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFields_NullIsEmptyAndMarshalsAsAnObject(t *testing.T) {
	t.Parallel()
	var v struct{ F Fields }
	if err := json.Unmarshal([]byte(`{"F": null}`), &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) != `{"F":{}}` {
		t.Errorf("null Fields marshal as %s (%v), want {}", b, err)
	}
}

// List never panics, and lists exactly the members of any JSON object.
func FuzzFieldsList(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":[1,2]},"c":"d"}`, `[1]`, `{"a"}`, `{`, `"s"`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		list, err := Fields(b).List()
		if !json.Valid(b) {
			return
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(b, &obj) != nil {
			if err == nil && len(b) > 0 {
				t.Errorf("List(%q) accepted what is not an object: %v", b, list)
			}
			return
		}
		if obj == nil { // null
			return
		}
		if err != nil {
			t.Fatalf("List(%q): %v", b, err)
		}
		for _, fl := range list {
			if _, ok := obj[fl.Name]; !ok || !json.Valid(fl.Value) {
				t.Errorf("List(%q) gave %q = %s", b, fl.Name, fl.Value)
			}
		}
		seen := map[string]bool{}
		for _, fl := range list {
			seen[fl.Name] = true
		}
		if len(seen) != len(obj) {
			t.Errorf("List(%q) named %d members, the object has %d", b, len(seen), len(obj))
		}
	})
}

// Money shows an amount exactly, with at least two places: E7 keeps
// fractional pennies, and the operator's view must not round them away.
func TestMoney_IsWrittenExactlyWithAtLeastTwoPlaces(t *testing.T) {
	t.Parallel()
	var got []string
	for _, s := range []string{"71", "71.1", "71.000", "0.125", "-0.1250000000", "1234567890.1234567891"} {
		got = append(got, Money{decimal.RequireFromString(s)}.String())
	}
	if diff := cmp.Diff([]string{"71.00", "71.10", "71.00", "0.125", "-0.125", "1234567890.1234567891"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
