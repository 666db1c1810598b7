package creation

import (
	"testing"

	"github.com/bulkimport/bulkimport/jobs/problem/problemtest"
)

// Every code this package answers with is named in RULES.md, where each
// refusal gives its source.
func TestRulesFile_NamesEveryCodeOfThePackage(t *testing.T) {
	t.Parallel()
	problemtest.CheckListed(t, "RULES.md", problemtest.Codes(t, "."))
}
