package problemtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Codes finds the codes of constants and of the calls and literals that
// take a code, and leaves out details, other strings and test files.
func TestCodes_FindsTheCodesAPackageAnswersWith(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := `package p

const (
	CodeA = "code_a"
	codeB = "code_b"
	Other = "not_a_code"
)

func f() {
	problem.New(problem.Invalid, "code_c", "A detail.")
	problem.Invalidf("code_d", "attr", "Detail %d.", 1)
	errs.Add("attr", "code_e", "Detail.")
	_ = errs.Err("code_f", "Detail.")
	_ = problem.FieldError{Code: "code_g", Attr: "x"}
	problem.New(problem.Invalid, CodeA, "Not a literal: found through its constant.")
	errs.Add("attr", "code_h", "Detail %s.", "with_args")
	problem.New(problem.Invalid, "Not a code.", "detail")
	t.Add(time.Second)
	rows.Err()
}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nconst CodeTest = \"code_in_a_test\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{"code_a", "code_b", "code_c", "code_d", "code_e", "code_f", "code_g", "code_h"}
	if diff := cmp.Diff(want, Codes(t, dir)); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
}
