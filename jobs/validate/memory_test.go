package validate

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// bodyOf wraps JSON text as the value of a body's one member.
func bodyOf(v string) []byte { return []byte(`{"a":` + v + `}`) }

// repeatJoined is n copies of s separated by commas.
func repeatJoined(s string, n int) string {
	return strings.Repeat(s+",", n-1) + s
}

// nested is depth levels of open, each with n copies of elem before the
// next level, closed by close.
func nested(open, elem, close string, n, depth int) string {
	var b strings.Builder
	for range depth {
		b.WriteString(open + repeatJoined(elem, n) + ",")
	}
	b.WriteString(`0` + strings.Repeat(close, depth))
	return b.String()
}

// membersObject is an object of n members named k0, k1, ...
func membersObject(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":0`, i)
	}
	b.WriteByte('}')
	return b.String()
}

// heldByParse is how much more of the heap is in use at the end of a parse
// of body, with its tree and the parser's stacks still reachable: the
// stacks never shrink during a parse, so this is its peak but for the
// moments when a stack grows.
func heldByParse(body []byte) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p := parser{s: string(body), limited: true, maxValues: MaxValues}
	p.borrow()
	v, err := p.parse(freeForm)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	runtime.KeepAlive(err)
	p.giveBack() // and keeps p's stacks reachable until here
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// The API reserves ParseMemory(body) of its budget before the parse, so it
// must not be less than what the parse holds, for the shapes that cost the
// most per byte (numbers, deep nesting, members, escapes) and for plain
// ones; and not much more, or large bodies would wait for memory they do
// not use. The 52 bytes per byte of body that the budget counted before
// were half of what 500 nested arrays of 999 numbers hold (1 MB of body,
// 100 MB held). It does not call t.Parallel: it measures the process's
// heap, which other tests running at the same time would add to.
func TestParseMemory_CoversWhatTheParseHoldsAndLittleMore(t *testing.T) {
	escaped := `"` + strings.Repeat(`\u00e9`, 200) + `"`
	tests := []struct {
		name string
		body []byte
	}{
		{"a million numbers", bodyOf("[" + repeatJoined("["+repeatJoined("0", 1000)+"]", 1000) + "]")},
		{"500 nested arrays of 999 numbers", bodyOf(nested("[", "0", "]", 999, 500))},
		{"500 nested objects of 999 members", bodyOf(nestedObjects(999, 500))},
		{"300,000 objects of one member", bodyOf("[" + repeatJoined("["+repeatJoined(`{"k":0}`, 1000)+"]", 300) + "]")},
		{"objects of 103 members, a fifth of each shared allocation unused", bodyOf("[" + repeatJoined("["+repeatJoined(membersObject(103), 100)+"]", 20) + "]")},
		{"objects of 300 members", bodyOf("[" + repeatJoined("["+repeatJoined(membersObject(300), 100)+"]", 10) + "]")},
		{"empty arrays and objects", bodyOf("[" + repeatJoined("["+repeatJoined(`[]`, 500)+","+repeatJoined(`{}`, 500)+"]", 500) + "]")},
		{"a 2 MB string", bodyOf(`"` + strings.Repeat("x", 2<<20) + `"`)},
		{"strings with escapes", bodyOf("[" + repeatJoined("["+repeatJoined(escaped, 1000)+"]", 2) + "]")},
		{"many strings", bodyOf("[" + repeatJoined("["+repeatJoined(`"abcdefgh"`, 1000)+"]", 200) + "]")},
		{"a thousand small records", []byte(`{"records":[` + repeatJoined(`{"id":"R-000123","amount":"12.50","date":"2024-01-01","lines":[{"code":"A","qty":1},{"code":"B","qty":2}],"note":"paid \"in full\""}`, 1000) + `]}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			held, got := heldByParse(tt.body), ParseMemory(tt.body)
			t.Logf("%d bytes: held %.1f MB, ParseMemory %.1f MB (%.2f times)", len(tt.body), float64(held)/1e6, float64(got)/1e6, float64(got)/float64(held))
			if got < held {
				t.Errorf("ParseMemory = %d, less than the %d bytes the parse held", got, held)
			}
			// The most it counts beyond: while a stack grows, its old
			// array and its new one at once, which held cannot see; and
			// escapes as long as the strings' text, which decodes shorter.
			if got > held*7/4+1<<20 {
				t.Errorf("ParseMemory = %d, more than 1.75 times the %d bytes the parse held", got, held)
			}
		})
	}
}

// nestedObjects is depth objects, each of n members before the member that
// holds the next.
func nestedObjects(n, depth int) string {
	var b strings.Builder
	for range depth {
		b.WriteString("{" + repeatJoined(`"":0`, n) + `,"x":`)
	}
	b.WriteString(`0` + strings.Repeat("}", depth))
	return b.String()
}

// countShape adds the elements and members of v's tree to sh.
func countShape(v *Value, sh *shape) {
	switch v.Kind {
	case KindArray:
		sh.items += int64(len(v.Items))
		for i := range v.Items {
			countShape(&v.Items[i], sh)
		}
	case KindObject:
		sh.members += int64(len(v.Members))
		for i := range v.Members {
			countShape(&v.Members[i].Value, sh)
		}
	}
}

// FuzzParseMemory checks ParseMemory's scan against the tree Parse builds
// from the same input: it counts every array element and object member,
// strings with escaped quotes and brackets included, and so at least what
// that tree and the parser's copy of the input take. Any input, valid or
// not, is counted without a panic.
func FuzzParseMemory(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[1,2,{"b":"c\"]"}],"d":{}}`, `[[],[[]],{"":""}]`, `"\\"`,
		`{"a\\":":1,"b":"\\\"[,"}`, ` [ 1 , 2 , [ ] ] `, `[1,`, `]]]`, `{"a":"\u00e9\ud83d\ude00"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := ParseMemory(data)
		v, err := Parse(data)
		if err != nil {
			return
		}
		var want shape
		countShape(v, &want)
		if sh := scanShape(data); sh.items != want.items || sh.members != want.members {
			t.Fatalf("scanShape(%q) counts %d elements and %d members; the tree has %d and %d", data, sh.items, sh.members, want.items, want.members)
		}
		if tree := int64(len(data)) + valueBytes*(want.items+1) + memberBytes*want.members; got < tree {
			t.Fatalf("ParseMemory(%q) = %d, less than the %d bytes of the input and its tree", data, got, tree)
		}
	})
}

// BenchmarkParseMemory reads a body as the API's budget does before the
// parse (ParseMemory), beside the parse itself (ParseBody), for a body of
// records like E7's and one of a million numbers.
func BenchmarkParseMemory(b *testing.B) {
	bodies := []struct {
		name string
		body []byte
	}{
		{"records", []byte(`{"records":[` + repeatJoined(`{"id":"R-000123","amount":"12.50","date":"2024-01-01","lines":[{"code":"A","qty":1},{"code":"B","qty":2}],"note":"paid \"in full\""}`, 1000) + `]}`)},
		{"numbers", bodyOf("[" + repeatJoined("["+repeatJoined("0", 1000)+"]", 1000) + "]")},
	}
	for _, bb := range bodies {
		b.Run(bb.name+"/ParseMemory", func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			for b.Loop() {
				ParseMemory(bb.body)
			}
		})
		b.Run(bb.name+"/ParseBody", func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			for b.Loop() {
				if _, err := ParseBody(bb.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
