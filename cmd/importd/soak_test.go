package main

// The soak harness (docs/performance.md, "Soak"): a generated cohort driven
// by the built `importctl run` through one `importd api` and two `importd
// worker` processes, with the payment vendor simulator as a process of its
// own, on a PostgreSQL cluster and a Redis of the run's own (the chaos
// harness's process management, chaos_test.go). Each time a tenth of the
// cohort's valid accounts exists it samples what grows with size: the
// slice's throughput and E5 latency, every process's RSS, Redis memory and
// keys, the database's size, WAL, autovacuum and dead tuples, and how long
// a progress summary and a full E13 list take. At the end it checks the
// database against the cohort and the runner's failure report against the
// generator's list of invalid lines.
//
// TestSoak_SmallCohortKeepsEverything is the small variant that `make
// test-long` runs, so that this code cannot rot; soak_full_test.go (build
// tag soak, `make soak`) is the full one.

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
	"github.com/bulkimport/bulkimport/cmd/importctl/migrate"
	"github.com/bulkimport/bulkimport/jobs"
)

// soakConfig is one soak run.
type soakConfig struct {
	Accounts    int
	InvalidRate float64
	Seed        uint64
	// Concurrency is the runner's --concurrency.
	Concurrency int
	// ReportDir receives cohort.ndjson, expect.ndjson, the runner's report
	// and soak.csv; "" is a temporary directory.
	ReportDir string
	// Deadline bounds the whole run.
	Deadline time.Duration
	// AssertTargets fails the test on a missed target; otherwise the
	// targets are only printed.
	AssertTargets bool
}

// soakSlices is the number of samples: one per tenth of the valid accounts.
const soakSlices = 10

// soakMonitoring is the MONITORING_USER login of the run's API, for the
// progress page's summary.json.
// The monitoring login of the soak's service: the password must pass
// importd's entropy check.
const soakMonitoringUser, soakMonitoringPassword = "soak", "d6c1e0a77b5f42a9b1c3e8f09a2d4b67"

// relSize is one table (with its TOAST and indexes) or index and its size.
type relSize struct {
	Name  string `db:"name"`
	Kind  string `db:"kind"`
	Bytes int64  `db:"bytes"`
}

// soakSample is what the run measured when a tenth more of the cohort
// existed; the rates and latencies are over the slice since the sample
// before.
type soakSample struct {
	Slice    int
	Elapsed  time.Duration
	Accounts int
	Rate     float64 // accounts created per second over the slice
	E5Count  int
	E5P50    float64 // seconds
	E5P99    float64
	// RSS is each process's resident set in bytes, by name: api,
	// worker-1, worker-2, vendor-sim, runner, redis.
	RSS map[string]int64
	// CPU is the CPU time in seconds used so far by importd (the API and
	// the workers), postgres (the run's cluster), redis and the runner;
	// CPUPerAccount is its difference over the slice per account created,
	// in milliseconds.
	CPU, CPUPerAccount map[string]float64
	// Redis INFO memory's used_memory and DBSIZE.
	RedisUsed, RedisKeys int64
	DBSize               int64
	WAL                  int64 // bytes written over the slice
	Autovacuums          int64 // runs so far, every table
	DeadTuples           int64 // every table
	DeadTop              string
	IndexBytes           int64 // every index of the schema
	// Connections: PostgreSQL's backends on the run's database and the
	// sessions it opened over the slice (pg_stat_database), Redis's
	// clients and the connections it accepted over the slice (INFO).
	PGBackends, PGNewSessions, RedisClients, RedisNewConns int64
	// APIGoroutines is the API's go_goroutines.
	APIGoroutines int
	Relations     []relSize
	SummaryTime   time.Duration
	E13Time       time.Duration
	E13Rows       int

	// For the next sample's differences.
	at         time.Time
	walLSN     string
	e5         *dto.Histogram
	pgSessions int64 // opened so far
	redisConns int64 // accepted so far
}

// soakRun is a run in progress: the chaos harness's processes, the vendor
// simulator and the runner.
type soakRun struct {
	*chaosRun
	cfg       soakConfig
	dir       string
	importctl string
	vendor    *osProc
	runner    *osProc
	// runnerStarted is the origin of the samples' Elapsed.
	runnerStarted time.Time
	rc            *redis.Client
	http          *http.Client
}

var (
	ctlOnce  sync.Once
	ctlBin   string
	ctlError error
)

// importctlBinary builds the importctl command once per test binary, as
// importdBinary builds importd: without the race detector, since the soak
// measures the binaries a user runs.
func importctlBinary(t testing.TB) string {
	t.Helper()
	ctlOnce.Do(func() {
		dir, err := os.MkdirTemp("", "importctl-bin-")
		if err != nil {
			ctlError = err
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			ctlError = err
			return
		}
		ctlBin = filepath.Join(dir, "importctl")
		out, err := exec.Command(goBin, "build", "-o", ctlBin, "../importctl").CombinedOutput()
		if err != nil {
			ctlError = fmt.Errorf("go build importctl: %v\n%s", err, out)
		}
	})
	if ctlError != nil {
		t.Fatal(ctlError)
	}
	return ctlBin
}

// runSoak runs cfg from the cohort's generation to the final checks, and
// returns the samples.
func runSoak(t *testing.T, cfg soakConfig) []soakSample {
	t.Helper()
	dir := cfg.ReportDir
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A report directory used before holds a journal that would make the
	// runner skip everything: the run starts from nothing.
	for _, f := range []string{migrate.JournalFile, migrate.FailuresCSV, migrate.FailuresNDJSON, "soak.csv", "soak-relations.csv", "soak.html"} {
		os.Remove(filepath.Join(dir, f))
	}
	ctl := importctlBinary(t)
	cohortPath, expectPath := filepath.Join(dir, "cohort.ndjson"), filepath.Join(dir, "expect.ndjson")
	gen := exec.Command(ctl, "generate", "--accounts", strconv.Itoa(cfg.Accounts), "--invalid-rate", fmt.Sprint(cfg.InvalidRate),
		"--seed", fmt.Sprint(cfg.Seed), "--output", cohortPath, "--expect", expectPath)
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("importctl generate: %v\n%s", err, out)
	}
	invalid := readExpected(t, expectPath)
	valid := cfg.Accounts - len(invalid)
	if valid <= 0 {
		t.Fatalf("the cohort has no valid line (%d invalid of %d)", len(invalid), cfg.Accounts)
	}

	r := &soakRun{cfg: cfg, dir: dir, importctl: ctl, http: &http.Client{Timeout: 10 * time.Minute}}
	r.chaosRun = startChaos(t, chaosConfig{Workers: 2, OwnPostgres: true, Env: map[string]string{
		"MONITORING_USER": soakMonitoringUser, "MONITORING_PASSWORD": soakMonitoringPassword,
		// startChaos shortens E5's wait for its faults; a soak runs with
		// the default.
		"PROCESS_WAIT_TIMEOUT": "30s",
	}})
	r.rc = redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.redis.port)})
	t.Cleanup(func() { r.rc.Close() })
	r.startVendor()
	t.Logf("soak: %d accounts (%d invalid), runner concurrency %d; report in %s, service logs in %s",
		cfg.Accounts, len(invalid), cfg.Concurrency, dir, r.logDir)
	// The run's own cluster keeps PostgreSQL's defaults, as users run it.
	t.Log("soak: database durable (synchronous_commit=on, PostgreSQL's default)")

	ctx := context.Background()
	before := r.sample(ctx, 0, nil)
	r.runnerStarted = time.Now()
	r.runner = startProc(t, r.logDir, "runner", ctl, []string{"run", cohortPath, "--url", r.apiURL, "--team", "Ops",
		"--report", dir, "--concurrency", strconv.Itoa(cfg.Concurrency), "--progress-every", "30s"},
		map[string]string{"IMPORTCTL_API_KEY": r.key})
	// A run that fails before the runner ends does not leave it retrying
	// against a service that is gone.
	t.Cleanup(func() { r.runner.signal(syscall.SIGKILL); r.runner.wait(10 * time.Second) })
	deadline := time.Now().Add(cfg.Deadline)
	var samples []soakSample
	prev := before
	for k := 1; k <= soakSlices; k++ {
		target := (k*valid + soakSlices - 1) / soakSlices
		for n := r.accounts(ctx); n < target; n = r.accounts(ctx) {
			select {
			case <-r.runner.done:
				if n = r.accounts(ctx); n >= target {
					continue
				}
				t.Fatalf("the runner exited (code %d) with %d accounts created of %d valid; see %s",
					r.runner.cmd.ProcessState.ExitCode(), n, valid, filepath.Join(r.logDir, "runner.log"))
			case <-time.After(time.Second):
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d accounts created of %d valid at the deadline (%s)", n, valid, cfg.Deadline)
			}
		}
		s := r.sample(ctx, k, &prev)
		samples = append(samples, s)
		prev = s
		t.Logf("soak: slice %d/%d: %d accounts, %.1f accounts/s", k, soakSlices, s.Accounts, s.Rate)
	}
	if !r.runner.wait(time.Until(deadline)) {
		t.Fatalf("the runner did not finish within %s", cfg.Deadline)
	}

	table := soakTable(before, samples)
	t.Log("\n" + table)
	writeSoakCSV(t, dir, samples)
	writeSoakChart(t, dir, samples)
	targets := soakTargets(before, samples)
	t.Log("\n" + targets.String())
	keys, unexpiring := r.redisKeyPrefixes(ctx)
	t.Log("\n" + keys)
	t.Log("\n" + logSummary(r.logDir))
	if cfg.AssertTargets {
		for _, tg := range targets {
			if !tg.Met && !tg.Unjudged {
				t.Errorf("target missed: %s: %s", tg.Name, tg.Figure)
			}
		}
	}
	r.finalChecks(t, ctx, cohortPath, invalid, samples[len(samples)-1])
	// The service's own keys: one that is written per account or per
	// task and never expires grows with the accounts done, which a run of
	// any size shows (Asynq's keys are its janitor's to bound).
	for prefix, n := range unexpiring {
		if n > soakMaxUnexpiring {
			t.Errorf("redis: %d keys %s without an expiry: they grow with the accounts done", n, prefix)
		}
	}
	return samples
}

// startVendor starts `importctl vendor-sim` and configures it as DEMO_PAY,
// the vendor the generated payment instructions name.
func (r *soakRun) startVendor() {
	r.vendor = startVendorSim(r.chaosRun, r.importctl, "vendor-sim", "DEMO_PAY", 0)
}

func (r *soakRun) accounts(ctx context.Context) int {
	var n int
	if err := r.db.GetContext(ctx, &n, `SELECT count(*) FROM accounts`); err != nil {
		r.t.Fatalf("count accounts: %v", err)
	}
	return n
}

// sample measures slice k; prev is the sample before (nil for the one
// taken before the run, which measures no slice).
func (r *soakRun) sample(ctx context.Context, k int, prev *soakSample) soakSample {
	t := r.t
	s := soakSample{Slice: k, at: time.Now(), RSS: map[string]int64{}, CPU: map[string]float64{}, CPUPerAccount: map[string]float64{}}
	s.Accounts = r.accounts(ctx)
	s.e5, s.APIGoroutines = r.apiMetrics()
	procs := map[string]*osProc{"api": r.apis[0], "vendor-sim": r.vendor, "runner": r.runner, "redis": r.redis.proc}
	for i, w := range r.workers {
		procs[fmt.Sprintf("worker-%d", i+1)] = w
	}
	for name, p := range procs {
		if p != nil {
			s.RSS[name] = rss(p.cmd.Process.Pid)
		}
	}
	for _, p := range append([]*osProc{r.apis[0]}, r.workers...) {
		s.CPU["importd"] += procCPUSeconds(p)
	}
	s.CPU["redis"] = procCPUSeconds(r.redis.proc)
	if r.runner != nil {
		s.CPU["runner"] = procCPUSeconds(r.runner)
	}
	s.CPU["postgres"] = r.postgresCPU()
	info, err := r.rc.Info(ctx).Result() // the default sections: memory, clients, stats among them
	if err != nil {
		t.Fatalf("redis INFO: %v", err)
	}
	s.RedisUsed = infoField(info, "used_memory")
	s.RedisClients = infoField(info, "connected_clients")
	s.redisConns = infoField(info, "total_connections_received")
	if s.RedisKeys, err = r.rc.DBSize(ctx).Result(); err != nil {
		t.Fatalf("redis DBSIZE: %v", err)
	}
	get := func(dst any, q string, args ...any) {
		if err := r.db.GetContext(ctx, dst, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	get(&s.DBSize, `SELECT pg_database_size(current_database())`)
	get(&s.PGBackends, `SELECT numbackends::bigint FROM pg_stat_database WHERE datname = current_database()`)
	get(&s.pgSessions, `SELECT sessions FROM pg_stat_database WHERE datname = current_database()`)
	get(&s.walLSN, `SELECT pg_current_wal_lsn()::text`)
	get(&s.Autovacuums, `SELECT coalesce(sum(autovacuum_count), 0)::bigint FROM pg_stat_user_tables`)
	get(&s.DeadTuples, `SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables`)
	get(&s.IndexBytes, `SELECT coalesce(sum(pg_relation_size(oid)), 0)::bigint FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'i'`)
	get(&s.DeadTop, `SELECT coalesce(string_agg(relname || '=' || n_dead_tup, ' ' ORDER BY n_dead_tup DESC), '')
		FROM (SELECT relname, n_dead_tup FROM pg_stat_user_tables WHERE n_dead_tup > 0 ORDER BY n_dead_tup DESC LIMIT 3) d`)
	// Tables with their TOAST and indexes, and indexes alone: the largest
	// of each.
	if err := r.db.SelectContext(ctx, &s.Relations, `(SELECT relname AS name, 'table' AS kind, pg_total_relation_size(oid) AS bytes
			FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p') ORDER BY 3 DESC LIMIT 8)
		UNION ALL
		(SELECT relname, 'index', pg_relation_size(oid)
			FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'i' ORDER BY 3 DESC LIMIT 8)`); err != nil {
		t.Fatalf("relation sizes: %v", err)
	}
	s.SummaryTime = r.timeSummary()
	s.E13Time, s.E13Rows = r.timeE13()
	if prev != nil {
		s.Elapsed = s.at.Sub(r.runnerStarted)
		if d := s.at.Sub(prev.at).Seconds(); d > 0 {
			s.Rate = float64(s.Accounts-prev.Accounts) / d
		}
		get(&s.WAL, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint`, s.walLSN, prev.walLSN)
		s.PGNewSessions, s.RedisNewConns = s.pgSessions-prev.pgSessions, s.redisConns-prev.redisConns
		delta := histogramDelta(s.e5, prev.e5)
		s.E5Count = int(delta.GetSampleCount())
		s.E5P50, s.E5P99 = histogramQuantile(delta, 0.5), histogramQuantile(delta, 0.99)
		if n := s.Accounts - prev.Accounts; n > 0 {
			for name, c := range s.CPU {
				s.CPUPerAccount[name] = (c - prev.CPU[name]) * 1000 / float64(n)
			}
		}
	}
	return s
}

// apiMetrics scrapes the API's /metrics for E5's latency histogram and
// the API's goroutines.
func (r *soakRun) apiMetrics() (*dto.Histogram, int) {
	// /metrics on the API's address needs the MONITORING_USER login.
	req, _ := http.NewRequest(http.MethodGet, r.apiURL+"/metrics", nil)
	req.SetBasicAuth(soakMonitoringUser, soakMonitoringPassword)
	res, err := r.http.Do(req)
	if err != nil {
		r.t.Fatalf("GET /metrics: %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		r.t.Fatalf("GET /metrics: %s", res.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		r.t.Fatalf("parse /metrics: %v", err)
	}
	sc := scrape{families: fams}
	goroutines := int(sc.value("go_goroutines", nil))
	m, ok := sc.metric("importd_http_request_duration_seconds", map[string]string{"method": "POST", "route": processPath})
	if !ok || m.Histogram == nil {
		return &dto.Histogram{}, goroutines // no E5 request yet
	}
	return m.Histogram, goroutines
}

// histogramDelta is the histogram of the observations between prev and cur.
func histogramDelta(cur, prev *dto.Histogram) *dto.Histogram {
	byBound := map[float64]uint64{}
	for _, b := range prev.GetBucket() {
		byBound[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	count := cur.GetSampleCount() - prev.GetSampleCount()
	out := &dto.Histogram{SampleCount: &count}
	for _, b := range cur.GetBucket() {
		c, ub := b.GetCumulativeCount()-byBound[b.GetUpperBound()], b.GetUpperBound()
		out.Bucket = append(out.Bucket, &dto.Bucket{CumulativeCount: &c, UpperBound: &ub})
	}
	return out
}

// histogramQuantile estimates quantile q of h as Prometheus's
// histogram_quantile does: linearly within the bucket that holds it. Its
// precision is the buckets' (jobs/metrics latencyBuckets); a quantile past
// the last bucket is that bucket's bound. NaN when h is empty.
func histogramQuantile(h *dto.Histogram, q float64) float64 {
	total := float64(h.GetSampleCount())
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range h.GetBucket() {
		c := float64(b.GetCumulativeCount())
		if c >= rank {
			if c == below {
				return b.GetUpperBound()
			}
			return lower + (b.GetUpperBound()-lower)*(rank-below)/(c-below)
		}
		lower, below = b.GetUpperBound(), c
	}
	return lower
}

// userHZ is the unit of the CPU times in /proc: USER_HZ, which Linux fixes
// at 100 for every interface it exports to user space.
const userHZ = 100

// statCPU is the user and system time in seconds of process pid, with its
// waited-for children's when children is set, and its parent's pid, from
// /proc/pid/stat; ok is false once it has exited.
func statCPU(pid int, children bool) (cpu float64, ppid int, ok bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// after its closing parenthesis (field 3, state, comes first).
	st := string(raw)
	f := strings.Fields(st[strings.LastIndexByte(st, ')')+1:])
	field := func(n int) float64 { // n as numbered in proc(5)
		v, _ := strconv.ParseFloat(f[n-3], 64)
		return v / userHZ
	}
	cpu = field(14) + field(15) // utime, stime
	if children {
		cpu += field(16) + field(17) // cutime, cstime
	}
	ppid, _ = strconv.Atoi(f[1])
	return cpu, ppid, true
}

// procCPUSeconds is the CPU time of one of the run's processes: from /proc
// while it runs, from its wait status once it has ended.
func procCPUSeconds(p *osProc) float64 {
	select {
	case <-p.done:
		return (p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()).Seconds()
	default:
	}
	cpu, _, _ := statCPU(p.cmd.Process.Pid, false)
	return cpu
}

// postgresCPU is the CPU time of the run's own PostgreSQL cluster: its
// postmaster's with the children it has waited for (the backends that
// exited), and each live child's. 0 on a shared server, whose processes
// serve others too.
func (r *soakRun) postgresCPU() float64 {
	if r.pg == nil {
		return 0
	}
	raw, err := os.ReadFile(filepath.Join(r.pg.data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	postmaster, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0
	}
	total, _, _ := statCPU(postmaster, true)
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if cpu, ppid, ok := statCPU(pid, false); ok && ppid == postmaster {
			total += cpu
		}
	}
	return total
}

// rss is process pid's resident set (VmRSS) in bytes; 0 once it has exited.
func rss(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// infoField is the integer field name of a Redis INFO answer.
func infoField(info, name string) int64 {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

// timeSummary GETs the progress page's summary.json with the operator's
// login and returns how long it took to the last byte.
func (r *soakRun) timeSummary() time.Duration {
	req, _ := http.NewRequest("GET", r.apiURL+"/migration/DEMO/summary.json", nil)
	req.SetBasicAuth(soakMonitoringUser, soakMonitoringPassword)
	start := time.Now()
	res, err := r.http.Do(req)
	if err != nil {
		r.t.Fatalf("GET summary.json: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	took := time.Since(start)
	if err != nil || res.StatusCode != 200 {
		r.t.Fatalf("GET summary.json: %d %v %.200s", res.StatusCode, err, body)
	}
	return took
}

// timeE13 GETs the full E13 list (the imported accounts) with a fresh
// token and returns how long it took to its last byte, and its rows.
func (r *soakRun) timeE13() (time.Duration, int) {
	tok := r.token()
	req, _ := http.NewRequest("GET", r.apiURL+"/v1/data-import/imported-account-import-processes/DEMO/", nil)
	req.Header.Set("Authorization", "Token "+tok)
	start := time.Now()
	res, err := r.http.Do(req)
	if err != nil {
		r.t.Fatalf("GET E13: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	took := time.Since(start)
	if err != nil || res.StatusCode != 200 {
		r.t.Fatalf("GET E13: %d %v %.200s", res.StatusCode, err, body)
	}
	var rows []json.RawMessage
	if err := json.Unmarshal(body, &rows); err != nil {
		r.t.Fatalf("E13 list: %v", err)
	}
	return took, len(rows)
}

// token obtains an access token for the run's API key (tokens expire; a
// soak outlives one).
func (r *soakRun) token() string {
	q, _ := json.Marshal(map[string]any{"query": `mutation($input: ObtainJSONWebTokenInput!) { obtainServiceToken(input: $input) { token } }`,
		"variables": map[string]any{"input": map[string]string{"APIKey": r.key}}})
	res, err := r.http.Post(r.apiURL+"/v1/graphql/", "application/json", strings.NewReader(string(q)))
	if err != nil {
		r.t.Fatalf("obtainServiceToken: %v", err)
	}
	defer res.Body.Close()
	var out struct {
		Data struct {
			ObtainServiceToken struct{ Token string } `json:"obtainServiceToken"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || out.Data.ObtainServiceToken.Token == "" {
		r.t.Fatalf("obtainServiceToken: %d %v", res.StatusCode, err)
	}
	return out.Data.ObtainServiceToken.Token
}

// redisKeyPrefixes counts Redis's keys by their prefix (up to the last
// colon), and of each how many have no expiry, to name what a growing key
// count is: a key with an expiry is bounded by the run's rate, one without
// by nothing but whoever deletes it (Asynq's janitor deletes its finished
// tasks' hashes after their retention).
//
// It also returns, for each prefix outside Asynq's namespace, how many of
// its keys have no expiry.
func (r *soakRun) redisKeyPrefixes(ctx context.Context) (string, map[string]int) {
	type count struct{ keys, noExpiry int }
	counts := map[string]*count{}
	var batch []string
	flush := func() error {
		pipe := r.rc.Pipeline()
		ttls := make([]*redis.DurationCmd, len(batch))
		for i, k := range batch {
			ttls[i] = pipe.TTL(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return err
		}
		for i, k := range batch {
			if j := strings.LastIndexByte(k, ':'); j > 0 {
				k = k[:j+1] + "*"
			}
			if counts[k] == nil {
				counts[k] = &count{}
			}
			counts[k].keys++
			if ttls[i].Val() == -1 { // go-redis: -1 ns is "no expiry"
				counts[k].noExpiry++
			}
		}
		batch = batch[:0]
		return nil
	}
	iter := r.rc.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			if err := flush(); err != nil {
				r.t.Fatalf("redis keys: %v", err)
			}
		}
	}
	if err := iter.Err(); err != nil {
		r.t.Fatalf("redis keys: %v", err)
	}
	if err := flush(); err != nil {
		r.t.Fatalf("redis keys: %v", err)
	}
	unexpiring := map[string]int{}
	for k, c := range counts {
		if !strings.HasPrefix(k, "asynq:") && c.noExpiry > 0 {
			unexpiring[k] = c.noExpiry
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := counts[keys[i]].keys, counts[keys[j]].keys
		return a > b || a == b && keys[i] < keys[j]
	})
	var b strings.Builder
	fmt.Fprintf(&b, "redis keys at the end, by prefix:\n  %-50s %8s %10s\n", "prefix", "keys", "no expiry")
	for i, k := range keys {
		if i == 15 {
			fmt.Fprintf(&b, "  ... and %d more prefixes\n", len(keys)-15)
			break
		}
		fmt.Fprintf(&b, "  %-50s %8d %10d\n", k, counts[k].keys, counts[k].noExpiry)
	}
	return b.String(), unexpiring
}

// soakMaxUnexpiring is how many keys of one prefix outside Asynq's may
// live without an expiry: a handful of singletons (the E5 limiter's set,
// say), far fewer than the accounts of the smallest soak.
const soakMaxUnexpiring = 20

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func ms(seconds float64) string {
	if math.IsNaN(seconds) {
		return "-"
	}
	return fmt.Sprintf("%.0f", seconds*1000)
}

// soakColumns are the table's and soak.csv's columns, each with its value
// in a sample.
var soakColumns = []struct {
	name string
	val  func(s soakSample) string
}{
	{"slice", func(s soakSample) string { return strconv.Itoa(s.Slice) }},
	{"accounts", func(s soakSample) string { return strconv.Itoa(s.Accounts) }},
	{"elapsed_s", func(s soakSample) string { return fmt.Sprintf("%.0f", s.Elapsed.Seconds()) }},
	{"accounts_per_s", func(s soakSample) string { return fmt.Sprintf("%.1f", s.Rate) }},
	{"e5_requests", func(s soakSample) string { return strconv.Itoa(s.E5Count) }},
	{"e5_p50_ms", func(s soakSample) string { return ms(s.E5P50) }},
	{"e5_p99_ms", func(s soakSample) string { return ms(s.E5P99) }},
	{"rss_api_mb", func(s soakSample) string { return rssMB(s, "api") }},
	{"rss_worker1_mb", func(s soakSample) string { return rssMB(s, "worker-1") }},
	{"rss_worker2_mb", func(s soakSample) string { return rssMB(s, "worker-2") }},
	{"rss_vendorsim_mb", func(s soakSample) string { return rssMB(s, "vendor-sim") }},
	{"rss_runner_mb", func(s soakSample) string { return rssMB(s, "runner") }},
	{"rss_redis_mb", func(s soakSample) string { return rssMB(s, "redis") }},
	{"redis_used_mb", func(s soakSample) string { return fmt.Sprintf("%.1f", mb(s.RedisUsed)) }},
	{"redis_keys", func(s soakSample) string { return strconv.FormatInt(s.RedisKeys, 10) }},
	{"db_mb", func(s soakSample) string { return fmt.Sprintf("%.0f", mb(s.DBSize)) }},
	{"wal_mb", func(s soakSample) string { return fmt.Sprintf("%.0f", mb(s.WAL)) }},
	{"autovacuums", func(s soakSample) string { return strconv.FormatInt(s.Autovacuums, 10) }},
	{"dead_tuples", func(s soakSample) string { return strconv.FormatInt(s.DeadTuples, 10) }},
	{"index_mb", func(s soakSample) string { return fmt.Sprintf("%.0f", mb(s.IndexBytes)) }},
	{"pg_backends", func(s soakSample) string { return strconv.FormatInt(s.PGBackends, 10) }},
	{"pg_new_sessions", func(s soakSample) string { return strconv.FormatInt(s.PGNewSessions, 10) }},
	{"redis_clients", func(s soakSample) string { return strconv.FormatInt(s.RedisClients, 10) }},
	{"redis_new_conns", func(s soakSample) string { return strconv.FormatInt(s.RedisNewConns, 10) }},
	{"api_goroutines", func(s soakSample) string { return strconv.Itoa(s.APIGoroutines) }},
	{"cpu_importd_ms_per_acc", func(s soakSample) string { return fmt.Sprintf("%.1f", s.CPUPerAccount["importd"]) }},
	{"cpu_postgres_ms_per_acc", func(s soakSample) string { return fmt.Sprintf("%.1f", s.CPUPerAccount["postgres"]) }},
	{"cpu_redis_ms_per_acc", func(s soakSample) string { return fmt.Sprintf("%.2f", s.CPUPerAccount["redis"]) }},
	{"cpu_runner_ms_per_acc", func(s soakSample) string { return fmt.Sprintf("%.1f", s.CPUPerAccount["runner"]) }},
	{"summary_ms", func(s soakSample) string { return fmt.Sprintf("%.0f", s.SummaryTime.Seconds()*1000) }},
	{"e13_ms", func(s soakSample) string { return fmt.Sprintf("%.0f", s.E13Time.Seconds()*1000) }},
	{"e13_rows_per_s", func(s soakSample) string { return fmt.Sprintf("%.0f", e13Rate(s)) }},
	{"dead_top", func(s soakSample) string { return s.DeadTop }},
}

// rssMB is a process's RSS in MB, or "-" when it was not running (the
// runner before it started and after it ended).
func rssMB(s soakSample, name string) string {
	if s.RSS[name] == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", mb(s.RSS[name]))
}

func e13Rate(s soakSample) float64 {
	if s.E13Time <= 0 {
		return 0
	}
	return float64(s.E13Rows) / s.E13Time.Seconds()
}

// soakTable prints the samples, the one before the run first (slice 0),
// and the largest relations at the end with their bytes per account.
func soakTable(before soakSample, samples []soakSample) string {
	var b strings.Builder
	rows := [][]string{}
	header := []string{}
	for _, c := range soakColumns {
		header = append(header, c.name)
	}
	rows = append(rows, header)
	for _, s := range append([]soakSample{before}, samples...) {
		var row []string
		for _, c := range soakColumns {
			row = append(row, c.val(s))
		}
		rows = append(rows, row)
	}
	width := make([]int, len(header))
	for _, row := range rows {
		for i, v := range row {
			width[i] = max(width[i], len(v))
		}
	}
	for _, row := range rows {
		for i, v := range row {
			if i == len(row)-1 {
				b.WriteString(v)
			} else {
				fmt.Fprintf(&b, "%*s ", width[i], v)
			}
		}
		b.WriteString("\n")
	}
	last := samples[len(samples)-1]
	created := last.Accounts - before.Accounts
	fmt.Fprintf(&b, "\ndatabase size: %.0f MB for %d accounts, %.0f bytes per account (growth over the run)\n",
		mb(last.DBSize), created, float64(last.DBSize-before.DBSize)/float64(max(created, 1)))
	was := map[string]int64{}
	for _, rel := range before.Relations {
		was[rel.Kind+" "+rel.Name] = rel.Bytes
	}
	fmt.Fprintf(&b, "%-6s %-58s %10s %16s\n", "kind", "largest relations at the end", "MB", "bytes/account")
	for _, rel := range last.Relations {
		fmt.Fprintf(&b, "%-6s %-58s %10.1f %16.0f\n", rel.Kind, rel.Name, mb(rel.Bytes), float64(rel.Bytes-was[rel.Kind+" "+rel.Name])/float64(max(created, 1)))
	}
	return b.String()
}

// writeSoakCSV writes soak.csv (the table) and soak-relations.csv (the
// largest relations at each sample).
func writeSoakCSV(t *testing.T, dir string, samples []soakSample) {
	t.Helper()
	write := func(name string, rows [][]string) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		w := csv.NewWriter(f)
		w.WriteAll(rows)
		if err := w.Error(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var header []string
	for _, c := range soakColumns {
		header = append(header, c.name)
	}
	rows := [][]string{header}
	rels := [][]string{{"slice", "accounts", "kind", "relation", "bytes"}}
	for _, s := range samples {
		var row []string
		for _, c := range soakColumns {
			row = append(row, c.val(s))
		}
		rows = append(rows, row)
		for _, rel := range s.Relations {
			rels = append(rels, []string{strconv.Itoa(s.Slice), strconv.Itoa(s.Accounts), rel.Kind, rel.Name, strconv.FormatInt(rel.Bytes, 10)})
		}
	}
	write("soak.csv", rows)
	write("soak-relations.csv", rels)
}

// soakChartPage is soak.html: the samples drawn with the progress page's
// uPlot and colours (api/migrationui), one chart per kind of figure, the
// accounts created on the x axis. The page is one file, the library
// inlined, so that it opens from the report directory.
const soakChartPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Soak: %d accounts</title>
<style>%s
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; }
h1 { font-size: 1.3rem; } h2 { font-size: 1rem; margin: 1.2rem 0 0.3rem; }</style>
<script>%s</script></head>
<body><h1>Soak: %d accounts, sampled every tenth</h1><div id="charts"></div>
<script>
var d = %s;
var colours = ["#1b7f3b", "#c0392b", "#2c5aa0", "#b8860b", "#7b3fa0", "#555555"];
function chart(title, unit, names) {
  var h = document.createElement("h2"); h.textContent = title;
  var el = document.createElement("div");
  document.getElementById("charts").append(h, el);
  var series = [{ label: "Accounts" }];
  names.forEach(function (n, i) { series.push({ label: n, stroke: colours[i %% colours.length], width: 2 }); });
  new uPlot({ width: Math.min(window.innerWidth - 40, 900), height: 220, series: series,
    axes: [{ label: "Accounts created" }, { label: unit }],
    scales: { x: { time: false }, y: { range: function (u, min, max) { return [0, Math.max(max, 1)]; } } } },
    [d.accounts].concat(names.map(function (n) { return d[n]; })), el);
}
chart("Throughput per slice", "accounts/s", ["accounts/s"]);
chart("E5 latency per slice", "ms", ["E5 p50", "E5 p99"]);
chart("Resident memory", "MB", ["api", "worker-1", "worker-2", "runner", "redis"]);
chart("Redis used_memory", "MB", ["redis used_memory"]);
chart("Database", "MB", ["database size", "WAL in the slice"]);
chart("Progress summary and full E13 list", "ms", ["summary.json", "E13"]);
chart("CPU per account created", "ms", ["CPU importd", "CPU postgres", "CPU redis", "CPU runner"]);
chart("Connections and goroutines", "count", ["PostgreSQL backends", "PostgreSQL sessions opened in the slice", "Redis clients", "Redis connections accepted in the slice", "API goroutines"]);
</script></body></html>
`

// writeSoakChart writes soak.html (soakChartPage).
func writeSoakChart(t *testing.T, dir string, samples []soakSample) {
	t.Helper()
	static := "../../api/migrationui/static/"
	lib, err := os.ReadFile(static + "uPlot.iife.min.js")
	if err != nil {
		t.Fatal(err)
	}
	css, err := os.ReadFile(static + "uPlot.min.css")
	if err != nil {
		t.Fatal(err)
	}
	series := map[string][]any{}
	add := func(name string, v any) { series[name] = append(series[name], v) }
	nullable := func(v float64) any {
		if math.IsNaN(v) || v == 0 {
			return nil
		}
		return v
	}
	for _, s := range samples {
		add("accounts", s.Accounts)
		add("accounts/s", s.Rate)
		add("E5 p50", nullable(s.E5P50*1000))
		add("E5 p99", nullable(s.E5P99*1000))
		for _, p := range []string{"api", "worker-1", "worker-2", "runner", "redis"} {
			add(p, nullable(mb(s.RSS[p])))
		}
		add("redis used_memory", mb(s.RedisUsed))
		add("database size", mb(s.DBSize))
		add("WAL in the slice", mb(s.WAL))
		add("summary.json", s.SummaryTime.Seconds()*1000)
		add("E13", s.E13Time.Seconds()*1000)
		for _, p := range []string{"importd", "postgres", "redis", "runner"} {
			add("CPU "+p, s.CPUPerAccount[p])
		}
		add("PostgreSQL backends", s.PGBackends)
		add("PostgreSQL sessions opened in the slice", s.PGNewSessions)
		add("Redis clients", s.RedisClients)
		add("Redis connections accepted in the slice", s.RedisNewConns)
		add("API goroutines", s.APIGoroutines)
	}
	data, err := json.Marshal(series)
	if err != nil {
		t.Fatal(err)
	}
	accounts := samples[len(samples)-1].Accounts
	// The library's text goes into a <script> element as it is: it holds
	// no "</script".
	page := fmt.Sprintf(soakChartPage, accounts, css, lib, accounts, data)
	if err := os.WriteFile(filepath.Join(dir, "soak.html"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
}

// soakTarget is one of the soak's targets, with its figure.
type soakTarget struct {
	Name   string
	Figure string
	Met    bool
	// Unjudged is a target the run was too short to judge: printed, never
	// asserted.
	Unjudged bool
}

type soakTargetList []soakTarget

func (ts soakTargetList) String() string {
	var b strings.Builder
	b.WriteString("targets:\n")
	for _, tg := range ts {
		mark := "met"
		switch {
		case tg.Unjudged:
			mark = "n/a"
		case !tg.Met:
			mark = "MISSED"
		}
		fmt.Fprintf(&b, "  %-6s %-52s %s\n", mark, tg.Name, tg.Figure)
	}
	return b.String()
}

// redisSteady is how long after the start Redis's key count can stop
// growing at a steady rate: the per-task keys live a fixed time, not until
// the run ends. A task's announcement (importd:outcome:*) lives ten minutes
// (jobs/taskwait, outcomeTTL), a finished task's hash two
// (jobs.AccountProcessRetention, removed by Asynq's janitor). Until then
// Redis grows with the accounts done whatever the run's length, so the
// bound is measured from the first sample after it.
const redisSteady = 10*time.Minute + jobs.AccountProcessRetention

// soakTargets holds the samples against the soak's targets: the last
// slice's throughput at least 0.9 of the first's; each service process's
// RSS at the end at most 1.2 times its RSS after the first slice; Redis
// memory bounded (at the end at most 1.2 times its figure at the first
// sample after redisSteady, rather than growing with the accounts done);
// the progress summary under 300 ms and E13 at least 20,000 rows/s at the
// end. The database size per account is a figure to write down, not a
// target.
func soakTargets(before soakSample, samples []soakSample) soakTargetList {
	first, last := samples[0], samples[len(samples)-1]
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return math.Inf(1)
		}
		return a / b
	}
	var ts soakTargetList
	tr := ratio(last.Rate, first.Rate)
	ts = append(ts, soakTarget{Name: "last slice's accounts/s >= 0.9 x the first's",
		Figure: fmt.Sprintf("%.1f / %.1f = %.2f", last.Rate, first.Rate, tr), Met: tr >= 0.9})
	for _, name := range []string{"api", "worker-1", "worker-2"} {
		rr := ratio(float64(last.RSS[name]), float64(first.RSS[name]))
		ts = append(ts, soakTarget{Name: fmt.Sprintf("%s RSS at the end <= 1.2 x after the first slice", name),
			Figure: fmt.Sprintf("%.0f MB / %.0f MB = %.2f", mb(last.RSS[name]), mb(first.RSS[name]), rr), Met: rr <= 1.2})
	}
	// A run shorter than redisSteady cannot tell a bound from growth: its
	// ratio to slice 1 is printed, not judged.
	steady, unjudged, note := first, true, fmt.Sprintf(" (not judged: no sample %s after the start, when Redis can be steady)", redisSteady)
	if i := slices.IndexFunc(samples, func(s soakSample) bool { return s.Elapsed >= redisSteady }); i >= 0 {
		steady, unjudged, note = samples[i], false, ""
	}
	rm := ratio(float64(last.RedisUsed), float64(steady.RedisUsed))
	ts = append(ts, soakTarget{Name: fmt.Sprintf("Redis used_memory at the end <= 1.2 x at slice %d", steady.Slice),
		Figure: fmt.Sprintf("%.1f MB / %.1f MB = %.2f, keys %d / %d%s", mb(last.RedisUsed), mb(steady.RedisUsed), rm, last.RedisKeys, steady.RedisKeys, note),
		Met:    rm <= 1.2, Unjudged: unjudged})
	ts = append(ts, soakTarget{Name: "progress summary at the end < 300 ms",
		Figure: fmt.Sprintf("%.0f ms", last.SummaryTime.Seconds()*1000), Met: last.SummaryTime < 300*time.Millisecond})
	ts = append(ts, soakTarget{Name: "E13 full list at the end >= 20,000 rows/s",
		Figure: fmt.Sprintf("%d rows in %.0f ms = %.0f rows/s", last.E13Rows, last.E13Time.Seconds()*1000, e13Rate(last)), Met: e13Rate(last) >= 20000})
	created := last.Accounts - before.Accounts
	ts = append(ts, soakTarget{Name: "database size per account (a figure, not a target)",
		Figure: fmt.Sprintf("%.0f bytes (%.0f MB for %d accounts)", float64(last.DBSize-before.DBSize)/float64(max(created, 1)), mb(last.DBSize-before.DBSize), created), Met: true})
	return ts
}

// finalChecks fails loudly on anything the run lost, doubled or reported
// wrongly: the cohort against the service (checkCohortArrived); nothing
// IN_PROGRESS; the runner's exit code; and E13 listing every created
// account.
func (r *soakRun) finalChecks(t *testing.T, ctx context.Context, cohortPath string, invalid []cohort.Expected, last soakSample) {
	t.Helper()
	wantExit := 0
	if len(invalid) > 0 {
		wantExit = 1
	}
	if code := r.runner.cmd.ProcessState.ExitCode(); code != wantExit {
		t.Errorf("importctl run exited %d, want %d (see %s)", code, wantExit, filepath.Join(r.logDir, "runner.log"))
	}
	checkCohortArrived(t, ctx, r.db, "DEMO", cohortPath, invalid, r.dir, r.importctl, r.apiURL, r.key)
	counts := map[string]string{
		"processes IN_PROGRESS":                   `SELECT count(*) FROM import_processes WHERE status = 'IN_PROGRESS'`,
		"accounts whose process is not COMPLETED": `SELECT count(*) FROM accounts a JOIN import_processes p ON p.id = a.import_process_id WHERE p.status <> 'COMPLETED'`,
	}
	for name, q := range counts {
		var n int
		if err := r.db.GetContext(ctx, &n, q); err != nil {
			t.Errorf("%s: %v", name, err)
		} else if n != 0 {
			t.Errorf("%s: %d, want 0", name, n)
		}
	}
	if want := len(cohortLineExtras(t, cohortPath, invalid)); last.E13Rows != want {
		t.Errorf("the last E13 list had %d rows, want %d (every valid line)", last.E13Rows, want)
	}
}

// The small variant of `make soak`, run by `make test-long` so that the
// soak's own code keeps working: 2,000 accounts with 1.5% invalid lines,
// the same processes, samples and final checks. It asserts only the checks
// of correctness. The targets are printed, not asserted: a slice of 200
// accounts lasts seconds on a small shared machine, and its throughput,
// RSS and Redis figures are noise at that size (a process's RSS after the
// first slice is still its start-up's).
func TestSoak_SmallCohortKeepsEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("a soak of 2,000 accounts through separate processes: make test-long")
	}
	t.Parallel()
	runSoak(t, soakConfig{Accounts: 2000, InvalidRate: 0.015, Seed: 21, Concurrency: 16, Deadline: 20 * time.Minute})
}
