package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
)

type ctl struct {
	t   *testing.T
	env map[string]string
}

func newCtl(t *testing.T) *ctl {
	return &ctl{t: t, env: map[string]string{"DATABASE_URL": dbtest.NewDatabase(t)}}
}

// run executes importctl and returns its exit code, stdout and stderr.
func (c *ctl) run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return c.env[k] }, &out, &errb)
	return code, out.String(), errb.String()
}

// ok runs a command that must succeed and returns its stdout.
func (c *ctl) ok(args ...string) string {
	c.t.Helper()
	code, out, errs := c.run(args...)
	if code != 0 {
		c.t.Fatalf("importctl %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

// fails runs a command that must fail with a one-line error containing want.
func (c *ctl) fails(want string, args ...string) {
	c.t.Helper()
	code, _, errs := c.run(args...)
	if code == 0 {
		c.t.Fatalf("importctl %s succeeded, want failure", strings.Join(args, " "))
	}
	if strings.Count(strings.TrimRight(errs, "\n"), "\n") != 0 || !strings.HasPrefix(errs, "importctl: ") {
		c.t.Errorf("error output is not one line: %q", errs)
	}
	if !strings.Contains(errs, want) {
		c.t.Errorf("importctl %s: error %q does not contain %q", strings.Join(args, " "), errs, want)
	}
}

// db opens the test's database, closed when the test ends.
func (c *ctl) db() *db.DB {
	c.t.Helper()
	d, err := db.Open(context.Background(), c.env["DATABASE_URL"], 2)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { d.Close() })
	return d
}

func (c *ctl) jsonList(args ...string) []map[string]any {
	c.t.Helper()
	var out []map[string]any
	if err := json.Unmarshal([]byte(c.ok(append(args, "--json")...)), &out); err != nil {
		c.t.Fatalf("--json output of %v: %v", args, err)
	}
	return out
}

func TestSupplierCommands(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	c.ok("supplier", "create", "ACME_2024", "--status", "Paused", "--document-root", "acme/", "--country", "IE", "--migration-emails")
	c.ok("supplier", "create", "PLAIN")
	c.fails("already exists", "supplier", "create", "PLAIN")
	c.fails("upper-case letters, digits and underscores", "supplier", "create", "lower-case")
	c.fails("Ongoing, Paused, Complete", "supplier", "create", "X1", "--status", "Sleeping")
	c.fails("ISO 3166-1", "supplier", "create", "X2", "--country", "Ireland")
	c.ok("supplier", "set-status", "PLAIN", "Complete")
	c.fails("does not exist", "supplier", "set-status", "NOPE", "Paused")
	c.fails("Ongoing, Paused, Complete", "supplier", "set-status", "PLAIN", "Done")

	got := c.jsonList("supplier", "list")
	if len(got) != 2 {
		t.Fatalf("suppliers: %v", got)
	}
	acme, plain := got[0], got[1]
	if acme["code"] != "ACME_2024" || acme["status"] != "Paused" || acme["country"] != "IE" || acme["document_root"] != "acme" || acme["migration_emails"] != true {
		t.Errorf("ACME_2024 stored as %v", acme)
	}
	if plain["status"] != "Complete" || plain["country"] != "GB" || plain["migration_emails"] != false {
		t.Errorf("PLAIN stored as %v", plain)
	}
	if table := c.ok("supplier", "list"); !strings.Contains(table, "CODE") || !strings.Contains(table, "ACME_2024") {
		t.Errorf("table output: %q", table)
	}
}

func TestTeamCommands(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	c.ok("team", "create", "Migration Ops")
	c.fails("already exists", "team", "create", "Migration Ops")
	c.fails("blank", "team", "create", " ")
	if got := c.jsonList("team", "list"); len(got) != 1 || got[0]["name"] != "Migration Ops" {
		t.Errorf("teams: %v", got)
	}
}

func TestProductCommands(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	c.ok("product", "create", "ELEC-STD", "--tariff", "E-STD-1", "--tariff", "E-STD-2")
	c.fails("already exists", "product", "create", "ELEC-STD", "--tariff", "E-STD-3")
	c.fails("at least one tariff", "product", "create", "NO-TARIFF")
	c.fails("already exists", "product", "create", "OTHER", "--tariff", "E-STD-1")
	got := c.jsonList("product", "list")
	if len(got) != 1 || got[0]["code"] != "ELEC-STD" || len(got[0]["tariffs"].([]any)) != 2 {
		t.Errorf("products: %v (a failed create must leave nothing behind)", got)
	}
}

func TestAPIKeyCommands(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	c.ok("supplier", "create", "ONE")
	key := c.ok("apikey", "create", "migration-team", "--supplier", "ONE")
	if lines := strings.Split(strings.TrimRight(key, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "bik_") {
		t.Fatalf("apikey create printed %q, want the key alone on one line", key)
	}
	c.fails("already exists", "apikey", "create", "migration-team", "--all-suppliers")
	c.fails("does not exist", "apikey", "create", "other", "--supplier", "NOPE")
	got := c.jsonList("apikey", "list")
	if len(got) != 1 || got[0]["name"] != "migration-team" || got[0]["suppliers"] != "ONE" || got[0]["revoked_at"] != nil {
		t.Fatalf("keys: %v (a failed create must leave nothing behind)", got)
	}
	if strings.Contains(c.ok("apikey", "list"), strings.TrimSpace(key)) {
		t.Error("apikey list shows the key")
	}
	c.ok("apikey", "revoke", "migration-team")
	c.fails("No active API key", "apikey", "revoke", "migration-team")
	if got := c.jsonList("apikey", "list"); got[0]["revoked_at"] == nil {
		t.Error("revoked key listed as active")
	}
}

func TestAccountSkipCommands(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	c.ok("supplier", "create", "ONE")
	c.ok("account", "skip", "ONE", "A-100")
	c.ok("account", "skip", "ONE", "A-100") // marking twice is harmless
	c.fails("does not exist", "account", "skip", "NOPE", "A-100")
	if got := c.jsonList("account", "skipped", "ONE"); len(got) != 1 || got[0]["external_account_number"] != "A-100" {
		t.Fatalf("skipped: %v", got)
	}
	c.ok("account", "unskip", "ONE", "A-100")
	c.fails("not marked to be skipped", "account", "unskip", "ONE", "A-100")
	if got := c.jsonList("account", "skipped", "ONE"); len(got) != 0 {
		t.Errorf("skipped after unskip: %v", got)
	}
}

func TestMissingDatabaseURLIsNamed(t *testing.T) {
	t.Parallel()
	c := &ctl{t: t, env: map[string]string{}}
	c.fails("DATABASE_URL", "team", "list")
}

func TestUsageErrorsFail(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	c.fails("accepts 1 arg", "team", "create")
	c.fails("unknown command", "nonsense")
}

// A key's scope is given explicitly: its suppliers or --all-suppliers,
// exactly one of the two; and a supplier a key names cannot be deleted.
func TestAPIKeyCreate_ScopeIsExplicit(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	c.ok("supplier", "create", "ONE")
	c.fails("--all-suppliers", "apikey", "create", "implicit")
	c.fails("--all-suppliers", "apikey", "create", "both", "--supplier", "ONE", "--all-suppliers")
	c.ok("apikey", "create", "everything", "--all-suppliers")
	c.ok("apikey", "create", "one", "--supplier", "ONE")
	got := map[string]any{}
	for _, k := range c.jsonList("apikey", "list") {
		got[k["name"].(string)] = []any{k["all_suppliers"], k["suppliers"]}
	}
	want := map[string]any{"everything": []any{true, ""}, "one": []any{false, "ONE"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	if table := c.ok("apikey", "list"); !strings.Contains(table, "(all)") {
		t.Errorf("table does not show the all-suppliers key: %q", table)
	}
	d := c.db()
	if _, err := d.Exec(`DELETE FROM import_suppliers WHERE code = 'ONE'`); err == nil {
		t.Error("the supplier of a scoped key was deleted")
	}
}

// Every command that sends the API key warns when it would cross the
// network in clear: plain http:// to another machine. The address is one
// that does not resolve, so each command fails right after the warning.
func TestAPICommands_WarnOfPlainHTTPToAnotherMachine(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	const url = "http://importd.invalid:9"
	for _, args := range [][]string{
		{"run", "cohort.ndjson", "--team", "Ops", "--url", url, "--api-key", "k", "--retries", "0"},
		{"reconcile", "cohort.ndjson", "--url", url, "--api-key", "k", "--retries", "1"},
		{"account", "show", "DEMO", "A-1", "--url", url, "--api-key", "k"},
	} {
		code, _, stderr := c.run(args...)
		if code == 0 || !strings.Contains(stderr, "importctl: warning: "+url+" is plain http:// to another machine") {
			t.Errorf("importctl %s: exit %d, stderr %q; want a failure after the warning", args[0], code, stderr)
		}
	}
	if _, _, stderr := c.run("reconcile", "cohort.ndjson", "--url", "http://127.0.0.1:9", "--api-key", "k", "--retries", "1"); strings.Contains(stderr, "warning") {
		t.Errorf("a loopback address was warned of: %q", stderr)
	}
}
