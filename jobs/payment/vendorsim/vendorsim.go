// Package vendorsim is a payment vendor simulator: a real HTTP server that
// speaks the vendor protocol of jobs/payment/PROTOCOL.md from a small JSON
// file of instructions. Switches make it fail intermittently or answer
// slowly, so that the service's retries and timeouts can be seen working.
// `importctl vendor-sim` runs it; tests start it on 127.0.0.1.
package vendorsim

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultInstructions is served when no file is given: the demo's
// instructions (deploy/local/vendor-instructions.json holds the same).
//
//go:embed default.json
var DefaultInstructions []byte

// Config is how the simulator behaves.
type Config struct {
	// Instructions is the JSON array of instructions to serve. Each is an
	// object with at least the strings reference, type and status; the
	// whole object is the answer. Nil means DefaultInstructions.
	Instructions []byte
	// FailFirst makes the first FailFirst requests for each reference
	// answer 503, after which they are answered normally.
	FailFirst int
	// AlwaysFail makes every request answer 503.
	AlwaysFail bool
	// Delay is how long each answer waits (a request that gives up first
	// gets nothing).
	Delay time.Duration
}

// Simulator is the protocol's HTTP handler.
type Simulator struct {
	cfg          Config
	instructions map[string]json.RawMessage
	mu           sync.Mutex
	requests     map[string]int // per reference
}

// New parses cfg.Instructions and returns the simulator. Errors name the
// problem with the file's content.
func New(cfg Config) (*Simulator, error) {
	data := cfg.Instructions
	if data == nil {
		data = DefaultInstructions
	}
	var list []json.RawMessage
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("instructions: must be a JSON array of objects: %w", err)
	}
	s := &Simulator{cfg: cfg, instructions: map[string]json.RawMessage{}, requests: map[string]int{}}
	for i, raw := range list {
		var in struct {
			Reference, Type, Status *string
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, fmt.Errorf("instructions[%d]: must be an object with string fields reference, type and status", i)
		}
		if in.Reference == nil || in.Type == nil || in.Status == nil || *in.Reference == "" {
			return nil, fmt.Errorf("instructions[%d]: reference, type and status are required strings", i)
		}
		if _, dup := s.instructions[*in.Reference]; dup {
			return nil, fmt.Errorf("instructions[%d]: reference %q appears twice", i, *in.Reference)
		}
		s.instructions[*in.Reference] = raw
	}
	if cfg.FailFirst < 0 || cfg.Delay < 0 {
		return nil, errors.New("fail-first and delay must not be negative")
	}
	return s, nil
}

// LoadFile reads an instructions file for Config.Instructions.
func LoadFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("instructions file: %w", err)
	}
	return b, nil
}

// Requests returns how many requests came for reference.
func (s *Simulator) Requests(reference string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[reference]
}

const prefix = "/payment-instructions/"

// ServeHTTP answers GET /payment-instructions/{reference}.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	if !strings.HasPrefix(path, prefix) || strings.Contains(path[len(prefix):], "/") || path == prefix {
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "No such endpoint."})
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Only GET is served."})
		return
	}
	reference := strings.TrimPrefix(r.URL.Path, prefix) // unescaped
	s.mu.Lock()
	s.requests[reference]++
	n := s.requests[reference]
	s.mu.Unlock()

	if s.cfg.Delay > 0 {
		t := time.NewTimer(s.cfg.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if s.cfg.AlwaysFail || n <= s.cfg.FailFirst {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"detail": "Simulated intermittent failure."})
		return
	}
	raw, ok := s.instructions[reference]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "No payment instruction with this reference."})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(raw)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Serve runs the simulator on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, s *Simulator) error {
	// Requests live in ctx, so that a slow answer ends with the server.
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
		return nil
	}
}
