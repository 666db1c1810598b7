package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkimport/bulkimport/jobs/admin"
)

// stack.sh env exports the demo's API key from the file `make run` keeps it
// in, so that `eval "$(make -s env)"` is all importctl needs; a key set in
// the environment wins, and without the file there is no key line.
func TestStackEnv_ExportsTheDemoKeyOnceMakeRunMadeIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "demo_api_key")
	base := []string{"DATABASE_URL=postgres://x@127.0.0.1:1/x", "REDIS_URL=redis://127.0.0.1:1/0",
		"TOKEN_SECRET=s", "DEMO_KEY_FILE=" + keyFile}
	env := func(extra ...string) string {
		t.Helper()
		cmd := exec.Command("deploy/local/stack.sh", "env")
		cmd.Dir = "../.."
		cmd.Env = scriptEnv(append(base, extra...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("stack.sh env: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := env(); strings.Contains(out, "IMPORTCTL_API_KEY") {
		t.Errorf("an API key exported with no key file:\n%s", out)
	}
	if err := os.WriteFile(keyFile, []byte("demo-20260101T000000Z-0a1b2c3d\nbik_demokey123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := env(); !strings.Contains(out, "export IMPORTCTL_API_KEY='bik_demokey123'\n") {
		t.Errorf("the demo's key of an earlier demo's file (name, then key) is not exported:\n%s", out)
	}
	// demo.sh now keeps the key alone on one line.
	if err := os.WriteFile(keyFile, []byte("bik_demokey456\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := env(); !strings.Contains(out, "export IMPORTCTL_API_KEY='bik_demokey456'\n") {
		t.Errorf("the demo's key is not exported:\n%s", out)
	}
	if out := env("IMPORTCTL_API_KEY=bik_mine"); !strings.Contains(out, "export IMPORTCTL_API_KEY='bik_mine'\n") {
		t.Errorf("the key set in the environment does not win:\n%s", out)
	}
}

// The banner of `make run` names the migration progress page beside the
// dashboard.
func TestDemo_BannerNamesTheProgressPage(t *testing.T) {
	t.Parallel()
	demoTools(t)
	importctl := buildImportctl(t)
	dbURL, _ := demoDatabase(t)
	env := demoEnv(t, importctl, filepath.Join(t.TempDir(), "demo_api_key"))(dbURL)
	env = append(env, "MONITORING_USER=ops", "MONITORING_PASSWORD=pw", "HTTP_ADDR=127.0.0.1:18123")
	demo := exec.Command("deploy/local/demo.sh")
	demo.Dir, demo.Env = "../..", env
	var stderr bytes.Buffer
	demo.Stderr = &stderr
	banner, err := demo.Output()
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(string(banner), "http://127.0.0.1:18123/migration/") {
		t.Errorf("the banner does not name the progress page:\n%s", banner)
	}
}

// make install puts both commands in GOBIN and says when that folder is not
// on the PATH, so that the README's `importctl` is found.
func TestMakeInstall_CopiesBothCommandsIntoGOBINAndNamesIt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds both commands; make test-long runs it")
	}
	gobin := t.TempDir()
	cmd := exec.Command("make", "-s", "install")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, bin := range []string{"importd", "importctl"} {
		if fi, err := os.Stat(filepath.Join(gobin, bin)); err != nil || fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s in GOBIN: %v", bin, err)
		}
	}
	if !strings.Contains(string(out), "install: importd and importctl are in "+gobin) ||
		!strings.Contains(string(out), gobin+" is not on your PATH") {
		t.Errorf("make install does not say where it put them and that the folder is not on the PATH:\n%s", out)
	}
}

// Successful answers end with a newline, as error bodies do, so that a
// curl in a terminal leaves the prompt on a line of its own; and they keep
// "<" and "&" as sent, as error bodies do, rather than \u003c and \u0026.
func TestAPI_SuccessBodiesEndWithANewlineAndAreNotHTMLEscaped(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "Ops & <Partners>"))
	acc := fixture(t, "ACC-NEWLINE")
	for _, r := range []struct {
		name string
		res  response
	}{
		{"E3", s.do(t, http.MethodPost, "/v1/data-import/validate-account/", tok, acc)},
		{"whoami", s.do(t, http.MethodGet, "/v1/data-import/whoami/", tok, nil)},
	} {
		if r.res.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", r.name, r.res.Status, r.res.Raw)
		}
		if !bytes.HasSuffix(r.res.Raw, []byte("}\n")) {
			t.Errorf("%s: the body does not end with a newline: %q", r.name, r.res.Raw)
		}
	}
	who := s.do(t, http.MethodGet, "/v1/data-import/whoami/", tok, nil)
	if !bytes.Contains(who.Raw, []byte(`"Ops & <Partners>"`)) {
		t.Errorf("whoami escapes the key's name: %s", who.Raw)
	}
}
