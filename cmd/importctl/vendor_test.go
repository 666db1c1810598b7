package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestVendorCommands(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	c.ok("vendor", "add", "DEMO_PAY", "--url", "http://127.0.0.1:18090/")
	c.ok("vendor", "add", "FAST", "--url", "https://pay.example/api", "--timeout", "750ms", "--attempts", "5", "--backoff", "50ms")
	c.fails("already exists", "vendor", "add", "FAST", "--url", "https://other.example")
	c.fails("url", "vendor", "add", "NOURL")
	c.fails("https://", "vendor", "add", "BADURL", "--url", "ftp://pay.example")
	c.fails("loopback", "vendor", "add", "PLAIN", "--url", "http://pay.example")
	c.fails("letters, digits", "vendor", "add", "bad name", "--url", "https://x")
	c.fails("between 1 and 10", "vendor", "add", "MANY", "--url", "https://x", "--attempts", "11")
	c.fails("between 1ms", "vendor", "add", "SLOW", "--url", "https://x", "--timeout", "10m")
	c.fails("is not one of", "vendor", "add", "SOAP", "--url", "https://x", "--adapter", "soap")

	got := c.jsonList("vendor", "list")
	for _, v := range got {
		delete(v, "created_at")
	}
	want := []map[string]any{
		{"name": "DEMO_PAY", "adapter": "http", "base_url": "http://127.0.0.1:18090", "timeout": "5s", "attempts": float64(3), "backoff": "200ms"},
		{"name": "FAST", "adapter": "http", "base_url": "https://pay.example/api", "timeout": "750ms", "attempts": float64(5), "backoff": "50ms"},
	}
	if b1, b2 := mustJSON(t, want), mustJSON(t, got); b1 != b2 {
		t.Errorf("vendor list --json:\n got %s\nwant %s", b2, b1)
	}
	table := c.ok("vendor", "list")
	if !strings.Contains(table, "NAME") || !strings.Contains(table, "FAST") || !strings.Contains(table, "750ms") {
		t.Errorf("vendor list:\n%s", table)
	}
}

func TestVendorList_EmptyIsAnEmptyArray(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	if out := strings.TrimSpace(c.ok("vendor", "list", "--json")); out != "[]" {
		t.Errorf("vendor list --json = %q", out)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// startSim runs `importctl vendor-sim --addr 127.0.0.1:0 args...` and
// returns its base URL once it listens. It stops when the test ends.
func startSim(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		var errb strings.Builder
		code := run(ctx, append([]string{"vendor-sim", "--addr", "127.0.0.1:0"}, args...), func(string) string { return "" }, pw, &errb)
		pw.CloseWithError(io.EOF)
		if code != 0 {
			t.Logf("vendor-sim: %s", errb.String())
		}
		done <- code
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("vendor-sim exited %d after its context ended", code)
			}
		case <-time.After(30 * time.Second):
			t.Error("vendor-sim did not stop")
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("vendor-sim printed no address: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	const prefix = "vendor simulator listening on "
	if !strings.HasPrefix(line, prefix) {
		t.Fatalf("vendor-sim printed %q", line)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, prefix))
}

func status(t *testing.T, url string) int {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func TestVendorSim_ServesTheProtocolWithItsSwitches(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "instructions.json")
	if err := os.WriteFile(file, []byte(`[{"reference":"R/1","type":"CARD","status":"ACTIVE","last4":"1111"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		ref  string
		want []int
	}{
		{"built-in demo instructions", nil, "DEMO-CARD-0001", []int{200, 200}},
		{"a file", []string{"--file", file}, "R%2F1", []int{200}},
		{"a reference not in the file", []string{"--file", file}, "DEMO-CARD-0001", []int{404}},
		{"fail first two", []string{"--fail-first", "2"}, "DEMO-DD-0001", []int{503, 503, 200}},
		{"always fail", []string{"--always-fail"}, "DEMO-DD-0001", []int{503, 503, 503}},
		{"delay", []string{"--delay", "30ms"}, "DEMO-CARD-0002", []int{200}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := startSim(t, tc.args...)
			for i, want := range tc.want {
				start := time.Now()
				if got := status(t, base+"/payment-instructions/"+tc.ref); got != want {
					t.Errorf("request %d: status %d, want %d", i+1, got, want)
				}
				if tc.name == "delay" && time.Since(start) < 30*time.Millisecond {
					t.Errorf("answered after %v, before the delay", time.Since(start))
				}
			}
		})
	}
}

func TestVendorSim_RefusesBadFilesAndAddresses(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"reference":"R"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &ctl{t: t, env: map[string]string{}}
	c.fails("required", "vendor-sim", "--addr", "127.0.0.1:0", "--file", bad)
	c.fails("instructions file", "vendor-sim", "--addr", "127.0.0.1:0", "--file", filepath.Join(t.TempDir(), "missing.json"))
	c.fails("--addr", "vendor-sim", "--addr", "not-an-address")
}

// make run starts the simulator with --exit-with-pid so that it stops with
// the service; a process that has ended stops it.
func TestVendorSim_ExitsWithTheWatchedProcess(t *testing.T) {
	t.Parallel()
	sleeper := exec.Command("sleep", "0.3")
	if err := sleeper.Start(); err != nil {
		t.Skipf("no sleep(1): %v", err)
	}
	go func() { _ = sleeper.Wait() }()
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"vendor-sim", "--addr", "127.0.0.1:0", "--exit-with-pid", strconv.Itoa(sleeper.Process.Pid)},
			func(string) string { return "" }, io.Discard, io.Discard)
	}()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("vendor-sim outlived the process it watched")
	}
}
