package db_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
)

func TestIsUniqueViolation_RecognisesTheDriversErrorAndItsConstraint(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	if _, err := d.Exec(`INSERT INTO operations_teams (name) VALUES ('ops')`); err != nil {
		t.Fatal(err)
	}
	_, dup := d.Exec(`INSERT INTO operations_teams (name) VALUES ('ops')`)
	if dup == nil {
		t.Fatal("a second team of the same name was stored")
	}
	_, notNull := d.Exec(`INSERT INTO operations_teams (name) VALUES (NULL)`)
	if notNull == nil {
		t.Fatal("a team without a name was stored")
	}
	tests := []struct {
		name       string
		err        error
		constraint string
		want       bool
	}{
		{"any constraint", dup, "", true},
		{"its constraint", dup, "operations_teams_name_key", true},
		{"wrapped", fmt.Errorf("create team: %w", dup), "operations_teams_name_key", true},
		{"another constraint", dup, "api_keys_name_key", false},
		{"another violation", notNull, "", false},
		{"not a driver error", errors.New("duplicate key value violates unique constraint"), "", false},
		{"nil", nil, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := db.IsUniqueViolation(tc.err, tc.constraint); got != tc.want {
				t.Errorf("IsUniqueViolation(%v, %q) = %v, want %v", tc.err, tc.constraint, got, tc.want)
			}
		})
	}
}
