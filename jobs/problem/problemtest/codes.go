// Package problemtest checks, for tests, that a package's RULES.md names
// every error code the package's code can answer with.
package problemtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Codes returns the error codes written in the non-test Go files of the
// package in dir, sorted: the string constants whose name starts with Code
// or code, and the string literals given as the code of problem.New,
// problem.Invalidf, List.Add, List.Err and of a FieldError or Error literal,
// when they have the form of a code (lower case, digits, underscores). A
// code held in a variable or built at run time is not seen.
func Codes(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	add := func(e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil && codeForm.MatchString(s) {
				seen[s] = true
			}
		}
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if (strings.HasPrefix(name.Name, "Code") || strings.HasPrefix(name.Name, "code")) && i < len(n.Values) {
						add(n.Values[i])
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch {
				case sel.Sel.Name == "New" && len(n.Args) == 3, sel.Sel.Name == "Add" && len(n.Args) >= 3:
					add(n.Args[1])
				case sel.Sel.Name == "Invalidf" && len(n.Args) >= 3, sel.Sel.Name == "Err" && len(n.Args) == 2:
					add(n.Args[0])
				}
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Code" {
					add(n.Value)
				}
			}
			return true
		})
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// codeForm is the form of a stable code; it tells codes from the details
// that some calls of the same names take.
var codeForm = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// CheckListed fails t for each of codes that the file at rules does not
// name in backquotes (`code`).
func CheckListed(t testing.TB, rules string, codes []string) {
	t.Helper()
	raw, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range codes {
		if !strings.Contains(string(raw), "`"+c+"`") {
			t.Errorf("%s does not name the code %q; every code the code answers with is listed with its source", rules, c)
		}
	}
}
