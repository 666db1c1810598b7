package documents_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	_ "gocloud.dev/blob/fileblob" // file:// buckets

	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// newStore opens a file:// bucket in a directory of the test's own: a real
// store, the one `make run` uses.
func newStore(t *testing.T) (*documents.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := documents.Open(context.Background(), "file://"+dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

func TestValidPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		path string
		want bool
	}{
		{"plain file", "statement.pdf", true},
		{"nested", "2024/03/statement 1.pdf", true},
		{"unicode", "notes/réclamation.pdf", true},
		{"dots inside a name", "a..b/c.d", true},
		{"empty", "", false},
		{"leading slash: still relative to the root", "/letters/a.pdf", true},
		{"leading slash alone", "/", false},
		{"two leading slashes", "//a.pdf", false},
		{"leading slash then parent segment", "/../b.pdf", false},
		{"parent segment", "../other/statement.pdf", false},
		{"parent segment inside", "a/../../b.pdf", false},
		{"dot segment", "a/./b.pdf", false},
		{"empty segment", "a//b.pdf", false},
		{"trailing slash", "a/b/", false},
		{"backslash", `a\b.pdf`, false},
		{"control character", "a\nb.pdf", false},
		{"delete character", "a\x7fb.pdf", false},
		{"too long", strings.Repeat("a", documents.MaxPathLength+1), false},
		{"longest", strings.Repeat("a", documents.MaxPathLength), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := documents.ValidPath(tt.path); got != tt.want {
				t.Errorf("ValidPath(%q) = %v, want %v", tt.path, got, tt.want)
			}
		})
	}
}

func TestKey_IsRootSlashPath(t *testing.T) {
	t.Parallel()
	tests := []struct{ root, path, want string }{
		{"", "a.pdf", "a.pdf"},
		{"acme", "a.pdf", "acme/a.pdf"},
		{"acme/", "x/a.pdf", "acme/x/a.pdf"},
		{"/imports/acme/", "a.pdf", "imports/acme/a.pdf"},
		{"acme", "/x/a.pdf", "acme/x/a.pdf"},
		{"", "/a.pdf", "a.pdf"},
	}
	for _, tt := range tests {
		if got := documents.Key(tt.root, tt.path); got != tt.want {
			t.Errorf("Key(%q, %q) = %q, want %q", tt.root, tt.path, got, tt.want)
		}
	}
}

func TestPut_DocumentIsStoredUnderTheSupplierRoot(t *testing.T) {
	t.Parallel()
	s, dir := newStore(t)
	ctx := context.Background()
	key, err := s.Put(ctx, "acme", "2024/st-1.pdf", strings.NewReader("%PDF-1.4"))
	if err != nil {
		t.Fatal(err)
	}
	if key != "acme/2024/st-1.pdf" {
		t.Errorf("key %q", key)
	}
	b, err := os.ReadFile(filepath.Join(dir, "acme", "2024", "st-1.pdf"))
	if err != nil || string(b) != "%PDF-1.4" {
		t.Fatalf("file on disk: %q, %v", b, err)
	}
	for _, tt := range []struct {
		root, path string
		want       bool
	}{
		{"acme", "2024/st-1.pdf", true},
		{"acme/", "2024/st-1.pdf", true},
		{"other", "2024/st-1.pdf", false},
		{"", "acme/2024/st-1.pdf", true},
		{"acme", "2024", false}, // a "directory" is not a document
	} {
		ok, err := s.Exists(ctx, tt.root, tt.path)
		if err != nil || ok != tt.want {
			t.Errorf("Exists(%q, %q) = %v, %v; want %v", tt.root, tt.path, ok, err, tt.want)
		}
	}
}

func TestPut_RefusesAnInvalidPath(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	if _, err := s.Put(context.Background(), "acme", "../escape.pdf", strings.NewReader("x")); err == nil {
		t.Fatal("Put accepted a path with ..")
	}
}

// Keys a directory cannot hold are "not found", never an error: an error
// would reach the caller as a 500 for what is only a wrong path.
func TestExists_KeysALocalStoreCannotHoldDoNotExist(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.Put(ctx, "r", "file.pdf", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"file.pdf/inside.pdf",      // through a file
		strings.Repeat("x", 300),   // segment longer than NAME_MAX
		"meta.attrs",               // fileblob's reserved suffix
		strings.Repeat("ab/", 400), // whole key longer than S3 allows
	} {
		ok, err := s.Exists(ctx, "r", strings.TrimSuffix(p, "/"))
		if err != nil || ok {
			t.Errorf("Exists(%.40q...) = %v, %v; want false, nil", p, ok, err)
		}
	}
}

func TestMissing_ListsEachMissingPathOnceInOrder(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	for _, p := range []string{"a.pdf", "c.pdf"} {
		if _, err := s.Put(ctx, "root", p, strings.NewReader(p)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Missing(ctx, "root", []string{"d.pdf", "/a.pdf", "b.pdf", "/d.pdf", "c.pdf"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"d.pdf", "b.pdf"}, got); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
}

// "/a/b.pdf" and "a/b.pdf" name the same document under the root.
func TestExists_LeadingSlashNamesTheSameDocument(t *testing.T) {
	t.Parallel()
	s, dir := newStore(t)
	ctx := context.Background()
	key, err := s.Put(ctx, "root", "/letters/a.pdf", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	if key != "root/letters/a.pdf" {
		t.Errorf("key %q, want root/letters/a.pdf", key)
	}
	if _, err := os.Stat(filepath.Join(dir, "root", "letters", "a.pdf")); err != nil {
		t.Errorf("not stored under the root: %v", err)
	}
	for _, p := range []string{"letters/a.pdf", "/letters/a.pdf"} {
		if ok, err := s.Exists(ctx, "root", p); !ok || err != nil {
			t.Errorf("Exists(%q) = %v, %v; want true", p, ok, err)
		}
	}
}

// A symbolic link in one supplier's directory of a file:// store, to
// another supplier's, told the first whether the second's documents exist:
// paths cannot contain "..", but the link needs none. The real path of a
// document, links resolved, must now lie under the supplier's root: a link
// out of it names nothing, and importctl document put refuses to write
// through it. Links that stay inside the root still work.
func TestStore_LinksOutOfTheRootNameNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, dir := newStore(t)
	for _, f := range []string{"suppliers/B/secret.pdf", "suppliers/A/2024/own.pdf"} {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("%PDF"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"suppliers/A/peek":     "../B",
		"suppliers/A/abs":      filepath.Join(dir, "suppliers", "B"),
		"suppliers/A/file.pdf": "../B/secret.pdf",
		"suppliers/A/mine":     "2024",
		"suppliers/A/dangling": "../B/none",
	} {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(link))); err != nil {
			t.Fatal(err)
		}
	}
	for path, want := range map[string]bool{
		"peek/secret.pdf": false,
		"abs/secret.pdf":  false,
		"file.pdf":        false,
		"dangling":        false,
		"mine/own.pdf":    true,
		"2024/own.pdf":    true,
		"peek/none.pdf":   false,
	} {
		got, err := s.Exists(ctx, "suppliers/A", path)
		if err != nil || got != want {
			t.Errorf("Exists(suppliers/A, %s) = %v, %v; want %v", path, got, err, want)
		}
	}
	if ok, err := s.Exists(ctx, "suppliers/B", "secret.pdf"); !ok || err != nil {
		t.Errorf("B's own document: %v, %v", ok, err)
	}
	for path, want := range map[string]string{"peek/planted.pdf": documents.CodeInvalidPath, "mine/new.pdf": "", "new/deeper/x.pdf": ""} {
		_, err := s.Put(ctx, "suppliers/A", path, strings.NewReader("%PDF"))
		if got := codeOf(err); got != want {
			t.Errorf("Put(suppliers/A, %s): %v, want code %q", path, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "suppliers", "B", "planted.pdf")); err == nil {
		t.Error("a document was written into B's root through A's link")
	}
}

func codeOf(err error) string {
	if p, ok := problem.As(err); ok {
		return p.Code
	}
	if err != nil {
		return err.Error()
	}
	return ""
}
