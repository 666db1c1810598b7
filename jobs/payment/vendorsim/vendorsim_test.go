package vendorsim

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, method, url string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return res.StatusCode, m
}

func start(t *testing.T, cfg Config) (*Simulator, string) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func TestSimulator_ServesTheProtocol(t *testing.T) {
	t.Parallel()
	_, base := start(t, Config{})
	tests := []struct {
		name, method, path string
		status             int
		reference          string
	}{
		{"a default instruction", "GET", "/payment-instructions/DEMO-CARD-0001", 200, "DEMO-CARD-0001"},
		{"an unknown reference", "GET", "/payment-instructions/NOPE", 404, ""},
		{"another path", "GET", "/other", 404, ""},
		{"a nested path", "GET", "/payment-instructions/DEMO-CARD-0001/x", 404, ""},
		{"no reference", "GET", "/payment-instructions/", 404, ""},
		{"another method", "POST", "/payment-instructions/DEMO-CARD-0001", 405, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, body := get(t, tc.method, base+tc.path)
			if status != tc.status {
				t.Fatalf("status %d, want %d", status, tc.status)
			}
			if tc.reference != "" && (body["reference"] != tc.reference || body["type"] != "CARD" || body["status"] != "ACTIVE" || body["last4"] != "4242") {
				t.Errorf("body %v", body)
			}
		})
	}
}

func TestSimulator_FailFirstCountsPerReference(t *testing.T) {
	t.Parallel()
	s, base := start(t, Config{FailFirst: 2})
	for _, ref := range []string{"DEMO-CARD-0001", "DEMO-DD-0001"} {
		var got []int
		for range 3 {
			status, _ := get(t, "GET", base+"/payment-instructions/"+ref)
			got = append(got, status)
		}
		if got[0] != 503 || got[1] != 503 || got[2] != 200 {
			t.Errorf("%s: statuses %v, want 503, 503, 200", ref, got)
		}
		if s.Requests(ref) != 3 {
			t.Errorf("%s: counted %d requests", ref, s.Requests(ref))
		}
	}
}

func TestSimulator_AlwaysFail(t *testing.T) {
	t.Parallel()
	_, base := start(t, Config{AlwaysFail: true})
	for range 3 {
		if status, _ := get(t, "GET", base+"/payment-instructions/DEMO-CARD-0001"); status != 503 {
			t.Fatalf("status %d, want 503", status)
		}
	}
}

func TestSimulator_DelayOutlastsAShortClientTimeout(t *testing.T) {
	t.Parallel()
	// A delay far longer than the client's timeout, and than the generous
	// bound below: the client gives up at its timeout, not after the delay.
	_, base := start(t, Config{Delay: time.Minute})
	c := &http.Client{Timeout: 50 * time.Millisecond}
	start := time.Now()
	_, err := c.Get(base + "/payment-instructions/DEMO-CARD-0001")
	if err == nil {
		t.Fatal("a slow answer arrived within the client's timeout")
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the client waited %v", d)
	}
}

func TestNew_RefusesBadInstructionFiles(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, data, want string }{
		{"not JSON", `{`, "JSON array"},
		{"an object", `{"reference":"R"}`, "JSON array"},
		{"an element not an object", `[1]`, "instructions[0]"},
		{"missing status", `[{"reference":"R","type":"CARD"}]`, "required"},
		{"empty reference", `[{"reference":"","type":"CARD","status":"A"}]`, "required"},
		{"a reference twice", `[{"reference":"R","type":"CARD","status":"A"},{"reference":"R","type":"CARD","status":"B"}]`, "twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := New(Config{Instructions: []byte(tc.data)}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestServe_StopsWithItsContextEvenWhileAnswersWait(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Delay: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, s) }()
	go func() { _, _ = http.Get("http://" + ln.Addr().String() + "/payment-instructions/DEMO-CARD-0001") }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not stop")
	}
}
