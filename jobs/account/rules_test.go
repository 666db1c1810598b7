package account

import (
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite RULES.md from the schema and the semantic rules")

// TestRulesFile fails when RULES.md and the code disagree. After changing the
// schema or a rule, run: go test ./jobs/account -run TestRulesFile -update
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
		t.Fatalf("%v (run go test ./jobs/account -run TestRulesFile -update)", err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("RULES.md is out of date (-code +file); run go test ./jobs/account -run TestRulesFile -update:\n%s", diff)
	}
}
