package note_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/note"
	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// Both RULES.md files that list note rules carry the same rows, word for
// word: each package renders them from note.Rules, and its own
// TestRulesFile keeps its file in step with that.
func TestRules_SameRowsInEveryRulesFile(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"../account/RULES.md", "../postimport/RULES.md"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range note.Rules {
			row := "| `" + r.Code + "` | " + r.At + " | " + r.Row() + " |\n"
			if !strings.Contains(string(b), row) {
				t.Errorf("%s lacks the row of %s:\n%s", file, r.Code, row)
			}
		}
	}
}

func TestRules_EveryRuleNamesItsSource(t *testing.T) {
	t.Parallel()
	for _, r := range note.Rules {
		if !strings.Contains(r.Source, "spec") && !strings.Contains(r.Source, "reference") {
			t.Errorf("rule %s: source %q names neither the spec nor the reference", r.Code, r.Source)
		}
	}
}

type pair struct{ Attr, Code string }

func check(t *testing.T, body string) ([]note.Note, []pair) {
	t.Helper()
	root, err := v.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var w v.Walker
	var notes []note.Note
	list := v.NewObject(v.List("notes", note.Schema, func(n *[]note.Note) *[]note.Note { return n }))
	list.Bind(&w, root, &notes)
	note.Check(&w, "notes", notes)
	var got []pair
	for _, e := range w.Errors {
		got = append(got, pair{e.Attr, e.Code})
	}
	return notes, got
}

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		note string
		want []pair
	}{
		{"the reference's pinned note, unpin_at in the past, no created_at",
			`{"body": "Some important pinned note.", "is_pinned": true, "unpin_at": "2020-06-01T12:00:00Z"}`, nil},
		{"unpin_at without is_pinned", `{"body": "b", "unpin_at": "2020-06-01T12:00:00Z"}`, nil},
		{"unpin_at before created_at", `{"body": "b", "created_at": "2020-06-01T12:00:00Z", "unpin_at": "2020-06-01T11:59:59Z"}`,
			[]pair{{"notes.0.unpin_at", note.CodeUnpinBeforeCreation}}},
		{"unpin_at equal to created_at", `{"body": "b", "created_at": "2020-06-01T12:00:00Z", "unpin_at": "2020-06-01T12:00:00Z"}`, nil},
		{"neither body nor documents", `{"body": " "}`, []pair{{"notes.0", note.CodeEmpty}}},
		{"leading slash", `{"document_paths": [{"document_path": "/a/b.pdf"}]}`, nil},
		{"parent segment", `{"document_paths": [{"document_path": "a/../../b.pdf"}]}`,
			[]pair{{"notes.0.document_paths.0.document_path", note.CodeInvalidDocumentPath}}},
		{"parent segment after a leading slash", `{"document_paths": [{"document_path": "/../b.pdf"}]}`,
			[]pair{{"notes.0.document_paths.0.document_path", note.CodeInvalidDocumentPath}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, got := check(t, `{"notes": [`+tt.note+`]}`)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheck_LeadingSlashIsDropped(t *testing.T) {
	t.Parallel()
	notes, errs := check(t, `{"notes": [{"document_paths": [{"document_path": "/a/b.pdf"}, {"document_path": "a/c.pdf"}]}]}`)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	want := []note.DocumentPath{{DocumentPath: "a/b.pdf"}, {DocumentPath: "a/c.pdf"}}
	if diff := cmp.Diff(want, notes[0].DocumentPaths); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
	refs := note.DocumentRefs("notes", notes)
	if len(refs) != 2 || refs[0].Attr != "notes.0.document_paths.0.document_path" || refs[0].Path != "a/b.pdf" {
		t.Errorf("refs %+v", refs)
	}
}

// Any bytes bind and check without a panic, every problem has its place and
// a detail, and a checked note's paths have no leading slash.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"notes": [{"body": "x", "is_pinned": true, "unpin_at": "2020-06-01T12:00:00Z"}]}`,
		`{"notes": [{"document_paths": [{"document_path": "/a/b.pdf"}, {"document_path": "../x"}], "created_at": "2020-06-01T12:00:00Z", "unpin_at": "2019-01-01T00:00:00Z"}]}`,
		`{"notes": [{}, 1, null, {"body": null}]}`,
		`{"notes": {"body": "x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		root, err := v.Parse(data)
		if err != nil || root.Kind != v.KindObject {
			return
		}
		var w v.Walker
		var notes []note.Note
		list := v.NewObject(v.List("notes", note.Schema, func(n *[]note.Note) *[]note.Note { return n }))
		list.Bind(&w, root, &notes)
		note.Check(&w, "notes", notes)
		for _, e := range w.Errors {
			if e.Attr == "" || e.Code == "" || e.Detail == "" {
				t.Fatalf("problem without its place, code or detail: %+v", e)
			}
		}
		if len(w.Errors) == 0 {
			for _, n := range notes {
				for _, d := range n.DocumentPaths {
					if strings.HasPrefix(d.DocumentPath, "/") {
						t.Fatalf("path %q kept its leading slash", d.DocumentPath)
					}
				}
			}
		}
	})
}
