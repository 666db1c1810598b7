package creation

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The statements rendered from sql/create.sql (and jobs/note's template for
// the notes) are the ones that were Go constants rewritten with a regular
// expression, word for word: testdata holds those, as they were generated.
// A deliberate change to the statement updates the golden files with it.
func TestCreateSQL_RendersTheGoldenStatementsModuloWhitespace(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, golden, got string
	}{
		{"one account", "testdata/create_one.golden.sql", createSQL},
		{"many accounts", "testdata/create_many.golden.sql", createManySQL},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want, err := os.ReadFile(c.golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(strings.Fields(string(want)), strings.Fields(c.got)); diff != "" {
				t.Errorf("rendered statement differs from %s (-want +got):\n%s", c.golden, diff)
			}
		})
	}
}
