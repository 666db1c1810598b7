package reconcile

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
)

// The cohort comes out in byte order of the account numbers, every line
// once (repeats in line order), whether it fits in memory or is sorted in
// runs on disk; the runs are removed afterwards, and malformed lines are
// reported, not sorted.
func TestSortCohort_ByteOrderInMemoryAndInRunsOnDisk(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	var lines []string
	var want []string
	for i := range 500 {
		ext := fmt.Sprintf("%c%d", "aBé_-Z"[rng.IntN(6)], rng.IntN(300))
		if i == 100 {
			lines = append(lines, "not json")
			continue
		}
		lines = append(lines, fmt.Sprintf(`{"account": {"import_supplier": "DEMO", "external_account_number": %q}}`, ext))
		want = append(want, ext)
	}
	slices.Sort(want)
	path := filepath.Join(t.TempDir(), "cohort.ndjson")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []int{64 << 20, 1 << 10, 1} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			var bad []int
			s, err := sortCohort(path, tmp, chunk, func(le *cohort.LineError) { bad = append(bad, le.Number) })
			if err != nil {
				t.Fatal(err)
			}
			next, err := s.iterator()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			var prev entry
			for {
				e, ok, err := next()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				if len(got) > 0 && compareEntries(prev, e) > 0 {
					t.Fatalf("%v before %v", prev, e)
				}
				got, prev = append(got, e.ext), e
			}
			s.close()
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("order (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]int{101}, bad); d != "" {
				t.Errorf("malformed lines (-want +got):\n%s", d)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("runs left on disk: %v", left)
			}
		})
	}
}

func TestSortCohort_AnotherSupplierIsRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "cohort.ndjson")
	body := `{"account": {"import_supplier": "DEMO", "external_account_number": "A"}}
{"account": {"import_supplier": "OTHER", "external_account_number": "B"}}
`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sortCohort(path, t.TempDir(), 1<<20, func(*cohort.LineError) {}); err == nil || !strings.Contains(err.Error(), "more than one import supplier") {
		t.Errorf("error %v, want the suppliers named", err)
	}
}
