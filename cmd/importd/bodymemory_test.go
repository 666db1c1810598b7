package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/admin"
)

// millionNumbersBusiness is an E1 body of 2 MB whose terms hold a million
// numbers (1,000 arrays of 1,000 zeros), for a supplier that does not
// exist: it is parsed and bound in full, then refused.
func millionNumbersBusiness() []byte {
	row := "[" + strings.Repeat("0,", 999) + "0]"
	terms := "[" + strings.Repeat(row+",", 999) + row + "]"
	return []byte(`{"import_supplier_code":"NOPE","external_business_identifier":"B","business":{"business_contracts":[` +
		`{"valid_from_date":"2024-01-01","identifier":"C","versions":[{"applicable_at_date":"2024-01-01","terms":` + terms + `}]}]}}`)
}

// peakRSS is process pid's peak resident set (VmHWM) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s*(\d+) kB`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// 64 E1 bodies of 2 MB holding a million numbers each, sent at once by one
// key, took importd from 45 to 1,139 MiB of resident memory, growing by 2.1
// times the default BODY_MEMORY (512 MiB), with no memory limit (as `make
// run` had none): the budget charged each body 52 times its size, which roughly
// covered the 92 MB its parse held, but the trees of finished requests
// stayed in the heap as garbage until the collector ran, and it lets the
// heap grow to twice what it finds in use. Bodies are now charged what
// their values cost (validate.ParseMemory), twice, and with no memory
// limit the process grows by less than BODY_MEMORY and what the budget
// does not count, 192 MiB together: the key's bodies being read before
// they are charged (ten at once, its share of the pool) and the rest of
// the heap, both doubled by the collector's slack as well, and the heap's
// overshoot while a collection runs on a loaded machine (it grew by 450 to
// 600 MiB). importd runs as a process of its own, built without
// the race detector, so that its resident memory is its own.
func TestBodyMemory_MillionNumberBodiesStayWithinTheBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds importd and sends 64 bodies of 2 MB; run without -short")
	}
	t.Parallel()
	cfg, err := loadConfig(func(string) string { return "" }, 0)
	if err != nil {
		t.Fatal(err)
	}
	budget := cfg.BodyMemory
	pid, post := startBodyService(t, nil)
	base := rss(pid)
	if code, raw := post(); code != 400 || !strings.Contains(raw, "business_failed_validation") {
		t.Fatalf("one body: %d %.300s", code, raw)
	}
	const n = 64
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, raw := post()
			mu.Lock()
			defer mu.Unlock()
			if codes[code]++; code != 400 && code != 429 && codes[code] == 1 {
				t.Errorf("answer %d: %.300s", code, raw)
			}
		}()
	}
	wg.Wait()
	peak := peakRSS(t, pid)
	t.Logf("%d bodies in %v: %v; resident memory %d MiB before them, %d MiB at the peak (BODY_MEMORY %d MiB)",
		n, time.Since(start).Round(time.Millisecond), codes, base>>20, peak>>20, budget>>20)
	if codes[400] == 0 {
		t.Errorf("no body was parsed: %v", codes)
	}
	if grew := peak - base; grew > budget+192<<20 {
		t.Errorf("resident memory grew by %d MiB, more than BODY_MEMORY (%d MiB) and 192 MiB", grew>>20, budget>>20)
	}
}

// startBodyService starts the built importd api with env added to a
// database, a Redis database and a secret of the test's own, and returns
// its pid and a function that posts millionNumbersBusiness to E1 with a key
// of its own.
func startBodyService(t *testing.T, extra map[string]string) (int, func() (int, string)) {
	t.Helper()
	bin := importdBinary(t)
	dbURL := dbtest.NewDatabase(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	env := map[string]string{
		"DATABASE_URL": dbURL, "REDIS_URL": dbtest.NewRedis(t), "HTTP_ADDR": addr,
		"TOKEN_SECRET": testSecret, "LOG_LEVEL": "error", "DOCUMENTS_URL": "file://" + t.TempDir(),
	}
	for k, v := range extra {
		env[k] = v
	}
	p := startProc(t, t.TempDir(), "importd", bin, []string{"api"}, env)
	t.Cleanup(func() {
		p.signal(syscall.SIGTERM)
		if !p.wait(30 * time.Second) {
			p.signal(syscall.SIGKILL)
			p.wait(10 * time.Second)
		}
	})
	waitTCP(t, addr)
	d, err := db.Open(context.Background(), dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s := &service{base: "http://" + addr, db: d, env: env}
	if _, err := admin.CreateSupplier(context.Background(), s.db, admin.Supplier{Code: "DEMO"}); err != nil {
		t.Fatal(err)
	}
	tok := s.accessToken(t, s.newKey(t, "bodies"))
	body := millionNumbersBusiness()
	client := &http.Client{Timeout: 2 * time.Minute}
	return p.cmd.Process.Pid, func() (int, string) {
		req, _ := http.NewRequest("POST", s.base+"/v1/data-import/business/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Token "+tok)
		res, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(raw)
	}
}

// `make run` gives importd the memory limit that docker-compose.yml gives
// its containers (MEMORY_LIMIT, of which importd sets 90% as the Go
// runtime's limit), so that a local run collects before it grows past it;
// it had none. GOMEMLIMIT, when set, still wins (applyMemoryLimit).
func TestMakeRun_HasComposesMemoryLimit(t *testing.T) {
	t.Parallel()
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	recipe := regexp.MustCompile(`(?m)^run:[^\n]*\n((?:\t[^\n]*\n)+)`).FindSubmatch(makefile)
	if recipe == nil {
		t.Fatal("no recipe for run in the Makefile")
	}
	got := regexp.MustCompile(`(?m)^\texport MEMORY_LIMIT="\$\$\{MEMORY_LIMIT:-(\d+)\}"$`).FindSubmatch(recipe[1])
	compose, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^  MEMORY_LIMIT: \$\{MEMORY_LIMIT:-(\d+)\}$`).FindSubmatch(compose)
	if want == nil {
		t.Fatal("docker-compose.yml: no MEMORY_LIMIT: ${MEMORY_LIMIT:-N} in the importd environment")
	}
	if got == nil {
		t.Fatalf("the run recipe does not export MEMORY_LIMIT=\"$${MEMORY_LIMIT:-N}\":\n%s", recipe[1])
	}
	if diff := cmp.Diff(string(want[1]), string(got[1])); diff != "" {
		t.Errorf("make run's default MEMORY_LIMIT (-compose +Makefile):\n%s", diff)
	}
}
