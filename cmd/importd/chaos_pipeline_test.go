package main

// The whole-pipeline chaos run (chaos_test.go says what it is): the
// cohort, the businesses, the runner and its resumption, the probe, the
// faults, the final checks and the table.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/lib/pq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/payment"
	"github.com/bulkimport/bulkimport/jobs/slots"
)

const (
	// chaosSupplier is the cohort's supplier (the generator's default);
	// probeSupplier the probe's, apart so that the cohort's checks see
	// only the cohort.
	chaosSupplier = "DEMO"
	probeSupplier = "PROBE"
	// fastVendor is the vendor the generated lines name; slowVendor
	// answers after chaosConfig.SlowVendor, and one payment instruction in
	// three and every other business's go to it.
	fastVendor = "DEMO_PAY"
	slowVendor = "SLOW_PAY"
	// The vendor simulators' built-in instructions that E2 asks for.
	businessReference, businessReferenceType = "DEMO-DD-0001", "DIRECT_DEBIT"
)

// chaosBusiness is one business the run creates through E1, and its
// payment instruction through E2.
type chaosBusiness struct {
	ext, contract, vendor string
	// accounts are its valid cohort lines' account numbers, in cohort
	// order: E2 names them once they exist.
	accounts []string
	// id is the service_business_id E1 answered (201, or
	// business_already_exists after a lost 201).
	id int64
	// e1 and e2 are the final answers: "created", "already_exists", "" (not
	// asked: E2 of a business without a valid account) or what ended the
	// tries.
	e1, e2 string
}

// observation is one answer that the test's own clients (the probe, E1
// and E2) got, for the table's "what a user sees".
type observation struct {
	endpoint   string // E1, E2, E4, E5
	start, end time.Time
	answer     string // "201", "500 queue_unavailable", "connection error", ...
}

// pipelineRun is a run in progress: the processes of chaosRun, the
// vendors, the runner and what the test's clients saw.
type pipelineRun struct {
	*chaosRun
	ctl        string
	dir        string // the runner's report directory; the cohort is in it
	cohortPath string
	invalid    []cohort.Expected
	valid      int
	businesses []*chaosBusiness
	http       *http.Client

	// created is the cohort's accounts in the service, polled.
	created atomic.Int64
	// e1Answered counts the businesses whose E1 ended.
	e1Answered atomic.Int64

	obsMu sync.Mutex
	obs   []observation

	runMu sync.Mutex
	// runner is the current `importctl run`; runnerRuns counts the starts,
	// runnerEnded is set once one ended on its own with 0 or 1, and
	// runnerExits holds the other codes of runs that ended on their own.
	runner      *osProc
	runnerRuns  int
	runnerEnded bool
	runnerExits []int

	probeTold map[string]string // probe account -> the service account number it was told
}

// chaosResult is what a run measured.
type chaosResult struct {
	cfg        chaosConfig
	elapsed    time.Duration
	faults     []*fault
	obs        []observation
	runnerRuns int
	logDir     string
	checks     map[string]int // named final checks; every value must be 0 except the counts in chaosCounts
}

// chaosCounts are the rows of the check table that count what the run
// did rather than what went wrong.
var chaosCounts = map[string]bool{"accounts (valid lines)": true, "businesses": true, "business payment instructions": true,
	"probe accounts": true, "archived tasks": true}

// runPipeline runs cfg from the cohort's generation to the final checks
// and returns what it measured; the checks' failures are reported on t.
func runPipeline(t *testing.T, cfg chaosConfig) *chaosResult {
	t.Helper()
	ctl := importctlBinary(t)
	r := &pipelineRun{chaosRun: startChaos(t, cfg), ctl: ctl, dir: t.TempDir(),
		http: &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16,
			DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}}}
	ctx := context.Background()
	if _, err := admin.CreateSupplier(ctx, r.db, admin.Supplier{Code: probeSupplier}); err != nil {
		t.Fatal(err)
	}
	startVendorSim(r.chaosRun, ctl, "vendor-fast", fastVendor, 0)
	startVendorSim(r.chaosRun, ctl, "vendor-slow", slowVendor, cfg.SlowVendor)
	r.writeCohort()
	t.Logf("chaos: %d accounts (%d invalid), %d businesses, runner concurrency %d, %d workers; logs in %s, report in %s",
		cfg.Accounts, len(r.invalid), cfg.Businesses, cfg.Concurrency, cfg.Workers, r.logDir, r.dir)

	start := time.Now()
	deadline := start.Add(cfg.Deadline)
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { defer bg.Done(); r.pollCreated(stop) }()
	probeStop := make(chan struct{})
	probeDone := make(chan struct{})
	go func() { defer close(probeDone); r.probe(probeStop, deadline) }()
	faults := make(chan []*fault, 1)
	go func() { faults <- r.inject(stop) }()

	r.createBusinesses(deadline)
	r.runMu.Lock()
	r.startRunner()
	r.runMu.Unlock()
	e2Done := make(chan struct{})
	go func() { defer close(e2Done); r.createBusinessInstructions(deadline) }()
	r.waitRunner(deadline)
	select {
	case <-e2Done:
	case <-time.After(time.Until(deadline)):
		t.Errorf("the businesses' payment instructions were not all answered by the deadline (%s)", cfg.Deadline)
	}
	close(stop)
	res := &chaosResult{cfg: cfg, faults: <-faults, logDir: r.logDir}
	close(probeStop)
	<-probeDone
	bg.Wait()
	res.elapsed = time.Since(start)
	res.checks = r.finalChecks()
	res.obs = r.observations()
	res.runnerRuns = r.runnerRuns
	return res
}

// startVendorSim starts `importctl vendor-sim` (the built ctl) as the
// process name, answering after delay, and configures it as vendor.
func startVendorSim(r *chaosRun, ctl, name, vendor string, delay time.Duration) *osProc {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(r.t))
	p := startProc(r.t, r.logDir, name, ctl, []string{"vendor-sim", "--addr", addr, "--delay", delay.String()}, nil)
	r.t.Cleanup(func() { p.signal(syscall.SIGKILL); p.wait(10 * time.Second) })
	waitTCP(r.t, addr)
	if _, err := payment.AddVendor(context.Background(), r.db, payment.Vendor{Name: vendor, BaseURL: "http://" + addr}); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// writeCohort generates the cohort with `importctl generate` and gives
// it the run's businesses and slow vendor: the business accounts (one in
// ten) are spread over the run's contracts in cohort order, so that the
// businesses' accounts are complete at moments spread over the run, and
// one payment instruction in three names the slow vendor.
func (r *pipelineRun) writeCohort() {
	t, cfg := r.t, r.cfg
	raw, expect := filepath.Join(r.dir, "generated.ndjson"), filepath.Join(r.dir, "expect.ndjson")
	gen := exec.Command(r.ctl, "generate", "--accounts", strconv.Itoa(cfg.Accounts), "--invalid-rate", fmt.Sprint(cfg.InvalidRate),
		"--seed", fmt.Sprint(cfg.Seed), "--output", raw, "--expect", expect)
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("importctl generate: %v\n%s", err, out)
	}
	r.invalid = readExpected(t, expect)
	r.valid = cfg.Accounts - len(r.invalid)
	bad := map[string]bool{}
	for _, e := range r.invalid {
		bad[e.ExternalAccountNumber] = true
	}
	in, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	var businessLines []int
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber() // amounts stay exactly as generated
	for {
		var line map[string]any
		if err := dec.Decode(&line); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if acc, _ := line["account"].(map[string]any); acc != nil && acc["business"] != nil {
			businessLines = append(businessLines, len(lines))
		}
		lines = append(lines, line)
	}
	for k := range cfg.Businesses {
		vendor := fastVendor
		if k%2 == 1 {
			vendor = slowVendor
		}
		r.businesses = append(r.businesses, &chaosBusiness{ext: fmt.Sprintf("CHAOS-BIZ-%04d", k+1),
			contract: fmt.Sprintf("CHAOS-BC-%04d", k+1), vendor: vendor})
	}
	payments := 0
	for j, i := range businessLines {
		if len(r.businesses) == 0 {
			break
		}
		b := r.businesses[j*len(r.businesses)/len(businessLines)]
		acc := lines[i]["account"].(map[string]any)
		acc["business"] = map[string]any{"business_contract_identifier": b.contract}
		if ean, _ := acc["external_account_number"].(string); !bad[ean] {
			b.accounts = append(b.accounts, ean)
		}
	}
	var out bytes.Buffer
	for _, line := range lines {
		if pi, _ := line["payment_instruction"].(map[string]any); pi != nil {
			if payments%3 == 2 {
				pi["vendor"] = slowVendor
			}
			payments++
		}
		b, err := json.Marshal(line)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
		out.WriteByte('\n')
	}
	r.cohortPath = filepath.Join(r.dir, "cohort.ndjson")
	if err := os.WriteFile(r.cohortPath, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// pollCreated keeps r.created at the number of the cohort's accounts in
// the service (the faults' clock), until stop closes.
func (r *pipelineRun) pollCreated(stop chan struct{}) {
	for {
		var n int64
		// A failed count (PostgreSQL restarting) keeps the last one.
		if err := r.db.Get(&n, `SELECT count(*) FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id WHERE s.code = $1`, chaosSupplier); err == nil {
			r.created.Store(n)
		}
		select {
		case <-stop:
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// post sends one request of the test's own clients and records its
// answer; status is 0 on a connection error.
func (r *pipelineRun) post(endpoint, path string, body any) (int, map[string]any) {
	raw, err := json.Marshal(body)
	if err != nil {
		r.t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", r.apiURL+path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Token "+r.key)
	start := time.Now()
	res, err := r.http.Do(req)
	if err != nil {
		r.observe(observation{endpoint: endpoint, start: start, end: time.Now(), answer: "connection error"})
		return 0, nil
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	var m map[string]any
	_ = json.Unmarshal(out, &m)
	code, _ := m["code"].(string)
	r.observe(observation{endpoint: endpoint, start: start, end: time.Now(), answer: strings.TrimSpace(fmt.Sprintf("%d %s", res.StatusCode, code))})
	return res.StatusCode, m
}

func (r *pipelineRun) observe(o observation) {
	r.obsMu.Lock()
	r.obs = append(r.obs, o)
	r.obsMu.Unlock()
}

func (r *pipelineRun) observations() []observation {
	r.obsMu.Lock()
	defer r.obsMu.Unlock()
	return slices.Clone(r.obs)
}

// clientBackoff is a client's wait before its try n (1-based): 100 ms
// doubling to 3 s, with jitter.
func clientBackoff(n int) time.Duration {
	d := 100 * time.Millisecond << min(n-1, 5)
	d = min(d, 3*time.Second)
	return d/2 + rand.N(d/2+1)
}

// untilAnswered calls try until it reports an answer that ends the tries
// (retried on 500s, 429s and connection errors, as the spec says), or the
// deadline passes.
func untilAnswered(deadline time.Time, try func() (string, bool)) string {
	for n := 1; ; n++ {
		if time.Now().After(deadline) {
			return "deadline"
		}
		if kind, done := try(); done {
			return kind
		}
		time.Sleep(clientBackoff(n))
	}
}

// inParallel runs f(i) for i in [0, n) on k goroutines.
func inParallel(n, k int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// createBusinesses creates every business through E1 from four clients,
// each retried until the service answers for good.
func (r *pipelineRun) createBusinesses(deadline time.Time) {
	inParallel(len(r.businesses), 4, func(i int) {
		b := r.businesses[i]
		body := map[string]any{"import_supplier_code": chaosSupplier, "external_business_identifier": b.ext,
			"business": map[string]any{"business_type": "LTD", "company_number": fmt.Sprintf("C%07d", i+1), "company_name": fmt.Sprintf("Chaos %d Ltd", i+1),
				"details": []any{map[string]any{"key": "sector", "value": "retail"}},
				"business_contracts": []any{map[string]any{"identifier": b.contract, "valid_from_date": "2024-01-01", "signed_at_date": "2023-12-01",
					"versions": []any{map[string]any{"applicable_at_date": "2024-01-01", "terms": []any{map[string]any{"rate": "standard"}}}}}}}}
		b.e1 = untilAnswered(deadline, func() (string, bool) {
			st, m := r.post("E1", "/v1/data-import/business/", body)
			code, _ := m["code"].(string)
			id, _ := m["service_business_id"].(float64)
			switch {
			case st == 201:
				b.id = int64(id)
				return "created", true
			case st == 400 && code == "business_already_exists":
				b.id = int64(id)
				return "already_exists", true
			case st == 400:
				return "400 " + code, true
			}
			return "", false
		})
		r.e1Answered.Add(1)
	})
	for _, b := range r.businesses {
		if b.e1 != "created" && b.e1 != "already_exists" {
			r.t.Fatalf("E1 %s ended with %q: the cohort's accounts of its contract cannot be staged", b.ext, b.e1)
		}
	}
}

// createBusinessInstructions sends each business's E2 once all its valid
// accounts exist, from four clients, each retried until the service
// answers for good.
func (r *pipelineRun) createBusinessInstructions(deadline time.Time) {
	inParallel(len(r.businesses), 4, func(i int) {
		b := r.businesses[i]
		if len(b.accounts) == 0 {
			return
		}
		for {
			var n int
			err := r.db.Get(&n, `SELECT count(*) FROM accounts a JOIN import_suppliers s ON s.id = a.supplier_id
				WHERE s.code = $1 AND a.external_account_number = ANY($2)`, chaosSupplier, pq.Array(b.accounts))
			if err == nil && n == len(b.accounts) {
				break
			}
			if time.Now().After(deadline) {
				b.e2 = "deadline (accounts not imported)"
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		accounts := make([]any, len(b.accounts))
		for j, ean := range b.accounts {
			accounts[j] = map[string]any{"external_account_number": ean}
		}
		body := map[string]any{"import_supplier_code": chaosSupplier, "external_business_identifier": b.ext, "vendor": b.vendor,
			"reference": businessReference, "type": businessReferenceType, "accounts": accounts}
		b.e2 = untilAnswered(deadline, func() (string, bool) {
			st, m := r.post("E2", "/v1/data-import/business-payment-instruction/create/", body)
			code, _ := m["code"].(string)
			switch {
			case st == 201:
				return "created", true
			case st == 400 && code == "payment_instruction_already_exists":
				return "already_exists", true
			case st == 400:
				return "400 " + code, true
			}
			return "", false
		})
	})
}

// probe creates accounts of the probe supplier one after the other (E4,
// then E5 until it is told the account exists) until stop closes, as a
// user who retries would, with a pause between accounts: its answers are
// what a user sees during each fault. The account under way when stop closes is finished.
func (r *pipelineRun) probe(stop chan struct{}, deadline time.Time) {
	var buf bytes.Buffer
	if _, err := cohort.Generate(&buf, cohort.Options{Accounts: 10000, Seed: r.cfg.Seed + 1000, Supplier: probeSupplier,
		NoBusiness: true, NoPayments: true}); err != nil {
		r.t.Error(err)
		return
	}
	r.probeTold = map[string]string{}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		// A pause between accounts: the probe samples what a user sees
		// without adding much load of its own.
		select {
		case <-stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
		var line struct{ Account json.RawMessage }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			r.t.Error(err)
			return
		}
		var acc struct {
			Ext string `json:"external_account_number"`
		}
		_ = json.Unmarshal(line.Account, &acc)
		staged := untilAnswered(deadline, func() (string, bool) {
			st, m := r.post("E4", stagePath, line.Account)
			code, _ := m["code"].(string)
			switch {
			case st == 200 || st == 201 || code == "account_import_in_progress":
				return "staged", true
			case st == 400 && code == "account_import_process_already_imported":
				return "already_imported", true
			case st == 400:
				return "400 " + code, true
			}
			return "", false
		})
		if staged != "staged" && staged != "already_imported" {
			r.t.Errorf("probe %s: E4 ended with %q", acc.Ext, staged)
			continue
		}
		body := map[string]any{"external_account_number": acc.Ext, "import_supplier_code": probeSupplier, "operations_team_name": "Ops"}
		var number string
		told := untilAnswered(deadline, func() (string, bool) {
			st, m := r.post("E5", processPath, body)
			code, _ := m["code"].(string)
			switch {
			case st == 201:
				number = fmt.Sprint(m["service_account_number"])
				return "created", true
			case st == 400 && code == "account_import_process_already_imported":
				number = alreadyImportedNumber(m)
				return "already_imported", true
			case st == 400:
				return "400 " + code, true
			}
			return "", false
		})
		if told != "created" && told != "already_imported" {
			r.t.Errorf("probe %s: E5 ended with %q", acc.Ext, told)
			continue
		}
		r.probeTold[acc.Ext] = number
	}
}

// alreadyImportedNumber is the service account number an
// already_imported answer carries, at the top or in its errors.
func alreadyImportedNumber(m map[string]any) string {
	if n, ok := m["service_account_number"].(string); ok {
		return n
	}
	errs, _ := m["errors"].([]any)
	for _, e := range errs {
		if em, ok := e.(map[string]any); ok {
			if n, ok := em["service_account_number"].(string); ok {
				return n
			}
		}
	}
	return ""
}

// startRunner starts `importctl run` over the cohort, on the run's report
// directory: a run after a killed one goes on where its journal ends.
// r.runMu must be held.
func (r *pipelineRun) startRunner() {
	r.runnerRuns++
	r.runner = startProc(r.t, r.logDir, fmt.Sprintf("runner-%d", r.runnerRuns), r.ctl, []string{"run", r.cohortPath, "--url", r.apiURL,
		"--team", "Ops", "--report", r.dir, "--concurrency", strconv.Itoa(r.cfg.Concurrency), "--progress-every", "10s"},
		map[string]string{"IMPORTCTL_API_KEY": r.key})
	p := r.runner
	r.t.Cleanup(func() { p.signal(syscall.SIGKILL); p.wait(10 * time.Second) })
}

// waitRunner waits until a runner ends on its own with 0 or 1 (a killed
// one has been replaced by inject). One that ends otherwise (2: it lost the
// service) is recorded and started again, as its user would, at most
// three times.
func (r *pipelineRun) waitRunner(deadline time.Time) {
	for {
		r.runMu.Lock()
		p := r.runner
		r.runMu.Unlock()
		select {
		case <-p.done:
		case <-time.After(time.Until(deadline)):
			r.t.Fatalf("the runner did not finish within %s; see %s", r.cfg.Deadline, r.logDir)
		}
		r.runMu.Lock()
		if p != r.runner { // killed by inject, which started the next one
			r.runMu.Unlock()
			continue
		}
		code := p.cmd.ProcessState.ExitCode()
		if code == 0 || code == 1 {
			r.runnerEnded = true
			r.runMu.Unlock()
			return
		}
		r.runnerExits = append(r.runnerExits, code)
		r.t.Errorf("%s exited %d before the end; see %s", p.name, code, filepath.Join(r.logDir, p.name+".log"))
		if len(r.runnerExits) > 3 {
			r.runMu.Unlock()
			r.t.FailNow()
		}
		r.startRunner()
		r.runMu.Unlock()
	}
}

// plannedFault is a fault and the moment it is due.
type plannedFault struct {
	kind string
	due  func() bool
}

// plan is the run's faults in the order they come. The first API kill
// falls while the businesses are created (E1), the others, like every
// other fault, when a random share (5 to 85%) of the cohort's valid lines
// exists, so that every fault falls inside the run whatever its speed;
// runner kills first among them.
func (r *pipelineRun) plan() []plannedFault {
	cfg := r.cfg
	var kinds []string
	for kind, n := range map[string]int{faultWorkerKill: cfg.WorkerKills, faultAPIKill: cfg.APIKills, faultRunnerKill: cfg.RunnerKills,
		faultRedisRestart: cfg.RedisRestarts, faultPostgresRestart: cfg.PostgresRestarts,
		faultRedisClusterFailover: cfg.RedisClusterFailovers, faultRedisMasterKill: cfg.RedisMasterKills, faultRedisMasterKillLag: cfg.RedisMasterKillsLagging,
		faultSentinelFailover: cfg.SentinelFailovers, faultPostgresPromote: cfg.PostgresPromotions} {
		for range n {
			kinds = append(kinds, kind)
		}
	}
	network := networkFaultKinds()
	for i := range cfg.NetworkFaults {
		kinds = append(kinds, network[i%len(network)])
	}
	var out []plannedFault
	if i := slices.Index(kinds, faultAPIKill); i >= 0 && len(r.businesses) > 1 {
		kinds = slices.Delete(kinds, i, i+1)
		half := int64(len(r.businesses) / 2)
		out = append(out, plannedFault{kind: faultAPIKill, due: func() bool { return r.e1Answered.Load() >= half }})
	}
	rand.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	// A runner kill needs the runner running, and the faults handled before
	// it take seconds each (a process killed and started again, Redis
	// restarted): on a fast run they pushed it past the runner's end. Runner
	// kills therefore take the earliest due points; the others stay in
	// random order.
	slices.SortStableFunc(kinds, func(a, b string) int {
		switch {
		case a == faultRunnerKill && b != faultRunnerKill:
			return -1
		case a != faultRunnerKill && b == faultRunnerKill:
			return 1
		}
		return 0
	})
	at := make([]int64, len(kinds))
	for i := range at {
		at[i] = int64(float64(r.valid) * (0.05 + 0.8*rand.Float64()))
	}
	slices.Sort(at)
	for i, kind := range kinds {
		n := at[i]
		out = append(out, plannedFault{kind: kind, due: func() bool { return r.created.Load() >= n }})
	}
	return out
}

// inject runs the plan's faults, each when it is due, and returns them
// with what it measured. It returns when all ran or stop closes.
func (r *pipelineRun) inject(stop chan struct{}) []*fault {
	plan := r.plan()
	var out []*fault
	var settling sync.WaitGroup
	defer settling.Wait()
	for i, pf := range plan {
		for !pf.due() {
			select {
			case <-stop:
				r.t.Errorf("the run ended before fault %d of %d (%s)", i+1, len(plan), pf.kind)
				return out
			case <-time.After(20 * time.Millisecond):
			}
		}
		f := &fault{kind: pf.kind, at: time.Now()}
		switch pf.kind {
		case faultWorkerKill:
			r.mu.Lock()
			w := rand.N(len(r.workers))
			victim := r.workers[w]
			f.orphans = r.activeAccounts(victim.cmd.Process.Pid)
			f.at = time.Now()
			victim.signal(syscall.SIGKILL)
			victim.wait(10 * time.Second)
			r.workers[w] = r.startWorker()
			r.mu.Unlock()
			if len(f.orphans) > 0 {
				settling.Add(1)
				go func() { defer settling.Done(); r.waitSettled(f) }()
			}
		case faultAPIKill:
			r.mu.Lock()
			a := rand.N(len(r.apis)) // behind HAProxy, one replica
			r.apis[a].signal(syscall.SIGKILL)
			r.apis[a].wait(10 * time.Second)
			r.startAPI(a) // the same port: clients (or HAProxy) know one address
			r.mu.Unlock()
		case faultRunnerKill:
			r.runMu.Lock()
			if r.runnerEnded {
				r.runMu.Unlock()
				r.t.Errorf("fault %d of %d (%s) came after the runner ended", i+1, len(plan), pf.kind)
				continue
			}
			r.runner.signal(syscall.SIGKILL)
			r.runner.wait(10 * time.Second)
			r.startRunner() // on the same journal: it resumes
			r.runMu.Unlock()
		case faultRedisRestart:
			r.redis.restart()
		case faultPostgresRestart:
			r.pg.restart()
		case faultRedisClusterFailover:
			r.cluster.failover()
		case faultRedisMasterKill:
			f.at, f.lifted = r.cluster.killMaster(0)
		case faultRedisMasterKillLag:
			f.at, f.lifted = r.cluster.killMaster(replicaLag)
		case faultSentinelFailover:
			f.lifted = r.sentinel.failover()
		case faultPostgresPromote:
			r.pg.promoteStandby(r.standby)
		default:
			r.net.inject(r.t, pf.kind)
		}
		if f.lifted.IsZero() {
			f.lifted = time.Now()
		}
		out = append(out, f)
		// Faults at least a second apart, so that each one's recovery is
		// seen apart from the next one's.
		time.Sleep(time.Second)
	}
	return out
}

// finalChecks waits (within cfg.Settle) for the stragglers, then counts
// what must be zero: the names of the checks are the rows of the table.
func (r *pipelineRun) finalChecks() map[string]int {
	t := r.t
	ctx := context.Background()
	q := func(query string, args ...any) int {
		var n int
		var err error
		for range 20 { // PostgreSQL may be restarting
			if err = r.db.Get(&n, query, args...); err == nil {
				return n
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Errorf("%s: %v", query, err)
		return -1
	}
	// A killed worker's tasks stay in Asynq's active set until their
	// lease expires and the recoverer (every minute) retries or archives
	// them; the archive is only checked once that happened.
	settleBy := time.Now().Add(r.cfg.Settle)
	for time.Now().Before(settleBy) {
		if q(`SELECT count(*) FROM import_processes WHERE status = 'IN_PROGRESS'`) == 0 && r.unfinishedTasks() == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	c := map[string]int{}
	// The cohort against the service, as the soak checks it.
	arrival := checkCohortArrived(t, ctx, r.db, chaosSupplier, r.cohortPath, r.invalid, r.dir, r.ctl, r.apiURL, r.key)
	c["accounts that differ from their line, missing or doubled"] = arrival.Differ
	c["failure report rows other than the invalid lines"] = arrival.ReportRows
	c["importctl reconcile found a difference"] = arrival.Reconcile
	c["accounts (valid lines)"] = r.valid
	if code := r.runner.cmd.ProcessState.ExitCode(); (code == 1) != (len(r.invalid) > 0) || code > 1 {
		c["runner's last exit code wrong"] = 1
		t.Errorf("importctl run exited %d with %d invalid lines", code, len(r.invalid))
	} else {
		c["runner's last exit code wrong"] = 0
	}
	c["runner runs that gave up (exit 2)"] = len(r.runnerExits)

	// The stores: nothing doubled, half-written, orphaned or stuck.
	c["duplicates"] = q(`SELECT count(*) - count(DISTINCT (supplier_id, external_account_number)) FROM accounts`)
	c["lost (staged, no account)"] = q(`SELECT count(*) FROM import_processes p WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.import_process_id = p.id)`)
	c["processes IN_PROGRESS"] = q(`SELECT count(*) FROM import_processes WHERE status = 'IN_PROGRESS'`)
	c["COMPLETED without an account"] = q(`SELECT count(*) FROM import_processes p WHERE status = 'COMPLETED' AND NOT EXISTS (SELECT 1 FROM accounts a WHERE a.import_process_id = p.id AND a.service_account_number = p.service_account_number)`)
	c["accounts whose process is not COMPLETED"] = q(`SELECT count(*) FROM accounts a JOIN import_processes p ON p.id = a.import_process_id WHERE p.status <> 'COMPLETED'`)
	c["half-written accounts (no ledger or customer)"] = q(`SELECT count(*) FROM accounts a WHERE NOT EXISTS (SELECT 1 FROM ledgers l WHERE l.account_id = a.id) OR NOT EXISTS (SELECT 1 FROM customers cu WHERE cu.account_id = a.id)`)
	c["orphan child rows"] = q(`SELECT (SELECT count(*) FROM customers x WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = x.account_id))
		+ (SELECT count(*) FROM supply_points x WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = x.account_id))
		+ (SELECT count(*) FROM meters x WHERE NOT EXISTS (SELECT 1 FROM supply_points s WHERE s.id = x.supply_point_id))
		+ (SELECT count(*) FROM registers x WHERE NOT EXISTS (SELECT 1 FROM meters m WHERE m.id = x.meter_id))
		+ (SELECT count(*) FROM notes x WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = x.account_id))
		+ (SELECT count(*) FROM email_outbox x WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = x.account_id))`)
	r.checkSlots(c)
	c["tasks left active, pending or to retry"] = r.unfinishedTasks()
	r.checkArchived(c)
	r.checkBusinesses(c)
	r.checkProbe(c)
	for name, n := range c {
		if !chaosCounts[name] && n != 0 {
			t.Errorf("%s: %d, want 0", name, n)
		}
	}
	return c
}

// unfinishedTasks counts the account and vendor tasks that Asynq holds
// as active, pending or to retry.
func (r *pipelineRun) unfinishedTasks() int {
	n := 0
	for _, queue := range []string{jobs.QueueAccounts, jobs.QueueVendors} {
		for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){r.insp.ListActiveTasks, r.insp.ListPendingTasks, r.insp.ListRetryTasks} {
			tasks, err := list(queue)
			if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
				r.t.Logf("list tasks of %s: %v", queue, err)
				n++
			}
			n += len(tasks)
		}
	}
	return n
}

// checkSlots counts the E5 concurrency slots still held. With
// PROCESS_CONCURRENCY_LIMIT set, every slot is freed when its task ends,
// or, when the release was lost with a killed process, by a worker's sweep
// slots.Grace after the slot was last taken (slots.Reclaim); one left
// over is capacity lost until it expires. Every slot was taken before now,
// and workers sweep every 5 s.
func (r *pipelineRun) checkSlots(c map[string]int) {
	rc := r.redisOpt().MakeRedisClient().(redis.UniversalClient)
	defer rc.Close()
	reclaimBy := time.Now().Add(slots.Grace + 15*time.Second)
	for {
		n, err := rc.ZCount(context.Background(), slots.Key, fmt.Sprint(time.Now().UnixMilli()), "+inf").Result()
		if err != nil {
			r.t.Errorf("count concurrency slots: %v", err)
			return
		}
		c["concurrency slots still held"] = int(n)
		if n == 0 || time.Now().After(reclaimBy) {
			return
		}
		time.Sleep(time.Second)
	}
}

// checkArchived counts Asynq's archived tasks (those it gave up on), and
// of them those whose outcome succeeded all the same: an account that
// exists, an instruction that is stored. Such a task shows on the
// dashboard as a failure that did not happen.
func (r *pipelineRun) checkArchived(c map[string]int) {
	t := r.t
	c["archived tasks"] = 0
	c["archived tasks whose outcome succeeded"] = 0
	for _, queue := range []string{jobs.QueueAccounts, jobs.QueueVendors} {
		for page := 1; ; page++ {
			tasks, err := r.insp.ListArchivedTasks(queue, asynq.Page(page), asynq.PageSize(500))
			if errors.Is(err, asynq.ErrQueueNotFound) {
				break
			}
			if err != nil {
				t.Errorf("list archived tasks of %s: %v", queue, err)
				break
			}
			for _, task := range tasks {
				c["archived tasks"]++
				var n int
				var err error
				switch task.Type {
				case jobs.TypeAccountProcess:
					var p jobs.AccountProcessPayload
					if err = json.Unmarshal(task.Payload, &p); err == nil {
						err = r.db.Get(&n, `SELECT count(*) FROM accounts WHERE import_process_id = $1`, p.ProcessID)
					}
				case jobs.TypePaymentInstructionVerify:
					var p jobs.PaymentInstructionVerifyPayload
					if err = json.Unmarshal(task.Payload, &p); err == nil {
						err = r.db.Get(&n, `SELECT count(*) FROM payment_instructions WHERE reference = $1
							AND (account_id = $2 OR business_id = $3)`, p.Reference, p.AccountID, p.BusinessID)
					}
				}
				if err != nil {
					t.Errorf("archived task %s: %v", task.ID, err)
				}
				if n > 0 {
					c["archived tasks whose outcome succeeded"]++
					t.Errorf("archived %s task %s (%s) succeeded all the same: %s", task.Type, task.ID, task.LastErr, task.Payload)
				}
			}
			if len(tasks) < 500 {
				break
			}
		}
	}
}

// checkBusinesses holds the businesses and their instructions against
// what E1 and E2 answered: each business once with its contract, each
// business with an imported account one instruction for exactly those
// accounts, no other.
func (r *pipelineRun) checkBusinesses(c map[string]int) {
	t := r.t
	type row struct {
		Ext          string         `db:"external_business_identifier"`
		ID           int64          `db:"id"`
		Contracts    int            `db:"contracts"`
		Instructions int            `db:"instructions"`
		Accounts     pq.StringArray `db:"accounts"`
	}
	var rows []row
	if err := r.db.Select(&rows, `SELECT b.external_business_identifier, b.id,
			(SELECT count(*) FROM business_contracts bc WHERE bc.business_id = b.id) AS contracts,
			(SELECT count(*) FROM payment_instructions pi WHERE pi.business_id = b.id) AS instructions,
			ARRAY(SELECT a.external_account_number FROM payment_instructions pi
				JOIN payment_instruction_accounts pa ON pa.instruction_id = pi.id JOIN accounts a ON a.id = pa.account_id
				WHERE pi.business_id = b.id ORDER BY pa.position) AS accounts
		FROM businesses b JOIN import_suppliers s ON s.id = b.supplier_id
		WHERE s.code = $1 AND b.external_business_identifier LIKE 'CHAOS-BIZ-%'`, chaosSupplier); err != nil {
		t.Errorf("read businesses: %v", err)
		c["businesses differ from what E1 and E2 answered"] = -1
		return
	}
	byExt := map[string][]row{}
	for _, rw := range rows {
		byExt[rw.Ext] = append(byExt[rw.Ext], rw)
	}
	bad := 0
	instructions := 0
	for _, b := range r.businesses {
		got := byExt[b.ext]
		delete(byExt, b.ext)
		if len(got) != 1 {
			bad++
			t.Errorf("business %s: %d in the service, want 1", b.ext, len(got))
			continue
		}
		g := got[0]
		if g.ID != b.id || g.Contracts != 1 {
			bad++
			t.Errorf("business %s: id %d with %d contracts, E1 answered %d (%s)", b.ext, g.ID, g.Contracts, b.id, b.e1)
		}
		wantInstr, told := 0, b.e2 == "created" || b.e2 == "already_exists"
		if len(b.accounts) > 0 {
			wantInstr = 1
			if !told {
				bad++
				t.Errorf("business %s: E2 ended with %q", b.ext, b.e2)
			}
		}
		instructions += g.Instructions
		if g.Instructions != wantInstr || (wantInstr == 1 && !slices.Equal([]string(g.Accounts), b.accounts)) {
			bad++
			t.Errorf("business %s: %d instructions for accounts %v, want %d for %v", b.ext, g.Instructions, g.Accounts, wantInstr, b.accounts)
		}
	}
	for ext := range byExt {
		bad++
		t.Errorf("business %s: no client asked for it", ext)
	}
	c["businesses"] = len(r.businesses)
	c["business payment instructions"] = instructions
	c["businesses differ from what E1 and E2 answered"] = bad
}

// checkProbe holds the probe's accounts against what it was told.
func (r *pipelineRun) checkProbe(c map[string]int) {
	type row struct {
		Ext    string `db:"external_account_number"`
		Number string `db:"service_account_number"`
	}
	var rows []row
	if err := r.db.Select(&rows, `SELECT a.external_account_number, a.service_account_number FROM accounts a
		JOIN import_suppliers s ON s.id = a.supplier_id WHERE s.code = $1`, probeSupplier); err != nil {
		r.t.Errorf("read probe accounts: %v", err)
		return
	}
	inDB := map[string]string{}
	for _, rw := range rows {
		inDB[rw.Ext] = rw.Number
	}
	bad := 0
	for ext, number := range r.probeTold {
		if inDB[ext] != number {
			bad++
			r.t.Errorf("probe %s: told %q, the service has %q", ext, number, inDB[ext])
		}
		delete(inDB, ext)
	}
	// The account under way when the probe stopped without an answer (it
	// ran out of time) is reported by probe itself; any other is extra.
	bad += len(inDB)
	for ext := range inDB {
		r.t.Errorf("probe %s: in the service, but the probe was not told so", ext)
	}
	c["probe accounts"] = len(r.probeTold)
	c["probe answers the service contradicts"] = bad
}

// faultWindow is what the test's clients saw from a fault on: every
// answer to a request sent from the fault until the first E5 201 of a
// request sent after it, and how long that first success took.
func faultWindow(f *fault, obs []observation) (answers map[string]int, recovery time.Duration, recovered bool) {
	answers = map[string]int{}
	var until time.Time
	for _, o := range obs {
		if o.endpoint == "E5" && o.answer == "201" && !o.start.Before(f.at) && (until.IsZero() || o.end.Before(until)) {
			until = o.end
		}
	}
	if until.IsZero() {
		until = f.at.Add(time.Minute)
	} else {
		recovery, recovered = until.Sub(f.at), true
	}
	for _, o := range obs {
		if !o.start.Before(f.at) && o.start.Before(until) {
			answers[o.endpoint+" "+o.answer]++
		}
	}
	return answers, recovery, recovered
}

// table prints what the run measured.
func (res *chaosResult) table() string {
	var b strings.Builder
	cfg := res.cfg
	fmt.Fprintf(&b, "chaos run: %d accounts, %d businesses, runner concurrency %d, %d workers, %d runner runs, %s (logs: %s)\n",
		cfg.Accounts, cfg.Businesses, cfg.Concurrency, cfg.Workers, res.runnerRuns, res.elapsed.Round(time.Second), res.logDir)
	fmt.Fprintf(&b, "%-60s %s\n", "check", "value")
	names := make([]string, 0, len(res.checks))
	for n := range res.checks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "%-60s %d\n", n, res.checks[n])
	}
	// The column is as wide as the longest kind that came.
	width := 28
	for _, f := range res.faults {
		width = max(width, len(f.kind))
	}
	fmt.Fprintf(&b, "\n%-*s %5s %26s %24s  %s\n", width, "fault", "count", "first E5 201 (min/med/max)", "orphans; settled (max)", "answers the test's clients got from the fault to that 201")
	for _, kind := range faultKinds() {
		var rec []time.Duration
		var orphans, n, never, unsettled int
		var settle time.Duration
		answers := map[string]int{}
		for _, f := range res.faults {
			if f.kind != kind {
				continue
			}
			n++
			a, d, ok := faultWindow(f, res.obs)
			if ok {
				rec = append(rec, d)
			} else {
				never++
			}
			for k, v := range a {
				answers[k] += v
			}
			orphans += len(f.orphans)
			if len(f.orphans) > 0 {
				if f.settled.IsZero() {
					unsettled++
				} else {
					settle = max(settle, f.settled.Sub(f.at))
				}
			}
		}
		if n == 0 {
			continue
		}
		slices.Sort(rec)
		nx := "-"
		if len(rec) > 0 {
			nx = fmt.Sprintf("%v / %v / %v", rec[0].Round(10*time.Millisecond), rec[len(rec)/2].Round(10*time.Millisecond), rec[len(rec)-1].Round(10*time.Millisecond))
		}
		if never > 0 {
			nx += fmt.Sprintf(" (%d: none in 1m)", never)
		}
		orph := "-"
		if kind == faultWorkerKill {
			orph = fmt.Sprintf("%d; %v", orphans, settle.Round(100*time.Millisecond))
			if unsettled > 0 {
				orph += fmt.Sprintf(" (%d never settled)", unsettled)
			}
		}
		keys := make([]string, 0, len(answers))
		for k := range answers {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var seen []string
		for _, k := range keys {
			seen = append(seen, fmt.Sprintf("%s x%d", k, answers[k]))
		}
		fmt.Fprintf(&b, "%-*s %5d %26s %24s  %s\n", width, kind, n, nx, orph, strings.Join(seen, ", "))
	}
	all := map[string]int{}
	for _, o := range res.obs {
		all[o.endpoint+" "+o.answer]++
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(&b, "\nanswers the test's clients got over the run (E1, E2, and the probe's E4 and E5):\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-60s %d\n", k, all[k])
	}
	b.WriteString(logSummary(res.logDir))
	return b.String()
}
