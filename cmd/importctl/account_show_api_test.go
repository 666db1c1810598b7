package main

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/api"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/auth"
)

// startAPI serves the API over the test's database, as importd serve does
// for the routes account show uses (the token and the account detail).
func startAPI(t *testing.T, s *showAccount) string {
	t.Helper()
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	srv := httptest.NewServer(api.New(api.Config{}, api.Deps{DB: s.db, Redis: rc,
		Auth: auth.New(s.db, []byte(strings.Repeat("k", 32))), Log: slog.New(slog.DiscardHandler)}).Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// A migration team has an API key and no database login: account show
// reads through the API with the key, as run and reconcile do, and prints
// what the database's reading prints. With both configured the key wins
// (its scope shows), and --database reads the database all the same; with
// neither, the error names both ways.
func TestAccountShow_ThroughTheAPIWithAnAPIKey(t *testing.T) {
	t.Parallel()
	s := newShowAccount(t)
	base := startAPI(t, s)
	key := strings.TrimSpace(s.c.ok("apikey", "create", "team", "--supplier", "DEMO"))
	s.c.ok("supplier", "create", "OTHER")
	otherKey := strings.TrimSpace(s.c.ok("apikey", "create", "elsewhere", "--supplier", "OTHER"))
	dbURL := s.c.env["DATABASE_URL"]
	fromDB := map[string]string{}
	for _, form := range []string{"--json", "--json=false"} {
		fromDB[form] = s.c.ok("account", "show", "DEMO", "A-00012345", form)
	}

	team := &ctl{t: t, env: map[string]string{"IMPORTCTL_URL": base, "IMPORTCTL_API_KEY": key}}
	for form, want := range fromDB {
		if d := cmp.Diff(want, team.ok("account", "show", "DEMO", "A-00012345", form)); d != "" {
			t.Errorf("account show %s through the API (-database +API):\n%s", form, d)
		}
	}
	team.fails("No account NOPE of supplier DEMO was staged (E4).", "account", "show", "DEMO", "NOPE")
	flags := &ctl{t: t, env: map[string]string{}}
	if d := cmp.Diff(fromDB["--json"], flags.ok("account", "show", "DEMO", "A-00012345", "--json", "--url", base, "--api-key", key)); d != "" {
		t.Errorf("account show with --url and --api-key (-database +API):\n%s", d)
	}

	both := &ctl{t: t, env: map[string]string{"IMPORTCTL_URL": base, "IMPORTCTL_API_KEY": otherKey, "DATABASE_URL": dbURL}}
	both.fails("Import supplier DEMO does not exist.", "account", "show", "DEMO", "A-00012345")
	if d := cmp.Diff(fromDB["--json"], both.ok("account", "show", "DEMO", "A-00012345", "--json", "--database")); d != "" {
		t.Errorf("account show --database with a key set (-database +got):\n%s", d)
	}

	neither := &ctl{t: t, env: map[string]string{}}
	neither.fails("reads through the API with IMPORTCTL_URL and IMPORTCTL_API_KEY", "account", "show", "DEMO", "A-00012345")
	neither.fails("or the database with DATABASE_URL", "account", "show", "DEMO", "A-00012345")
	noURL := &ctl{t: t, env: map[string]string{"IMPORTCTL_API_KEY": key}}
	noURL.fails("IMPORTCTL_URL: required with an API key", "account", "show", "DEMO", "A-00012345")
}
