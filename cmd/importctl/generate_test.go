package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The --expect file names its fields as the runner's failure report does
// (external_account_number, code, attr, line), so that a team can compare
// the two files field by field.
func TestGenerate_ExpectFileUsesTheFailureReportsFieldNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	expect := filepath.Join(dir, "expected.ndjson")
	c := &ctl{t: t, env: map[string]string{}}
	c.ok("generate", "--accounts", "200", "--invalid-rate", "0.1", "--seed", "7",
		"--output", filepath.Join(dir, "cohort.ndjson"), "--expect", expect)
	f, err := os.Open(expect)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("line %d: %v", lines+1, err)
		}
		var keys []string
		for k := range row {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if d := cmp.Diff([]string{"attr", "code", "external_account_number", "kind", "line"}, keys); d != "" {
			t.Fatalf("fields of an expected failure (-want +got):\n%s", d)
		}
		lines++
	}
	if lines == 0 {
		t.Fatal("the --expect file is empty for a cohort with invalid accounts")
	}
}
