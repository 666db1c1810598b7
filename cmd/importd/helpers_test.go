package main

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// liveness bounds how long a test waits for something that takes seconds
// on a quiet machine (a service starting, with its migrations; a worker
// finishing a few accounts): generous, because the machines that run the
// tests are small and shared, and a load average of 8 once made a 20 s
// bound miss a service that did start.
const liveness = 90 * time.Second

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitTCP(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not open", addr)
}

// TestMain removes the binaries that importdBinary and importctlBinary
// built for the chaos and soak runs (tens of MB each) once the tests end.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, bin := range []string{builtBin, ctlBin} {
		if bin != "" {
			os.RemoveAll(filepath.Dir(bin))
		}
	}
	os.Exit(code)
}
