package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db/dbtest"
)

// scriptEnv is a minimal environment for the deploy/local scripts, with
// the given variables added.
func scriptEnv(vars ...string) []string {
	return append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/nonexistent"}, vars...)
}

// exitCode runs cmd and returns its exit status and combined output.
func exitCode(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("%s: %v\n%s", cmd, err, out)
	return 0, ""
}

// stack.sh without arguments prints its usage and exits 2, as a mistyped
// subcommand does; help asked for exits 0.
func TestStackScript_WithoutArgumentsPrintsUsageAndExits2(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
	}{
		{nil, 2},
		{[]string{"nonsense"}, 2},
		{[]string{"help"}, 0},
	} {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("deploy/local/stack.sh", tc.args...)
			cmd.Dir, cmd.Env = "../..", scriptEnv()
			code, out := exitCode(t, cmd)
			if code != tc.code || !strings.HasPrefix(out, "usage: deploy/local/stack.sh up|env|down|check-ports|chromium|promtool|haproxy\n") {
				t.Errorf("exit %d, want %d; output:\n%s", code, tc.code, out)
			}
		})
	}
}

// Ctrl-C in `make run` reaches the whole foreground process group: the
// service stops, and serve.sh (the last step of make run) says that
// PostgreSQL and Redis are still running and what stops them.
func TestServeScript_CtrlCSaysTheStackStillRunsAndHowToStopIt(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("deploy/local/serve.sh", "sleep", "60")
	cmd.Dir, cmd.Env = "../..", scriptEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for sleep to run in the script's process group, so that the
	// signal finds both, as a terminal's Ctrl-C does.
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids, _ := exec.Command("pgrep", "-g", strconv.Itoa(cmd.Process.Pid), "-x", "sleep").Output()
		if len(bytes.TrimSpace(pids)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sleep did not start under serve.sh")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("serve.sh did not stop after SIGINT; output:\n%s", out.String())
	}
	want := "sleep stopped. PostgreSQL and Redis are still running: make stack-down (or deploy/local/stack.sh down) stops them; their data stays in .local/."
	if got := strings.TrimSpace(out.String()); got != want {
		t.Errorf("output after Ctrl-C:\n%s\nwant:\n%s", got, want)
	}
}

// listen holds a loopback port until the test ends and returns it.
func listen(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// stackCopy copies stack.sh into a checkout of its own, so that the stack
// it considers its own (.local/redis, .local/pg) is the test's.
func stackCopy(t *testing.T) (script, root string) {
	t.Helper()
	root = t.TempDir()
	src, err := os.ReadFile("../../deploy/local/stack.sh")
	if err != nil {
		t.Fatal(err)
	}
	script = filepath.Join(root, "deploy", "local", "stack.sh")
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, src, 0o755); err != nil {
		t.Fatal(err)
	}
	return script, root
}

// startRedisIn runs a redis-server on a free port with the working directory
// dir until the test ends, and returns the port.
func startRedisIn(t *testing.T, dir string) int {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir, "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitTCP(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	return port
}

// `make run` checks the ports it will listen on before it starts or
// provisions anything (stack.sh check-ports): a busy one fails with the
// port, what holds it and the variable that moves it. The stack's own
// PostgreSQL and Redis, left running by an earlier run, are no conflict;
// another checkout's are.
func TestStackCheckPorts_BusyPortNamesItsHolderAndVariable(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ss"); err != nil {
		t.Skip("ss is not installed")
	}
	script, root := stackCopy(t)
	ownRedis := startRedisIn(t, filepath.Join(root, ".local", "redis"))
	foreignRedis := startRedisIn(t, t.TempDir())
	// The shared test PostgreSQL belongs to no stack of the copied script.
	pgURL, err := url.Parse(dbtest.DatabaseURL())
	if err != nil || pgURL.Port() == "" {
		t.Fatalf("TEST_DATABASE_URL has no port: %q", dbtest.DatabaseURL())
	}
	foreignPG := pgURL.Port()
	held := listen(t)
	holder := fmt.Sprintf("by pid %d (", os.Getpid())
	free := func() string { return strconv.Itoa(freePort(t)) }
	addr := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

	for _, tc := range []struct {
		name string
		env  map[string]string
		// want are the lines of the message, as patterns.
		want []string
	}{
		{"every port free", map[string]string{}, nil},
		{"stack's own redis already up", map[string]string{"STACK_REDIS_PORT": strconv.Itoa(ownRedis)}, nil},
		{"api address taken", map[string]string{"HTTP_ADDR": addr(held)},
			[]string{fmt.Sprintf(`^stack: port %d \(HTTP_ADDR\) is in use %s[^)]+\); set HTTP_ADDR=127\.0\.0\.1:\d+ to use another$`, held, regexp.QuoteMeta(holder))}},
		{"metrics address taken", map[string]string{"METRICS_ADDR": fmt.Sprintf(":%d", held)},
			[]string{fmt.Sprintf(`^stack: port %d \(METRICS_ADDR\) is in use %s[^)]+\); set METRICS_ADDR=:\d+ to use another$`, held, regexp.QuoteMeta(holder))}},
		{"vendor simulator address taken", map[string]string{"VENDOR_SIM_ADDR": addr(held)},
			[]string{fmt.Sprintf(`^stack: port %d \(VENDOR_SIM_ADDR\) is in use %s[^)]+\); set VENDOR_SIM_ADDR=127\.0\.0\.1:\d+ to use another$`, held, regexp.QuoteMeta(holder))}},
		{"another checkout's postgres and redis", map[string]string{"STACK_PG_PORT": foreignPG, "STACK_REDIS_PORT": strconv.Itoa(foreignRedis)},
			[]string{
				fmt.Sprintf(`^stack: port %s \(STACK_PG_PORT\) is in use by pid \d+ \(postgres\); set STACK_PG_PORT=\d+ to use another$`, foreignPG),
				fmt.Sprintf(`^stack: port %d \(STACK_REDIS_PORT\) is in use by pid \d+ \(redis-server\); set STACK_REDIS_PORT=\d+ to use another$`, foreignRedis),
			}},
		{"external servers: the stack's ports are not used", map[string]string{"STACK_PG_PORT": foreignPG, "STACK_REDIS_PORT": strconv.Itoa(foreignRedis),
			"DATABASE_URL": "postgres://u@127.0.0.1:1/d", "REDIS_URL": "redis://127.0.0.1:2/0"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"HTTP_ADDR": addr(freePort(t)), "VENDOR_SIM_ADDR": addr(freePort(t)), "STACK_PG_PORT": free(), "STACK_REDIS_PORT": free()}
			for k, v := range tc.env {
				env[k] = v
			}
			var vars []string
			for k, v := range env {
				vars = append(vars, k+"="+v)
			}
			cmd := exec.Command(script, "check-ports")
			cmd.Env = scriptEnv(vars...)
			code, out := exitCode(t, cmd)
			wantCode := 0
			if tc.want != nil {
				wantCode = 1
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if out == "" {
				lines = nil
			}
			if code != wantCode || len(lines) != len(tc.want) {
				t.Fatalf("exit %d, want %d; output:\n%s", code, wantCode, out)
			}
			for i, pat := range tc.want {
				if !regexp.MustCompile(pat).MatchString(lines[i]) {
					t.Errorf("line %d:\n%s\ndoes not match\n%s", i+1, lines[i], pat)
				}
			}
		})
	}
}

// `make run` runs check-ports before stack-up and build: a busy port is
// found before anything is started, built or provisioned.
func TestMakeRun_ChecksPortsFirst(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("make", "-C", "../..", "-pq", "run").Output()
	if err != nil && len(out) == 0 {
		t.Skipf("make -p: %v", err)
	}
	m := regexp.MustCompile(`(?m)^run: (.*)$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no rule for run in make -p")
	}
	if got, want := strings.Fields(string(m[1])), []string{"check-ports", "stack-up", "build"}; !cmp.Equal(got[:min(3, len(got))], want) {
		t.Errorf("prerequisites of run: %v, want %v first", got, want)
	}
}

// The stack a previous `make run` left up (stack.sh up: its own PostgreSQL
// cluster and Redis under .local/) is no conflict for the next run's port
// check; once it is down, its ports are free again.
func TestStackCheckPorts_StackLeftUpByAnEarlierRunIsNoConflict(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("initialises and starts a PostgreSQL cluster; make test-long runs it")
	}
	for _, tool := range []string{"ss", "redis-server", "redis-cli"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	if _, err := findPostgres(); err != nil {
		t.Skip(err)
	}
	script, root := stackCopy(t)
	// As root the cluster belongs to 'postgres', which must reach the
	// checkout to keep it under .local/ (else stack.sh puts it elsewhere).
	for d := root; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := scriptEnv("STACK_PG_PORT="+strconv.Itoa(freePort(t)), "STACK_REDIS_PORT="+strconv.Itoa(freePort(t)),
		"HTTP_ADDR=127.0.0.1:"+strconv.Itoa(freePort(t)), "VENDOR_SIM_ADDR=127.0.0.1:"+strconv.Itoa(freePort(t)))
	run := func(arg string) (int, string) {
		cmd := exec.Command(script, arg)
		cmd.Env = env
		return exitCode(t, cmd)
	}
	t.Cleanup(func() { run("down") })
	if code, out := run("up"); code != 0 {
		t.Fatalf("stack.sh up: exit %d\n%s", code, out)
	}
	if code, out := run("check-ports"); code != 0 || out != "" {
		t.Errorf("check-ports with the stack up: exit %d\n%s", code, out)
	}
	if code, out := run("down"); code != 0 {
		t.Fatalf("stack.sh down: exit %d\n%s", code, out)
	}
	if code, out := run("check-ports"); code != 0 || out != "" {
		t.Errorf("check-ports with the stack down: exit %d\n%s", code, out)
	}
}

// An importctl vendor simulator already serving VENDOR_SIM_ADDR is no
// conflict: demo.sh reuses whatever answers there instead of starting one.
func TestStackCheckPorts_RunningVendorSimulatorIsReused(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ss"); err != nil {
		t.Skip("ss is not installed")
	}
	importctl := buildImportctl(t)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	sim := exec.Command(importctl, "vendor-sim", "--addr", addr, "--file", "../../deploy/local/vendor-instructions.json")
	if err := sim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Process.Kill(); _ = sim.Wait() })
	waitTCP(t, addr)
	script, _ := stackCopy(t)
	cmd := exec.Command(script, "check-ports")
	cmd.Env = scriptEnv("VENDOR_SIM_ADDR="+addr, "HTTP_ADDR=127.0.0.1:"+strconv.Itoa(freePort(t)),
		"STACK_PG_PORT="+strconv.Itoa(freePort(t)), "STACK_REDIS_PORT="+strconv.Itoa(freePort(t)))
	if code, out := exitCode(t, cmd); code != 0 || out != "" {
		t.Errorf("check-ports with importctl vendor-sim at VENDOR_SIM_ADDR: exit %d\n%s", code, out)
	}
}
