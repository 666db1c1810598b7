package status_test

import (
	"regexp"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/status"
)

// The database allows exactly the states declared here: a state added or
// renamed on one side only fails this test.
func TestStatus_TheDatabaseAllowsExactlyTheseNames(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	for _, tc := range []struct {
		table string
		want  []string
	}{
		{"import_processes", status.Processes},
		{"import_suppliers", status.Suppliers},
	} {
		var def string
		if err := d.Get(&def, `SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
			WHERE c.conrelid = $1::regclass AND c.contype = 'c' AND pg_get_constraintdef(c.oid) LIKE '%status%'`, tc.table); err != nil {
			t.Fatalf("%s: %v", tc.table, err)
		}
		var got []string
		for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(def, -1) {
			got = append(got, m[1])
		}
		want := slices.Clone(tc.want)
		slices.Sort(want)
		slices.Sort(got)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s.status allows (-Go +database):\n%s\n%s", tc.table, d, def)
		}
	}
}
