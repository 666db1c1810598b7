package main

// The chaos harness (docs/operating.md, "Faults at volume"): the whole
// pipeline as a migration team runs it, under faults. importd runs as
// separate OS processes (one API, several workers) on a PostgreSQL and a
// Redis of the run's own, with the payment vendor simulator (a fast one
// and a slow one) as processes too. The built `importctl run` migrates a
// cohort that `importctl generate` wrote (E4, E5, E6 to E9), while the
// test's own clients create businesses (E1) before it and their payment
// instructions (E2) as their accounts arrive, and a probe client keeps
// creating accounts of a supplier of its own to see what a user sees.
// Faults come at random moments of the run: workers, the API and the
// runner itself killed with SIGKILL (the runner then resumed on its
// journal), Redis and PostgreSQL restarted, and, with the service reaching
// the stores through toxiproxy (chaos_toxiproxy_test.go), latency spikes,
// bandwidth limits and connections cut mid-statement and mid-command. At
// the end every line of the cohort must be in the service exactly once
// with its children, every business and instruction once, nothing stuck,
// no archived task for an outcome that succeeded, and the runner's
// failure report must hold exactly the invalid lines with their codes.
//
// TestChaos_FaultsDuringARunLoseNothing is the small variant that `make
// test` runs; chaos_full_test.go (build tag chaos, `make chaos`) has the
// full ones. The same harness runs the production topology (API replicas
// behind HAProxy, Redis Cluster or Sentinel, a PostgreSQL standby) and its
// failovers for `make scale`: scale_topology_test.go.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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

	"github.com/hibiken/asynq"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/auth"
)

// chaosConfig is one chaos run. Zero counts are faults not injected.
type chaosConfig struct {
	// Accounts is the cohort's size, InvalidRate the share of its lines
	// made invalid and Seed the generator's seed.
	Accounts    int
	InvalidRate float64
	Seed        uint64
	// Businesses are created through E1 before the runner starts; the
	// cohort's business accounts are spread over their contracts, and each
	// business with an imported account gets a payment instruction
	// through E2 once its accounts exist.
	Businesses int
	// Concurrency is the runner's --concurrency; Workers the importd
	// worker processes.
	Concurrency, Workers int
	// Faults injected during the run, each at a random moment.
	WorkerKills, APIKills, RunnerKills, RedisRestarts, PostgresRestarts int
	// NetworkFaults are faults of the connections to PostgreSQL and Redis
	// (networkFaultKinds, in turn); they need Proxied.
	NetworkFaults int
	// Proxied puts a toxiproxy proxy between the importd processes and
	// each store.
	Proxied bool
	// OwnPostgres starts a PostgreSQL cluster of the run's own (needed to
	// restart it); otherwise the run uses a database of the shared server.
	OwnPostgres bool
	// SlowVendor is how long the slow vendor simulator waits before each
	// answer.
	SlowVendor time.Duration
	// Deadline bounds the whole run; Settle bounds the wait for
	// stragglers after it.
	Deadline, Settle time.Duration
	// Env is added to every importd process's environment.
	Env map[string]string

	// The production topology (scale_topology_test.go). APIReplicas above
	// one puts that many API processes behind HAProxy. Redis is "" (one
	// redis-server), redisClusterTopology or redisSentinelTopology.
	// PostgresStandby starts a PostgreSQL of the run's own (as OwnPostgres
	// does) with a synchronous streaming standby, and gives the service a
	// connection string that names both.
	APIReplicas     int
	Redis           string
	PostgresStandby bool
	// The failovers of that topology, each at a random moment like the
	// faults above: a manual CLUSTER FAILOVER and a killed master of the
	// cluster's shard that holds the account tasks' queue, a Sentinel
	// failover, and the PostgreSQL primary killed and its standby promoted
	// (at most once: the old primary stays down).
	// RedisMasterKillsLagging kill the master with its replica a second
	// behind (replicaLag), so that what it acknowledged in that second is
	// lost.
	RedisClusterFailovers, RedisMasterKills, RedisMasterKillsLagging, SentinelFailovers, PostgresPromotions int
}

// Fault kinds, in the order of the table; the network's are in
// networkFaultKinds.
const (
	faultWorkerKill      = "worker SIGKILL"
	faultAPIKill         = "API SIGKILL"
	faultRunnerKill      = "runner SIGKILL"
	faultRedisRestart    = "Redis restart"
	faultPostgresRestart = "PostgreSQL restart"
)

// faultKinds lists every kind in the order of the table.
func faultKinds() []string {
	return append([]string{faultWorkerKill, faultAPIKill, faultRunnerKill, faultRedisRestart, faultPostgresRestart,
		faultRedisClusterFailover, faultRedisMasterKill, faultRedisMasterKillLag, faultSentinelFailover, faultPostgresPromote}, networkFaultKinds()...)
}

// fault is one injected fault and what the run measured after it.
type fault struct {
	kind string
	at   time.Time
	// lifted is when the fault was over: the process restarted, the
	// server back, the toxic removed.
	lifted time.Time
	// orphans are the accounts the killed worker was processing (read from
	// Asynq's server heartbeats just before the kill).
	orphans []string
	// settled is when the last orphan stopped being IN_PROGRESS; zero when
	// there were none or they never settled.
	settled time.Time
}

// chaosRun is a run's processes and stores.
type chaosRun struct {
	t      testing.TB
	cfg    chaosConfig
	bin    string
	logDir string
	env    map[string]string
	apiURL string
	key    string
	db     *db.DB
	redis  *redisNode
	pg     *pgCluster
	// The scale topology's stores and proxy (scale_topology_test.go), in
	// place of redis and beside pg when the config asks for them.
	cluster  *redisCluster
	sentinel *redisSentinel
	standby  *pgCluster
	haproxy  *haproxy
	// redisURL is the service's REDIS_URL (not proxied).
	redisURL string
	// net is the proxies between the service and its stores (Proxied).
	net  *netProxies
	insp *asynq.Inspector

	mu sync.Mutex
	// apis are the API processes, on apiPorts; apiURL is the one's, or
	// HAProxy's in front of several.
	apis     []*osProc
	apiPorts []int
	workers  []*osProc
	seq      int
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

// redisNode is a redis-server of the run's own: the one Redis of a chaos
// run, with the persistence that docs/operating.md asks for in production
// (dataArgs), or a node of a scale run's cluster or Sentinel setup (a
// Sentinel is a redisNode started with --sentinel on its configuration
// file).
type redisNode struct {
	t      testing.TB
	name   string
	port   int
	dir    string
	logDir string
	args   []string
	proc   *osProc
}

func newRedisNode(t testing.TB, logDir, name string) *redisNode {
	n := &redisNode{t: t, name: name, port: freePort(t), dir: t.TempDir(), logDir: logDir}
	t.Cleanup(func() {
		if n.proc != nil {
			n.proc.signal(syscall.SIGKILL)
			n.proc.wait(10 * time.Second)
		}
	})
	return n
}

func (n *redisNode) addr() string { return fmt.Sprintf("127.0.0.1:%d", n.port) }

// start starts the node (again, on the same files) and waits for its port.
func (n *redisNode) start() {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		n.t.Fatal("redis-server not installed; `make test` installs it")
	}
	n.proc = startProc(n.t, n.logDir, n.name, bin, n.args, nil)
	waitTCP(n.t, n.addr())
}

// kill stops the node with SIGKILL: what it had not written or replicated
// is gone.
func (n *redisNode) kill() {
	n.proc.signal(syscall.SIGKILL)
	n.proc.wait(10 * time.Second)
}

// client is a connection to this node alone.
func (n *redisNode) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.addr(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
}

// dataArgs are a data node's arguments: its persistence, and extra.
func (n *redisNode) dataArgs(extra ...string) []string {
	return append([]string{"--port", strconv.Itoa(n.port), "--bind", "127.0.0.1", "--dir", n.dir,
		"--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--maxmemory-policy", "noeviction"}, extra...)
}

func startRedis(t testing.TB, logDir string) *redisNode {
	t.Helper()
	r := newRedisNode(t, logDir, "redis")
	r.args = r.dataArgs()
	r.start()
	return r
}

func (n *redisNode) url() string { return fmt.Sprintf("redis://%s/0", n.addr()) }

// restart stops Redis as an orchestrator does (SIGTERM: it writes its
// append-only file and exits) and starts it again on the same files.
func (r *redisNode) restart() {
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
// catalogue and returns the run ready to drive. With cfg.Proxied the
// importd processes reach PostgreSQL and Redis through toxiproxy; the
// test's own connections (r.db, r.insp) do not.
func startChaos(t testing.TB, cfg chaosConfig) *chaosRun {
	t.Helper()
	logDir, err := os.MkdirTemp("", "chaos-logs-")
	if err != nil {
		t.Fatal(err)
	}
	r := &chaosRun{t: t, cfg: cfg, bin: importdBinary(t), logDir: logDir}
	switch cfg.Redis {
	case redisClusterTopology:
		r.cluster = startRedisCluster(t, logDir)
		r.redisURL = r.cluster.url()
	case redisSentinelTopology:
		r.sentinel = startRedisSentinel(t, logDir)
		r.redisURL = r.sentinel.url()
	default:
		r.redis = startRedis(t, logDir)
		r.redisURL = r.redis.url()
	}
	var dbURL string
	switch {
	case cfg.PostgresStandby:
		r.pg = startPostgres(t, logDir)
		r.standby = r.pg.addStandby()
		dbURL = pgMultiHostURL(r.pg, r.standby, "importd")
	case cfg.OwnPostgres:
		r.pg = startPostgres(t, logDir)
		dbURL = r.pg.url("importd")
	default:
		dbURL = dbtest.NewDatabase(t)
	}
	serviceDB, serviceRedis := dbURL, r.redisURL
	if cfg.Proxied {
		u, err := url.Parse(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		r.net = startProxies(t, u.Host, fmt.Sprintf("127.0.0.1:%d", r.redis.port))
		u.Host = r.net.pg.Listen
		serviceDB = u.String()
		serviceRedis = fmt.Sprintf("redis://%s/0", r.net.redis.Listen)
	}
	for range max(cfg.APIReplicas, 1) {
		r.apiPorts = append(r.apiPorts, freePort(t))
	}
	r.apis = make([]*osProc, len(r.apiPorts))
	r.apiURL = fmt.Sprintf("http://127.0.0.1:%d", r.apiPorts[0])
	r.env = map[string]string{
		"DATABASE_URL": serviceDB, "REDIS_URL": serviceRedis, "TOKEN_SECRET": testSecret,
		"LOG_LEVEL": "warn", "DOCUMENTS_URL": "file://" + t.TempDir(),
		"DB_MAX_CONNS": "20", "SHUTDOWN_TIMEOUT": "5s", "PROCESS_WAIT_TIMEOUT": "10s",
	}
	for k, v := range cfg.Env {
		r.env[k] = v
	}
	if cfg.OwnPostgres || cfg.PostgresStandby {
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
	r.insp = asynq.NewInspector(r.redisOpt())
	t.Cleanup(func() { r.insp.Close() })

	for i := range r.apis {
		r.startAPI(i)
	}
	if len(r.apis) > 1 {
		r.haproxy = startHAProxy(t, logDir, r.apiPorts)
		r.apiURL = r.haproxy.url()
	}
	for range cfg.Workers {
		r.workers = append(r.workers, r.startWorker())
	}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, p := range append(slices.Clone(r.apis), r.workers...) {
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

// redisOpt is the service's REDIS_URL as the service reads it, for the
// test's own Redis clients.
func (r *chaosRun) redisOpt() asynq.RedisConnOpt {
	opt, err := parseRedisURL(r.redisURL)
	if err != nil {
		r.t.Fatal(err)
	}
	return opt
}

// startAPI starts API process i (`importd api` on r.apiPorts[i]) and
// waits until it answers.
func (r *chaosRun) startAPI(i int) {
	addr := fmt.Sprintf("127.0.0.1:%d", r.apiPorts[i])
	env := mergeEnv(r.env, map[string]string{"HTTP_ADDR": addr})
	r.apis[i] = startProc(r.t, r.logDir, r.nextName("api"), r.bin, []string{"api"}, env)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if res, err := http.Get("http://" + addr + "/healthz"); err == nil {
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

// The small variant of `make chaos`, run by `make test` so that the
// harness cannot rot: 500 accounts (2% invalid) and 3 businesses through
// the built runner and two worker processes, on the shared PostgreSQL,
// while 3 workers, the API and the runner are killed and Redis is
// restarted, with an E5 concurrency limit below the runner's concurrency.
func TestChaos_FaultsDuringARunLoseNothing(t *testing.T) {
	t.Parallel()
	res := runPipeline(t, chaosConfig{Accounts: 500, InvalidRate: 0.02, Seed: 31, Businesses: 3, Concurrency: 12, Workers: 2,
		WorkerKills: 3, APIKills: 1, RunnerKills: 1, RedisRestarts: 1, SlowVendor: 500 * time.Millisecond,
		Deadline: 8 * time.Minute, Settle: 3 * time.Minute,
		// Fewer slots than the runner's concurrency: the limit is
		// exercised, and a slot that a fault leaks shows at the end.
		Env: map[string]string{"PROCESS_CONCURRENCY_LIMIT": "8"}})
	t.Log("\n" + res.table())
}

// The small variant of `make chaos-network`, run by `make test-long` (it
// takes two minutes: the faults come one after the other, and each lasts
// seconds): 300 accounts and 3 businesses through the built runner, every
// importd process reaching the shared PostgreSQL and a Redis of the run's
// own through toxiproxy, while each network fault (networkFaults) comes
// once.
func TestChaos_NetworkFaultsLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("network faults one after the other for two minutes: make test-long")
	}
	t.Parallel()
	res := runPipeline(t, chaosConfig{Accounts: 300, InvalidRate: 0.02, Seed: 32, Businesses: 3, Concurrency: 12, Workers: 2,
		NetworkFaults: len(networkFaults), Proxied: true, SlowVendor: 500 * time.Millisecond,
		Deadline: 8 * time.Minute, Settle: 3 * time.Minute,
		Env: map[string]string{"PROCESS_CONCURRENCY_LIMIT": "8"}})
	t.Log("\n" + res.table())
}
