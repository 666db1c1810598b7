package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/auth"
)

// demoDatabase is a fresh migrated database for demo.sh: its URL without
// the synchronous_commit parameter (psql, which demo.sh runs, refuses it),
// and a connection to it.
func demoDatabase(t *testing.T) (string, func() []auth.KeyInfo) {
	t.Helper()
	raw := dbtest.NewDatabase(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("synchronous_commit")
	u.RawQuery = q.Encode()
	d, err := db.Open(context.Background(), raw, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return u.String(), func() []auth.KeyInfo {
		ks, err := auth.ListKeys(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
}

// activeDemoKeys are the prefixes of the active keys demo.sh made.
func activeDemoKeys(ks []auth.KeyInfo) []string {
	var out []string
	for _, k := range ks {
		if strings.HasPrefix(k.Name, "demo-") && k.RevokedAt == nil {
			out = append(out, k.Prefix)
		}
	}
	return out
}

// runDemo runs deploy/local/demo.sh and returns the key its banner prints.
func runDemo(t *testing.T, env []string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	demo := exec.Command("deploy/local/demo.sh")
	demo.Dir, demo.Env = root, env
	var stderr bytes.Buffer
	demo.Stderr = &stderr
	banner, err := demo.Output()
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, stderr.String())
	}
	m := bannerKey.FindSubmatch(banner)
	if m == nil {
		t.Fatalf("no API key in the banner:\n%s\nstderr:\n%s", banner, stderr.String())
	}
	return string(m[1])
}

// demoEnv is demo.sh's environment for a test: the key file in a directory
// of the test's own, and something listening at the vendor simulator's
// address so that demo.sh starts no simulator.
func demoEnv(t *testing.T, importctl, keyFile string) func(dbURL string) []string {
	return func(dbURL string) []string {
		return scriptEnv("DATABASE_URL="+dbURL, "IMPORTCTL="+importctl, "DEMO_KEY_FILE="+keyFile,
			"DOCUMENTS_URL=file://"+t.TempDir(), "VENDOR_SIM_ADDR=127.0.0.1:"+strconv.Itoa(listen(t)))
	}
}

func demoTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"bash", "psql"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
}

// Repeated `make run`s reuse the demo API key kept in .local/demo_api_key
// (mode 600) instead of leaving one more active key each time: the banner
// prints the same key, and the database holds one active demo key.
func TestDemo_RepeatedRunsReuseOneActiveKey(t *testing.T) {
	t.Parallel()
	demoTools(t)
	importctl := buildImportctl(t)
	dbURL, keys := demoDatabase(t)
	keyFile := filepath.Join(t.TempDir(), "state", "demo_api_key")
	env := demoEnv(t, importctl, keyFile)

	first := runDemo(t, env(dbURL))
	second := runDemo(t, env(dbURL))
	if second != first {
		t.Errorf("second run printed key %s…, want the first run's %s…", second[:12], first[:12])
	}
	if d := cmp.Diff([]string{first[:12]}, activeDemoKeys(keys())); d != "" {
		t.Errorf("active demo keys after two runs (-want +got):\n%s", d)
	}
	fi, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", keyFile, fi.Mode().Perm())
	}
	// The key alone on one line: KEY=$(cat .local/demo_api_key) is the key.
	if raw, err := os.ReadFile(keyFile); err != nil || string(raw) != first+"\n" {
		t.Errorf("%s holds %q (%v), want the key alone on one line", keyFile, raw, err)
	}
}

// The key file of an earlier demo held the key's name on a line before the
// key: its key is reused, and the file is rewritten with the key alone.
func TestDemo_KeyFileWithTheNameIsReusedAndRewrittenAsTheKeyAlone(t *testing.T) {
	t.Parallel()
	demoTools(t)
	importctl := buildImportctl(t)
	dbURL, keys := demoDatabase(t)
	keyFile := filepath.Join(t.TempDir(), "demo_api_key")
	env := demoEnv(t, importctl, keyFile)

	first := runDemo(t, env(dbURL))
	var name string
	for _, k := range keys() {
		if k.Prefix == first[:12] {
			name = k.Name
		}
	}
	if err := os.WriteFile(keyFile, []byte(name+"\n"+first+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if second := runDemo(t, env(dbURL)); second != first {
		t.Errorf("the key of a two-line file was not reused: %s…, want %s…", second[:12], first[:12])
	}
	if raw, err := os.ReadFile(keyFile); err != nil || string(raw) != first+"\n" {
		t.Errorf("%s holds %q (%v), want the key alone on one line", keyFile, raw, err)
	}
	if d := cmp.Diff([]string{first[:12]}, activeDemoKeys(keys())); d != "" {
		t.Errorf("active demo keys (-want +got):\n%s", d)
	}
}

// A demo key revoked since the last run, or unknown because the database was
// reset, is replaced by a new one that later runs reuse, and no earlier demo
// key stays active.
func TestDemo_RevokedOrResetKeyIsReplaced(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs demo.sh four times (about 30 s on a loaded machine); make test-long runs it")
	}
	demoTools(t)
	importctl := buildImportctl(t)
	dbURL, keys := demoDatabase(t)
	keyFile := filepath.Join(t.TempDir(), "demo_api_key")
	env := demoEnv(t, importctl, keyFile)

	first := runDemo(t, env(dbURL))
	var name string
	for _, k := range keys() {
		if k.Prefix == first[:12] {
			name = k.Name
		}
	}
	revoke := exec.Command(importctl, "apikey", "revoke", name)
	revoke.Env = env(dbURL)
	if out, err := revoke.CombinedOutput(); err != nil {
		t.Fatalf("revoke: %v\n%s", err, out)
	}
	second := runDemo(t, env(dbURL))
	if second == first {
		t.Fatal("a revoked key was printed again")
	}
	if d := cmp.Diff([]string{second[:12]}, activeDemoKeys(keys())); d != "" {
		t.Errorf("active demo keys after a revocation (-want +got):\n%s", d)
	}
	if third := runDemo(t, env(dbURL)); third != second {
		t.Errorf("run after the new key printed %s…, want %s…", third[:12], second[:12])
	}

	resetURL, resetKeys := demoDatabase(t)
	fourth := runDemo(t, env(resetURL))
	if fourth == second {
		t.Error("a key of another database was printed")
	}
	if d := cmp.Diff([]string{fourth[:12]}, activeDemoKeys(resetKeys())); d != "" {
		t.Errorf("active demo keys after a database reset (-want +got):\n%s", d)
	}
}

// Two demo keys made within the same second get different names: with the
// clock frozen (a date on the PATH that always prints the same time), a key
// revoked and replaced at once is created anew instead of colliding with
// the revoked key's name.
func TestDemo_KeysMadeWithinOneSecondDoNotCollide(t *testing.T) {
	t.Parallel()
	demoTools(t)
	importctl := buildImportctl(t)
	dbURL, keys := demoDatabase(t)
	keyFile := filepath.Join(t.TempDir(), "demo_api_key")
	shims := t.TempDir()
	frozen := "#!/bin/sh\necho 20260101T000000Z\n"
	if err := os.WriteFile(filepath.Join(shims, "date"), []byte(frozen), 0o755); err != nil {
		t.Fatal(err)
	}
	base := demoEnv(t, importctl, keyFile)
	env := func() []string {
		e := base(dbURL)
		for i, v := range e {
			if strings.HasPrefix(v, "PATH=") {
				e[i] = "PATH=" + shims + ":" + strings.TrimPrefix(v, "PATH=")
			}
		}
		return e
	}

	first := runDemo(t, env())
	for _, k := range keys() {
		if k.Prefix == first[:12] {
			revoke := exec.Command(importctl, "apikey", "revoke", k.Name)
			revoke.Env = env()
			if out, err := revoke.CombinedOutput(); err != nil {
				t.Fatalf("revoke: %v\n%s", err, out)
			}
		}
	}
	second := runDemo(t, env())
	if second == first {
		t.Fatal("the revoked key was printed again")
	}
	if d := cmp.Diff([]string{second[:12]}, activeDemoKeys(keys())); d != "" {
		t.Errorf("active demo keys (-want +got):\n%s", d)
	}
}
