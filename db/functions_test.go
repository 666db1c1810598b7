package db_test

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db/dbtest"
)

var update = flag.Bool("update", false, "rewrite functions.sql from a migrated database")

// functionsHeader opens functions.sql, which the test below writes.
const functionsHeader = `-- The current definition of every SQL function and trigger of the schema, as
-- PostgreSQL holds it after every migration under migrations/. Migrations
-- redefine functions over time (each says so at its top); this file is the
-- one place to read today's body of each. It is generated, not applied:
--
--   go test ./db -run TestFunctions -update
--
-- and TestFunctions_FileIsTheMigratedSchemas fails when a migration changes a
-- function without the file being regenerated.
`

// functions.sql holds, in one file, today's definition of every function
// and trigger that the migrations create, so that nobody has to replay the
// migrations in their head to read one; it fails when they drift apart.
func TestFunctions_FileIsTheMigratedSchemas(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	var defs []string
	// Functions of extensions (pg_stat_statements, in a database where a
	// benchmark created it) are not the schema's.
	if err := d.Select(&defs, `
		SELECT pg_get_functiondef(p.oid) || ';' FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'public'
		  AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.objid = p.oid AND e.deptype = 'e')
		ORDER BY p.proname, pg_get_function_identity_arguments(p.oid)`); err != nil {
		t.Fatal(err)
	}
	var triggers []string
	if err := d.Select(&triggers, `
		SELECT pg_get_triggerdef(t.oid, true) || ';' FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND NOT t.tgisinternal
		ORDER BY c.relname, t.tgname`); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(functionsHeader)
	b.WriteString("\n-- Functions, by name.\n\n")
	for _, f := range defs {
		b.WriteString(strings.TrimSpace(f))
		b.WriteString("\n\n")
	}
	b.WriteString("-- Triggers, by table and name.\n\n")
	for _, tr := range triggers {
		b.WriteString(tr)
		b.WriteString("\n")
	}
	got := b.String()
	if *update {
		if err := os.WriteFile("functions.sql", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("functions.sql")
	if err != nil {
		t.Fatalf("%v (write it with go test ./db -run TestFunctions -update)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("functions.sql is not the migrated schema's (go test ./db -run TestFunctions -update) (-file +schema):\n%s", d)
	}
}

// PostgreSQL plans the query of a SQL-language function that it cannot
// inline (one that reads a table cannot be) again on every call; PL/pgSQL
// keeps its plans for the session. A function that requests call must be
// PL/pgSQL then; the ones listed run rarely, on an operator's command.
func TestFunctions_TableReadingFunctionsKeepTheirPlans(t *testing.T) {
	t.Parallel()
	rarelyCalled := map[string]bool{"progress_rebuild": true}
	d := dbtest.New(t)
	var fns []struct {
		Name string `db:"proname"`
		Src  string `db:"prosrc"`
	}
	if err := d.Select(&fns, `
		SELECT p.proname, p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		JOIN pg_language l ON l.oid = p.prolang
		WHERE n.nspname = 'public' AND l.lanname = 'sql'
		  AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.objid = p.oid AND e.deptype = 'e')`); err != nil {
		t.Fatal(err)
	}
	var tables []string
	if err := d.Select(&tables, `SELECT tablename FROM pg_tables WHERE schemaname = 'public'`); err != nil {
		t.Fatal(err)
	}
	for _, f := range fns {
		if rarelyCalled[f.Name] {
			continue
		}
		words := strings.FieldsFunc(strings.ToLower(f.Src), func(r rune) bool {
			return !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		})
		for i := 1; i < len(words); i++ {
			if (words[i-1] == "from" || words[i-1] == "join") && slices.Contains(tables, words[i]) {
				t.Errorf("%s is a SQL-language function that reads table %s: write it in PL/pgSQL, so that its plan is kept", f.Name, words[i])
				break
			}
		}
	}
}
