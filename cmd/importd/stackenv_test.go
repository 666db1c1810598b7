package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stack.sh env sets every variable importd and importctl need: after eval,
// the configuration of importd serve loads.
func TestStackEnv_SetsEveryVariableTheToolsNeed(t *testing.T) {
	t.Parallel()
	script := `eval "$(deploy/local/stack.sh env)" && for v in DATABASE_URL REDIS_URL TOKEN_SECRET DOCUMENTS_URL HTTP_ADDR IMPORTCTL_URL; do printf '%s=%s\n' "$v" "${!v}"; done`
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = "../.."
	// Both URLs set: the script starts nothing. TOKEN_SECRET set: it writes no
	// secret file.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "DATABASE_URL=postgres://u@127.0.0.1:1/d", "REDIS_URL=redis://127.0.0.1:2/0",
		"TOKEN_SECRET=" + testSecret, "DOCUMENTS_URL=file:///tmp/docs", "HTTP_ADDR=127.0.0.1:9999"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		env[k] = v
	}
	want := map[string]string{"DATABASE_URL": "postgres://u@127.0.0.1:1/d", "REDIS_URL": "redis://127.0.0.1:2/0",
		"TOKEN_SECRET": testSecret, "DOCUMENTS_URL": "file:///tmp/docs", "HTTP_ADDR": "127.0.0.1:9999",
		"IMPORTCTL_URL": "http://127.0.0.1:9999"}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Fatalf("variables after eval (-want +got):\n%s", diff)
	}
	if _, err := loadConfig(func(k string) string { return env[k] }, needDB|needRedis|needToken); err != nil {
		t.Errorf("importd configuration from stack.sh env: %v", err)
	}
}

// make -s env, which a user evals into a shell, sets what importctl reads
// and nothing else: not importd's TOKEN_SECRET, which signs every token, nor
// REDIS_URL or HTTP_ADDR, which importctl ignores.
func TestMakeEnv_PrintsOnlyWhatImportctlReads(t *testing.T) {
	t.Parallel()
	keyFile := filepath.Join(t.TempDir(), "demo_api_key")
	if err := os.WriteFile(keyFile, []byte("bik_demokey789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-s", "env")
	cmd.Dir = "../.."
	// Both URLs set: the script starts nothing.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "DATABASE_URL=postgres://u@127.0.0.1:1/d", "REDIS_URL=redis://127.0.0.1:2/0",
		"TOKEN_SECRET=" + testSecret, "DOCUMENTS_URL=file:///tmp/docs", "HTTP_ADDR=127.0.0.1:9999", "DEMO_KEY_FILE=" + keyFile}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -s env: %v: %s", err, out)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{"export DATABASE_URL='postgres://u@127.0.0.1:1/d'", "export DOCUMENTS_URL='file:///tmp/docs'",
		"export IMPORTCTL_URL='http://127.0.0.1:9999'", "export IMPORTCTL_API_KEY='bik_demokey789'"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("make -s env (-want +got):\n%s", d)
	}
	if strings.Contains(string(out), testSecret) {
		t.Error("make -s env prints the token secret")
	}
}
