package main

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the configuration table of docs/operating.md from the code")

const (
	tableStart = "<!-- config-table:start -->\n"
	tableEnd   = "<!-- config-table:end -->"
)

// The configuration table of docs/operating.md is written from the same
// table that loadConfig reads, so that the two cannot disagree.
func TestDocs_ConfigTableMatchesCode(t *testing.T) {
	t.Parallel()
	const path = "../../docs/operating.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i, j := strings.Index(s, tableStart), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/operating.md has no %q ... %q section", tableStart, tableEnd)
	}
	want := configTable()
	if got := s[i+len(tableStart) : j]; got != want {
		if *update {
			if err := os.WriteFile(path, []byte(s[:i+len(tableStart)]+want+s[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("docs/operating.md configuration table is out of date; run `go test ./cmd/importd -run TestDocs_ConfigTable -update`.\nwant:\n%s", want)
	}
}
