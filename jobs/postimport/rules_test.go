package postimport

import (
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite RULES.md from the schemas and rules")

// TestRulesFile fails when RULES.md and the code disagree. After changing a
// schema or a rule, run: go test ./jobs/postimport -run TestRulesFile -update
func TestRulesFile(t *testing.T) {
	t.Parallel()
	want := Reference()
	if *update {
		if err := os.WriteFile("RULES.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("RULES.md")
	if err != nil {
		t.Fatalf("%v (run go test ./jobs/postimport -run TestRulesFile -update)", err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("RULES.md is out of date (-code +file); run go test ./jobs/postimport -run TestRulesFile -update:\n%s", diff)
	}
}

// Every documented rule has at least one case that expects its code, so a
// rule that stops being enforced fails a test.
func TestRules_EveryRuleIsTested(t *testing.T) {
	t.Parallel()
	tested := testedCodes()
	for _, set := range [][]rule{noteRules, transactionRules, statementRules} {
		for _, r := range set {
			if !tested[r.code] {
				t.Errorf("rule %s (%s) has no test case", r.code, r.at)
			}
		}
	}
}
