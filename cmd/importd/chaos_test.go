package main

// The chaos harness (docs/operating.md, "Faults at volume"): importd as separate OS
// processes (one API, several workers), a driver of many concurrent clients
// that stages a generated cohort (E4) and processes it (E5), and faults
// injected at random moments of the run: workers and the API killed with
// SIGKILL, Redis and PostgreSQL restarted. At the end the database must hold
// exactly one account per staged number, every process must have ended, and
// what the clients were told must agree with the database.
//
// TestChaos_FaultsDuringARunLoseNothing is the small variant that `make
// test` runs; chaos_full_test.go (build tag chaos, `make chaos`) is the
// full one.

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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/cmd/importctl/reconcile"
	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/auth"
	"github.com/bulkimport/bulkimport/jobs/process"
)

// chaosConfig is one chaos run.
type chaosConfig struct {
	Accounts, Clients, Workers int
	// Faults injected during the run, each at a random moment.
	WorkerKills, APIKills, RedisRestarts, PostgresRestarts int
	// OwnPostgres starts a PostgreSQL cluster of the run's own (needed to
	// restart it); otherwise the run uses a database of the shared server.
	OwnPostgres bool
	// Deadline bounds the whole drive; Settle bounds the wait for
	// stragglers after it.
	Deadline, Settle time.Duration
	// Env is added to every importd process's environment.
	Env map[string]string
}

// Fault kinds, in the order of the table.
const (
	faultWorkerKill      = "worker SIGKILL"
	faultAPIKill         = "API SIGKILL"
	faultRedisRestart    = "Redis restart"
	faultPostgresRestart = "PostgreSQL restart"
)

var faultKinds = []string{faultWorkerKill, faultAPIKill, faultRedisRestart, faultPostgresRestart}

// fault is one injected fault and what the run measured after it.
type fault struct {
	kind string
	at   time.Time
	// orphans are the accounts the killed worker was processing (read from
	// Asynq's server heartbeats just before the kill).
	orphans []string
	// settled is when the last orphan stopped being IN_PROGRESS; zero when
	// there were none or they never settled.
	settled time.Time
}

// answer is what the clients were told about one account in the end.
type answer struct {
	kind     string // created (201), already_imported (400 with a number), or a failure code
	number   string
	attempts int
}

// chaosResult is what a run measured.
type chaosResult struct {
	cfg       chaosConfig
	elapsed   time.Duration
	faults    []*fault
	answers   []answer
	responses map[string]int // "status code" -> count, over every E4 and E5 call
	created   []time.Time    // when each 201 of E5 arrived
	logDir    string
	checks    map[string]int // named final checks; every value must be 0 except "accounts"
}

// chaosRun is a run in progress.
type chaosRun struct {
	t      testing.TB
	cfg    chaosConfig
	bin    string
	logDir string
	env    map[string]string
	apiURL string
	key    string
	db     *db.DB
	redis  *redisProc
	pg     *pgCluster
	insp   *asynq.Inspector

	mu      sync.Mutex
	api     *osProc
	workers []*osProc
	seq     int

	done      atomic.Int64
	respMu    sync.Mutex
	responses map[string]int
	created   []time.Time
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// importdBinary builds bin/importd once per test binary, without the race
// detector: the chaos runs measure recovery times, which its slowdown would
// distort.
func importdBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "importd-bin-")
		if err != nil {
			buildErr = err
			return
		}
		// go test puts its own GOROOT/bin first on the PATH.
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "importd")
		out, err := exec.Command(goBin, "build", "-o", builtBin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// osProc is one importd (or server) process.
type osProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *osProc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// wait waits for the process to exit, at most d; it reports whether it did.
func (p *osProc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// startProc starts name with args and env, its output appended to
// logDir/name.log.
func startProc(t testing.TB, logDir, name, bin string, args []string, env map[string]string) *osProc {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &osProc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	return p
}

// redisProc is a redis-server of the run's own, with the persistence that
// docs/operating.md asks for in production.
type redisProc struct {
	t      testing.TB
	port   int
	dir    string
	logDir string
	proc   *osProc
}

func startRedis(t testing.TB, logDir string) *redisProc {
	t.Helper()
	r := &redisProc{t: t, port: freePort(t), dir: t.TempDir(), logDir: logDir}
	r.start()
	t.Cleanup(func() { r.proc.signal(syscall.SIGKILL); r.proc.wait(10 * time.Second) })
	return r
}

func (r *redisProc) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

func (r *redisProc) start() {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		r.t.Fatal("redis-server not installed; `make test` installs it")
	}
	r.proc = startProc(r.t, r.logDir, "redis", bin, []string{"--port", fmt.Sprint(r.port), "--bind", "127.0.0.1",
		"--dir", r.dir, "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--maxmemory-policy", "noeviction"}, nil)
	waitTCP(r.t, fmt.Sprintf("127.0.0.1:%d", r.port))
}

// restart stops Redis as an orchestrator does (SIGTERM: it writes its
// append-only file and exits) and starts it again on the same files.
func (r *redisProc) restart() {
	r.proc.signal(syscall.SIGTERM)
	if !r.proc.wait(30 * time.Second) {
		r.t.Error("redis-server did not stop within 30s of SIGTERM")
		r.proc.signal(syscall.SIGKILL)
		r.proc.wait(10 * time.Second)
	}
	r.start()
}

// pgCluster is a PostgreSQL cluster of the run's own.
type pgCluster struct {
	t      testing.TB
	bin    string
	data   string
	port   int
	logDir string
}

func findPostgres() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	p, err := exec.LookPath("initdb")
	if err != nil {
		return "", errors.New("initdb not found; `make test` installs postgresql")
	}
	return filepath.Dir(p), nil
}

// pgRun runs a PostgreSQL program as the cluster's owner: root runs it as
// the postgres user, since initdb and postgres refuse to run as root (as
// deploy/local/stack.sh does).
func (c *pgCluster) pgRun(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(c.bin, name)}, args...)...)
	}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", name, err, out)
	}
	return nil
}

func startPostgres(t testing.TB, logDir string) *pgCluster {
	t.Helper()
	bin, err := findPostgres()
	if err != nil {
		t.Fatal(err)
	}
	// Under /tmp rather than t.TempDir(): the postgres user must be able to
	// reach it.
	dir, err := os.MkdirTemp("", "chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &pgCluster{t: t, bin: bin, data: filepath.Join(dir, "data"), port: freePort(t), logDir: logDir}
	if err := os.Mkdir(c.data, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "-R", "postgres:", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	if err := c.pgRun("initdb", "-D", c.data, "-U", "importd", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("\nlisten_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\nmax_connections = 300\nshared_buffers = 128MB\n", c.port, dir)
	f, err := os.OpenFile(filepath.Join(c.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(conf)
	f.Close()
	c.start()
	t.Cleanup(func() { _ = c.pgRun("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop") })
	d, err := sqlx.Open("postgres", c.url("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Exec(`CREATE DATABASE importd`); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *pgCluster) url(database string) string {
	return fmt.Sprintf("postgres://importd@127.0.0.1:%d/%s?sslmode=disable", c.port, database)
}

func (c *pgCluster) start() {
	if err := c.pgRun("pg_ctl", "-D", c.data, "-l", filepath.Join(c.data, "server.log"), "-w", "-t", "60", "start"); err != nil {
		c.t.Fatal(err)
	}
}

// stop is a fast shutdown: sessions are ended, transactions rolled back.
func (c *pgCluster) stop() {
	if err := c.pgRun("pg_ctl", "-D", c.data, "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		c.t.Error(err)
	}
}

// restart is a fast shutdown and a start.
func (c *pgCluster) restart() {
	c.stop()
	c.start()
}

// startChaos starts the stores and the importd processes, seeds the
// catalogue and returns the run ready to drive.
func startChaos(t testing.TB, cfg chaosConfig) *chaosRun {
	t.Helper()
	logDir, err := os.MkdirTemp("", "chaos-logs-")
	if err != nil {
		t.Fatal(err)
	}
	r := &chaosRun{t: t, cfg: cfg, bin: importdBinary(t), logDir: logDir, responses: map[string]int{}}
	r.redis = startRedis(t, logDir)
	var dbURL string
	if cfg.OwnPostgres {
		r.pg = startPostgres(t, logDir)
		dbURL = r.pg.url("importd")
	} else {
		dbURL = dbtest.NewDatabase(t)
	}
	apiPort := freePort(t)
	r.apiURL = fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	r.env = map[string]string{
		"DATABASE_URL": dbURL, "REDIS_URL": r.redis.url(), "TOKEN_SECRET": testSecret,
		"LOG_LEVEL": "warn", "DOCUMENTS_URL": "file://" + t.TempDir(),
		"DB_MAX_CONNS": "20", "SHUTDOWN_TIMEOUT": "5s", "PROCESS_WAIT_TIMEOUT": "10s",
	}
	for k, v := range cfg.Env {
		r.env[k] = v
	}
	if cfg.OwnPostgres {
		mig := startProc(t, logDir, "migrate", r.bin, []string{"migrate"}, r.env)
		if !mig.wait(2*time.Minute) || mig.cmd.ProcessState.ExitCode() != 0 {
			t.Fatalf("importd migrate failed; see %s/migrate.log", logDir)
		}
	}
	r.db, err = db.Open(context.Background(), dbURL, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.db.Close() })
	seedDemo(t, &service{db: r.db, env: r.env}, admin.Supplier{})
	if r.key, err = auth.CreateKey(context.Background(), r.db, "chaos", "", auth.AllSuppliers()); err != nil {
		t.Fatal(err)
	}
	r.insp = asynq.NewInspector(asynq.RedisClientOpt{Addr: fmt.Sprintf("127.0.0.1:%d", r.redis.port)})
	t.Cleanup(func() { r.insp.Close() })

	r.startAPI(apiPort)
	for range cfg.Workers {
		r.workers = append(r.workers, r.startWorker())
	}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, p := range append([]*osProc{r.api}, r.workers...) {
			p.signal(syscall.SIGKILL)
			p.wait(10 * time.Second)
		}
	})
	return r
}

func (r *chaosRun) nextName(kind string) string {
	r.seq++
	return fmt.Sprintf("%s-%02d", kind, r.seq)
}

// startAPI starts `importd api` on port and waits until it answers.
func (r *chaosRun) startAPI(port int) {
	env := mergeEnv(r.env, map[string]string{"HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port)})
	r.api = startProc(r.t, r.logDir, r.nextName("api"), r.bin, []string{"api"}, env)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if res, err := http.Get(r.apiURL + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.t.Fatalf("importd api did not answer /healthz within 60s; see %s", r.logDir)
}

func (r *chaosRun) startWorker() *osProc {
	env := mergeEnv(r.env, map[string]string{"HTTP_ADDR": "127.0.0.1:0"})
	return startProc(r.t, r.logDir, r.nextName("worker"), r.bin, []string{"worker"}, env)
}

func mergeEnv(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// chaosAccount is the generated account number i of the cohort.
func chaosAccount(i int) string { return fmt.Sprintf("CHAOS-%06d", i) }

// cohortPayload is the fixture as account i: its own number, and customer
// names and e-mail addresses of its own, so the cohort is not one account
// repeated.
func cohortPayload(t testing.TB, i int) []byte {
	m := fixture(t, chaosAccount(i))
	if cs, ok := m["customers"].([]any); ok {
		for j, c := range cs {
			if cm, ok := c.(map[string]any); ok {
				if _, ok := cm["family_name"]; ok {
					cm["family_name"] = fmt.Sprintf("Chaos%d", i)
				}
				if _, ok := cm["email"]; ok {
					cm["email"] = fmt.Sprintf("c%d.%d@example.com", i, j)
				}
			}
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// post sends one request; status is 0 on a connection error.
func (r *chaosRun) post(c *http.Client, path string, body []byte) (int, map[string]any) {
	req, _ := http.NewRequest("POST", r.apiURL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Token "+r.key)
	res, err := c.Do(req)
	if err != nil {
		r.count("conn_error")
		return 0, nil
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	code, _ := m["code"].(string)
	r.count(fmt.Sprintf("%d %s", res.StatusCode, code))
	return res.StatusCode, m
}

func (r *chaosRun) count(key string) {
	r.respMu.Lock()
	r.responses[key]++
	r.respMu.Unlock()
}

// backoff sleeps before retry n (1-based): 100 ms doubling to 3 s, with
// jitter, or the answer's own Retry-After when it is shorter than that cap.
func backoff(n int) time.Duration {
	d := 100 * time.Millisecond << min(n-1, 5)
	d = min(d, 3*time.Second)
	return d/2 + rand.N(d/2+1)
}

// driveAccount stages account i and processes it until a client is told it
// exists (201, or already_imported with its number), the account is refused
// for good (any other 400), or the deadline passes.
func (r *chaosRun) driveAccount(c *http.Client, i int, deadline time.Time) answer {
	ean := chaosAccount(i)
	a := answer{}
	payload := cohortPayload(r.t, i)
	for n := 1; ; n++ {
		if time.Now().After(deadline) {
			a.kind = "deadline (staging)"
			return a
		}
		a.attempts++
		st, m := r.post(c, stagePath, payload)
		code, _ := m["code"].(string)
		if st == 200 || st == 201 || code == "account_import_in_progress" {
			break // staged (a retried E4 whose first try got through finds it staged or processing)
		}
		if st == 400 && code == "account_import_process_already_imported" {
			a.kind, a.number = "already_imported", alreadyImportedNumber(m)
			return a
		}
		if st == 400 {
			a.kind = "E4 " + code
			return a
		}
		time.Sleep(backoff(n))
	}
	body, _ := json.Marshal(map[string]any{"external_account_number": ean, "import_supplier_code": "DEMO", "operations_team_name": "Ops"})
	for n := 1; ; n++ {
		if time.Now().After(deadline) {
			a.kind = "deadline (processing)"
			return a
		}
		a.attempts++
		st, m := r.post(c, processPath, body)
		code, _ := m["code"].(string)
		switch {
		case st == 201:
			a.kind, a.number = "created", fmt.Sprint(m["service_account_number"])
			r.respMu.Lock()
			r.created = append(r.created, time.Now())
			r.respMu.Unlock()
			return a
		case st == 400 && code == "account_import_process_already_imported":
			a.kind, a.number = "already_imported", alreadyImportedNumber(m)
			return a
		case st == 400:
			a.kind = "E5 " + code
			return a
		case code == "account_processing_in_progress":
			n = 0 // the account is under way: ask again at once, joining its task
		}
		time.Sleep(backoff(max(n, 1)))
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

// drive runs the cohort through cfg.Clients clients while inject runs the
// faults, and returns every account's answer.
func (r *chaosRun) drive() ([]answer, []*fault) {
	cfg := r.cfg
	deadline := time.Now().Add(cfg.Deadline)
	answers := make([]answer, cfg.Accounts)
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.Clients, DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}
	client := &http.Client{Transport: tr, Timeout: 90 * time.Second}
	defer tr.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.Accounts {
					return
				}
				answers[i] = r.driveAccount(client, i, deadline)
				r.done.Add(1)
			}
		}()
	}
	stop := make(chan struct{})
	faults := make(chan []*fault, 1)
	go func() { faults <- r.inject(stop) }()
	wg.Wait()
	close(stop)
	return answers, <-faults
}

// inject runs the configured faults, each when the run has answered a
// random fraction (5 to 85%) of the cohort, so that every fault falls
// inside the run whatever its speed. It returns when all ran or stop closes.
func (r *chaosRun) inject(stop chan struct{}) []*fault {
	cfg := r.cfg
	var plan []string
	for kind, n := range map[string]int{faultWorkerKill: cfg.WorkerKills, faultAPIKill: cfg.APIKills,
		faultRedisRestart: cfg.RedisRestarts, faultPostgresRestart: cfg.PostgresRestarts} {
		for range n {
			plan = append(plan, kind)
		}
	}
	rand.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	at := make([]int, len(plan))
	for i := range at {
		at[i] = int(float64(cfg.Accounts) * (0.05 + 0.8*rand.Float64()))
	}
	sort.Ints(at)
	var out []*fault
	var settling sync.WaitGroup
	defer settling.Wait()
	for i, kind := range plan {
		for r.done.Load() < int64(at[i]) {
			select {
			case <-stop:
				r.t.Errorf("the run ended before fault %d of %d (%s)", i+1, len(plan), kind)
				return out
			case <-time.After(20 * time.Millisecond):
			}
		}
		f := &fault{kind: kind, at: time.Now()}
		out = append(out, f)
		switch kind {
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
			r.api.signal(syscall.SIGKILL)
			r.api.wait(10 * time.Second)
			r.startAPI(r.apiPort()) // the same port: clients know one address
			r.mu.Unlock()
		case faultRedisRestart:
			r.redis.restart()
		case faultPostgresRestart:
			r.pg.restart()
		}
		// Faults at least a second apart, so that each one's recovery is
		// seen apart from the next one's.
		time.Sleep(time.Second)
	}
	return out
}

func (r *chaosRun) apiPort() int {
	var port int
	fmt.Sscanf(r.apiURL, "http://127.0.0.1:%d", &port)
	return port
}

// activeAccounts lists the accounts that the worker process pid is running,
// from the heartbeats its Asynq servers write to Redis every few seconds.
func (r *chaosRun) activeAccounts(pid int) []string {
	servers, err := r.insp.Servers()
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range servers {
		if s.PID != pid {
			continue
		}
		for _, w := range s.ActiveWorkers {
			if w.Queue != jobs.QueueAccounts {
				continue
			}
			var p jobs.AccountProcessPayload
			if json.Unmarshal(w.TaskPayload, &p) == nil {
				out = append(out, p.ExternalAccountNumber)
			}
		}
	}
	return out
}

// waitSettled records when none of f's orphans is IN_PROGRESS any more.
func (r *chaosRun) waitSettled(f *fault) {
	deadline := f.at.Add(r.cfg.Deadline)
	for time.Now().Before(deadline) {
		var n int
		err := r.db.Get(&n, `SELECT count(*) FROM import_processes WHERE external_account_number = ANY($1) AND status = 'IN_PROGRESS'`, pq.Array(f.orphans))
		if err == nil && n == 0 {
			f.settled = time.Now()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runChaos runs cfg from start to the final checks and returns what it
// measured; the checks' failures are reported on t.
func runChaos(t *testing.T, cfg chaosConfig) *chaosResult {
	t.Helper()
	r := startChaos(t, cfg)
	t.Logf("chaos: %d accounts, %d clients, %d workers; logs in %s", cfg.Accounts, cfg.Clients, cfg.Workers, r.logDir)
	start := time.Now()
	answers, faults := r.drive()
	res := &chaosResult{cfg: cfg, elapsed: time.Since(start), faults: faults, answers: answers,
		responses: r.responses, created: r.created, logDir: r.logDir}
	res.checks = r.finalChecks(answers)
	return res
}

// finalChecks waits (within cfg.Settle) for the stragglers, then counts what
// must be zero: the names of the checks are the rows of the table.
func (r *chaosRun) finalChecks(answers []answer) map[string]int {
	t := r.t
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
	settleBy := time.Now().Add(r.cfg.Settle)
	for time.Now().Before(settleBy) {
		q1 := q(`SELECT count(*) FROM import_processes WHERE status = 'IN_PROGRESS'`)
		active, _ := r.insp.ListActiveTasks(jobs.QueueAccounts)
		if q1 == 0 && len(active) == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	c := map[string]int{}
	c["accounts"] = q(`SELECT count(*) FROM accounts`)
	c["duplicates"] = q(`SELECT count(*) - count(DISTINCT (supplier_id, external_account_number)) FROM accounts`)
	c["lost (staged, no account)"] = q(`SELECT count(*) FROM import_processes p WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.import_process_id = p.id)`)
	c["processes IN_PROGRESS"] = q(`SELECT count(*) FROM import_processes WHERE status = 'IN_PROGRESS'`)
	c["processes failed without a reason"] = q(`SELECT count(*) FROM import_processes WHERE status NOT IN ('COMPLETED', 'IN_PROGRESS') AND last_error IS NULL AND service_account_number IS NULL AND updated_at > created_at`)
	c["COMPLETED without an account"] = q(`SELECT count(*) FROM import_processes p WHERE status = 'COMPLETED' AND NOT EXISTS (SELECT 1 FROM accounts a WHERE a.import_process_id = p.id AND a.service_account_number = p.service_account_number)`)
	c["accounts whose process is not COMPLETED"] = q(`SELECT count(*) FROM accounts a JOIN import_processes p ON p.id = a.import_process_id WHERE p.status <> 'COMPLETED'`)
	c["half-written accounts (no ledger or customer)"] = q(`SELECT count(*) FROM accounts a WHERE NOT EXISTS (SELECT 1 FROM ledgers l WHERE l.account_id = a.id) OR NOT EXISTS (SELECT 1 FROM customers cu WHERE cu.account_id = a.id)`)
	c["orphan child rows"] = q(`SELECT (SELECT count(*) FROM customers x WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = x.account_id))
		+ (SELECT count(*) FROM supply_points x WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = x.account_id))
		+ (SELECT count(*) FROM meters x WHERE NOT EXISTS (SELECT 1 FROM supply_points s WHERE s.id = x.supply_point_id))
		+ (SELECT count(*) FROM registers x WHERE NOT EXISTS (SELECT 1 FROM meters m WHERE m.id = x.meter_id))
		+ (SELECT count(*) FROM notes x WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = x.account_id))
		+ (SELECT count(*) FROM email_outbox x WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = x.account_id))`)
	rc := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.redis.port)})
	defer rc.Close()
	// With PROCESS_CONCURRENCY_LIMIT set, every slot is freed when its task
	// ends, or, when the release was lost with a killed process, by a
	// worker's sweep SlotGrace after the slot was last taken
	// (process.ReclaimSlots); one left over is capacity lost until it
	// expires. Every slot was taken before now, and workers sweep every 5 s.
	reclaimBy := time.Now().Add(process.SlotGrace + 15*time.Second)
	for {
		n, err := rc.ZCount(context.Background(), process.LimiterKey, fmt.Sprint(time.Now().UnixMilli()), "+inf").Result()
		if err != nil {
			t.Errorf("count concurrency slots: %v", err)
			break
		}
		c["concurrency slots still held"] = int(n)
		if n == 0 || time.Now().After(reclaimBy) {
			break
		}
		time.Sleep(time.Second)
	}
	if active, err := r.insp.ListActiveTasks(jobs.QueueAccounts); err == nil {
		c["tasks left in Asynq's active set"] = len(active)
	} else if !errors.Is(err, asynq.ErrQueueNotFound) {
		t.Errorf("list active tasks: %v", err)
	}
	c["accounts that differ from their line, missing or extra (importctl reconcile)"] = r.reconcile()

	// The clients' answers against the database.
	type row struct {
		Ext    string `db:"external_account_number"`
		Number string `db:"service_account_number"`
	}
	var rows []row
	if err := r.db.Select(&rows, `SELECT external_account_number, service_account_number FROM accounts`); err != nil {
		t.Errorf("read accounts: %v", err)
	}
	inDB := map[string]string{}
	for _, rw := range rows {
		inDB[rw.Ext] = rw.Number
	}
	told := 0
	for i, a := range answers {
		ean := chaosAccount(i)
		switch a.kind {
		case "created", "already_imported":
			told++
			if inDB[ean] == "" || inDB[ean] != a.number {
				c["answers the database contradicts"]++
				t.Errorf("%s: told %s %q, database has %q", ean, a.kind, a.number, inDB[ean])
			}
		default:
			c["accounts without a success answer"]++
			t.Errorf("%s: the client ended with %q after %d calls", ean, a.kind, a.attempts)
		}
	}
	for ean := range inDB {
		var i int
		if _, err := fmt.Sscanf(ean, "CHAOS-%06d", &i); err != nil || i >= len(answers) || (answers[i].kind != "created" && answers[i].kind != "already_imported") {
			c["accounts no client was told of"]++
		}
	}
	c["accounts"] = told
	for name, n := range c {
		if name != "accounts" && n != 0 {
			t.Errorf("%s: %d, want 0", name, n)
		}
	}
	if c["accounts"] != len(answers) || q(`SELECT count(*) FROM accounts`) != len(answers) {
		t.Errorf("%d accounts told, %d in the database, want %d", told, len(inDB), len(answers))
	}
	return c
}

// table prints what the run measured.
func (res *chaosResult) table() string {
	var b strings.Builder
	cfg := res.cfg
	fmt.Fprintf(&b, "chaos run: %d accounts, %d clients, %d workers, %s (logs: %s)\n", cfg.Accounts, cfg.Clients, cfg.Workers, res.elapsed.Round(time.Second), res.logDir)
	fmt.Fprintf(&b, "%-44s %s\n", "check", "value")
	names := make([]string, 0, len(res.checks))
	for n := range res.checks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "%-44s %d\n", n, res.checks[n])
	}
	fmt.Fprintf(&b, "\n%-20s %6s %26s %30s\n", "fault", "count", "next 201 (min/med/max)", "orphans; settled after (max)")
	created := slices.Clone(res.created)
	slices.SortFunc(created, func(a, b time.Time) int { return a.Compare(b) })
	for _, kind := range faultKinds {
		var next []time.Duration
		var orphans int
		var settle time.Duration
		unsettled := 0
		n := 0
		for _, f := range res.faults {
			if f.kind != kind {
				continue
			}
			n++
			if i, ok := slices.BinarySearchFunc(created, f.at, func(a, t time.Time) int { return a.Compare(t) }); ok || i < len(created) {
				next = append(next, created[i].Sub(f.at))
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
		slices.Sort(next)
		nx := "-"
		if len(next) > 0 {
			nx = fmt.Sprintf("%v / %v / %v", next[0].Round(10*time.Millisecond), next[len(next)/2].Round(10*time.Millisecond), next[len(next)-1].Round(10*time.Millisecond))
		}
		orph := "-"
		if kind == faultWorkerKill {
			orph = fmt.Sprintf("%d; %v", orphans, settle.Round(100*time.Millisecond))
			if unsettled > 0 {
				orph += fmt.Sprintf(" (%d kills never settled)", unsettled)
			}
		}
		fmt.Fprintf(&b, "%-20s %6d %26s %30s\n", kind, n, nx, orph)
	}
	fmt.Fprintf(&b, "\nanswers (E4 and E5 calls):\n")
	keys := make([]string, 0, len(res.responses))
	for k := range res.responses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-60s %d\n", k, res.responses[k])
	}
	b.WriteString(logSummary(res.logDir))
	return b.String()
}

// logSummary counts the warnings and errors of every process's log by
// message, so that the run's report names what went wrong inside.
func logSummary(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	counts := map[string]int{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		kind := strings.SplitN(filepath.Base(f), "-", 2)[0]
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct {
				Level string `json:"level"`
				Msg   string `json:"msg"`
				Error string `json:"error"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil || (line.Level != "WARN" && line.Level != "ERROR") {
				continue
			}
			msg := line.Msg
			if line.Error != "" {
				msg += ": " + line.Error
			}
			if len(msg) > 110 {
				msg = msg[:110]
			}
			counts[fmt.Sprintf("%-6s %-5s %s", kind, line.Level, msg)]++
		}
		fh.Close()
	}
	if len(counts) == 0 {
		return "\nno warnings or errors logged\n"
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	var b strings.Builder
	b.WriteString("\nwarnings and errors logged (process kind, level, message: count):\n")
	for i, k := range keys {
		if i == 25 {
			fmt.Fprintf(&b, "  ... and %d more kinds\n", len(keys)-25)
			break
		}
		fmt.Fprintf(&b, "  %s: %d\n", k, counts[k])
	}
	return b.String()
}

// The small variant of `make chaos`, run by `make test`: 500 accounts
// through three worker processes, five of them killed, the API killed once
// and Redis restarted twice, with an E5 concurrency limit. The takeover of
// a killed worker's accounts (jobs/process/takeover.go) brought the drive
// down to about 40 s.
func TestChaos_FaultsDuringARunLoseNothing(t *testing.T) {
	t.Parallel()
	res := runChaos(t, chaosConfig{Accounts: 500, Clients: 24, Workers: 3, WorkerKills: 5, APIKills: 1, RedisRestarts: 2,
		Deadline: 8 * time.Minute, Settle: 3 * time.Minute,
		// Fewer slots than clients: the limit is exercised, and a slot
		// that a fault leaks shows at the end.
		Env: map[string]string{"PROCESS_CONCURRENCY_LIMIT": "20"}})
	t.Log("\n" + res.table())
}

// reconcile runs importctl reconcile over the cohort the run staged, through
// the API, as a migration team would after a migration: every account must
// be in the service with the children, balances and content (its digest) of
// its line, and no other account. It returns how many accounts differ, are
// missing or are extra, with the lines it could not read; -1 when it could
// not finish.
func (r *chaosRun) reconcile() int {
	t := r.t
	dir := filepath.Join(r.logDir, "reconcile")
	cohortPath := filepath.Join(r.logDir, "cohort.ndjson")
	f, err := os.Create(cohortPath)
	if err != nil {
		t.Errorf("reconcile: %v", err)
		return -1
	}
	w := bufio.NewWriter(f)
	for i := range r.cfg.Accounts {
		fmt.Fprintf(w, "{\"account\":%s}\n", cohortPayload(t, i))
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		t.Errorf("reconcile: %v", err)
		return -1
	}
	res, err := reconcile.Run(context.Background(), reconcile.Config{Cohort: cohortPath, BaseURL: r.apiURL, APIKey: r.key,
		ReportDir: dir, TempDir: r.logDir})
	if err != nil {
		t.Errorf("importctl reconcile could not finish: %v", err)
		return -1
	}
	var summary bytes.Buffer
	res.WriteSummary(&summary)
	t.Logf("importctl reconcile (report in %s):\n%s", dir, summary.String())
	return res.Mismatched + res.Missing + res.Extra + res.Malformed + res.Invalid + res.Duplicates
}
