package progress

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/bulkimport/bulkimport/jobs/auth"
	"github.com/bulkimport/bulkimport/jobs/problem"
	pt "github.com/bulkimport/bulkimport/jobs/progress/progresstest"
)

// refusal is one row of RULES.md's refusal table, as the test compares it.
type refusal struct {
	Status    string
	Code      string // the top-level code
	FieldCode string // the code of the errors[] entry, "" for none
	Attr      string
}

// rulesRows reads the refusal table of RULES.md: for each row, whether it
// names a source. The table's rows start with a status ("| 400 |").
var rulesRows = sync.OnceValues(func() (map[refusal]bool, error) {
	raw, err := os.ReadFile("RULES.md")
	if err != nil {
		return nil, err
	}
	rows := map[refusal]bool{}
	for line := range strings.Lines(string(raw)) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 7 || len(strings.TrimSpace(cells[1])) != 3 || strings.TrimSpace(cells[1]) == "---" {
			continue
		}
		unquote := func(s string) string { return strings.Trim(strings.TrimSpace(s), "`") }
		r := refusal{Status: unquote(cells[1]), Code: unquote(cells[2]), Attr: unquote(cells[3])}
		if r.Status == "400" {
			// Every entry of the filter's 400 has the code invalid
			// (the table's last line says so).
			r.FieldCode = "invalid"
		}
		rows[r] = strings.TrimSpace(cells[5]) != ""
	}
	return rows, nil
})

// checkDocumented fails t unless r is a row of RULES.md with a source.
func checkDocumented(t testing.TB, r refusal) {
	t.Helper()
	rows, err := rulesRows()
	if err != nil {
		t.Fatal(err)
	}
	sourced, ok := rows[r]
	switch {
	case !ok:
		t.Errorf("refusal %+v is not in RULES.md", r)
	case !sourced:
		t.Errorf("refusal %+v has no source in RULES.md", r)
	}
}

// refusalsOf returns the RULES.md rows err stands for: one per errors[]
// entry, or one for an error without entries.
func refusalsOf(t testing.TB, err error) []refusal {
	t.Helper()
	p, ok := problem.As(err)
	if !ok {
		t.Fatalf("not a refusal: %v", err)
	}
	status := map[problem.Kind]string{problem.Invalid: "400", problem.NotFound: "404"}[p.Kind]
	if len(p.Errors) == 0 {
		return []refusal{{Status: status, Code: p.Code}}
	}
	var out []refusal
	for _, e := range p.Errors {
		out = append(out, refusal{Status: status, Code: p.Code, FieldCode: e.Code, Attr: e.Attr})
	}
	return out
}

// Every refusal of the page is listed in RULES.md with its source: the
// filter's, the unknown supplier's (from Summarize), and the login's (from
// api/migration.go, named here by their constants).
func TestRulesFile_ListsEveryRefusalOfThePageWithItsSource(t *testing.T) {
	t.Parallel()
	_, svc := seeded(t)
	filters := []Filter{
		{Code: string(make([]byte, maxFilterLength+1))},
		{Code: "a\x00b"},
		{Code: "\xff"},
		{Code: "x", Attr: "\x1b[31m"},
		{Attr: "customers.0.mobile"},
		{Before: "yesterday"},
		{Before: "1.0"},
		{Before: "999999999999999999.1"},
	}
	for _, f := range filters {
		_, err := svc.Summarize(context.Background(), pt.Supplier, f, all, false)
		for _, r := range refusalsOf(t, err) {
			checkDocumented(t, r)
		}
	}
	_, err := svc.Summarize(context.Background(), "NO-SUCH-SUPPLIER", Filter{}, all, false)
	for _, r := range refusalsOf(t, err) {
		checkDocumented(t, r)
	}
	for _, r := range []refusal{
		{Status: "401", Code: auth.CodeNotAuthenticated},
		{Status: "401", Code: auth.CodeAuthenticationFailed},
		{Status: "429", Code: auth.CodeTooManyFailedAttempts},
	} {
		checkDocumented(t, r)
	}
}
