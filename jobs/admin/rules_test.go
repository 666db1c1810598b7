package admin

import (
	"testing"

	"github.com/bulkimport/bulkimport/jobs/problem/problemtest"
)

// Every code this package answers with is named in RULES.md, with the
// command that answers it.
func TestRulesFile_NamesEveryCodeOfThePackage(t *testing.T) {
	t.Parallel()
	// The document-root codes are documents' constants, answered by this
	// package's supplier commands.
	codes := append(problemtest.Codes(t, "."), problemtest.Codes(t, "../documents")...)
	var own []string
	for _, c := range codes {
		switch c {
		case "invalid_document_path", "path_does_not_exist_in_file_store", "document_store_not_configured", "document_store_unavailable":
			// Answers of E5, E6 and E8, in ../account and ../postimport RULES.md.
		default:
			own = append(own, c)
		}
	}
	problemtest.CheckListed(t, "RULES.md", own)
}
