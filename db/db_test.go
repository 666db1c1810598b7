package db_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"testing"

	"github.com/jmoiron/sqlx"

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

func TestIsUnavailable_TellsADatabaseOutOfReachFromARefusedStatement(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()

	// Nothing listens on a port just freed: the dial is refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	closed, err := sqlx.Open("postgres", fmt.Sprintf("postgres://importd@127.0.0.1:%d/importd?sslmode=disable&connect_timeout=2", port))
	if err != nil {
		t.Fatal(err)
	}
	defer closed.Close()
	refused := closed.PingContext(ctx)

	// A session the server ends (as a fast shutdown ends every session):
	// its next statement fails.
	conn, err := d.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var pid int
	if err := conn.GetContext(ctx, &pid, `SELECT pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Exec(`SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	var one int
	terminated := conn.GetContext(ctx, &one, `SELECT 1`)

	_, syntax := d.Exec(`SELEC 1`)
	_, dup := d.Exec(`INSERT INTO operations_teams (name) VALUES ('ops'), ('ops')`)
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"wrapped", fmt.Errorf("find key: %w", refused), true},
		{"session terminated by the server", terminated, true},
		// A connection reset between two messages: lib/pq reads io.EOF
		// (a proxy cutting connections mid-statement, in the chaos runs).
		{"connection closed mid-statement", fmt.Errorf("find key: %w", io.EOF), true},
		{"an outgoing HTTP call cut", &url.Error{Op: "Post", URL: "http://vendor/", Err: io.EOF}, false},
		{"an outgoing HTTP call refused", fmt.Errorf("vendor: %w", &url.Error{Op: "Post", URL: "http://vendor/", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}), false},
		{"a statement refused", syntax, false},
		{"a constraint violated", dup, false},
		{"no rows", sql.ErrNoRows, false},
		{"not a driver error", errors.New("connection refused"), false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.want && tc.err == nil {
				t.Fatal("the failure to classify did not happen")
			}
			if got := db.IsUnavailable(tc.err); got != tc.want {
				t.Errorf("IsUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestIsNumericOverflow_RecognisesAValueBeyondItsColumn(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	_, overflow := d.Exec(`SELECT 1e20::numeric(14, 2)`)
	if overflow == nil {
		t.Fatal("1e20 fit in numeric(14, 2)")
	}
	_, division := d.Exec(`SELECT 1 / 0`)
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"overflow", overflow, true},
		{"wrapped", fmt.Errorf("insert: %w", overflow), true},
		{"another error", division, false},
		{"not a driver error", errors.New("numeric field overflow"), false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := db.IsNumericOverflow(tc.err); got != tc.want {
				t.Errorf("IsNumericOverflow(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
