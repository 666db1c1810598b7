// Command importd is the bulk import service: the REST API, the Asynq worker
// that processes accounts and verifies payment instructions, and the Asynqmon
// dashboard. `importd serve` runs all three in one process; `api`, `worker`
// and `dashboard` run them apart for scaled deployments.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	_ "time/tzdata" // suppliers' time zones load on any image (jobs/postimport)

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	_ "gocloud.dev/blob/fileblob" // DOCUMENTS_URL=file://... (local)
	_ "gocloud.dev/blob/s3blob"   // DOCUMENTS_URL=s3://... (production)
	"golang.org/x/sync/errgroup"

	"github.com/bulkimport/bulkimport/api"
	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/auth"
	"github.com/bulkimport/bulkimport/jobs/business"
	"github.com/bulkimport/bulkimport/jobs/creation"
	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/email"
	"github.com/bulkimport/bulkimport/jobs/imports"
	"github.com/bulkimport/bulkimport/jobs/metrics"
	"github.com/bulkimport/bulkimport/jobs/payment"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/process"
	"github.com/bulkimport/bulkimport/jobs/progress"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
	"github.com/bulkimport/bulkimport/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "importd:", err)
		os.Exit(1)
	}
}

// run is the whole program, so that tests can start it on port 0. onListen,
// when set, is told the HTTP server's address once it listens.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, onListen func(addr string)) error {
	var migrateFirst bool
	root := &cobra.Command{
		Use:           "importd",
		Short:         "Bulk import service for customer, business and account migration",
		Long:          "Bulk import service for customer, business and account migration.\n\n" + configHelp(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)

	start := func(needs need, mode string) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(getenv, needs)
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cfg, mode, migrateFirst, newLogger(stderr, cfg.LogLevel, cfg.LogFormat), onListen)
		}
	}
	serveCmd := &cobra.Command{Use: "serve", Short: "Run the API, the worker and the dashboard in one process", Args: cobra.NoArgs,
		RunE: start(needDB|needRedis|needToken, "serve")}
	apiCmd := &cobra.Command{Use: "api", Short: "Run the API (and the dashboard when MONITORING_USER is set)", Args: cobra.NoArgs,
		RunE: start(needDB|needRedis|needToken, "api")}
	for _, c := range []*cobra.Command{serveCmd, apiCmd} {
		c.Flags().BoolVar(&migrateFirst, "migrate", false, "apply pending database migrations before starting")
	}
	workerCmd := &cobra.Command{Use: "worker", Short: "Run the Asynq worker (with /healthz and /readyz on HTTP_ADDR)", Args: cobra.NoArgs,
		RunE: start(needDB|needRedis, "worker")}
	dashboardCmd := &cobra.Command{Use: "dashboard", Short: "Run only the Asynqmon dashboard at /monitoring/", Args: cobra.NoArgs,
		RunE: start(needRedis, "dashboard")}
	migrateCmd := &cobra.Command{Use: "migrate", Short: "Apply pending database migrations and exit", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(getenv, needDB)
			if err != nil {
				return err
			}
			d, err := db.Open(cmd.Context(), cfg.DatabaseURL, 2)
			if err != nil {
				return err
			}
			defer d.Close()
			n, err := db.Migrate(cmd.Context(), d.DB.DB)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "applied %d migration(s); the schema is up to date\n", n)
			return nil
		}}
	root.AddCommand(serveCmd, apiCmd, workerCmd, dashboardCmd, migrateCmd)
	return root.ExecuteContext(ctx)
}

// newLogger returns the service's logger: lines on w from level up, as JSON
// unless format is text. It is passed to every part of the service; slog's
// default logger is left alone, so that several services in one test binary
// keep their logs apart.
func newLogger(w io.Writer, level slog.Level, format LogFormat) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == LogText {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// serve runs the parts of the service that mode names until ctx is done:
// it opens the stores, builds the HTTP handler and the worker that mode
// needs, and runs them.
func serve(ctx context.Context, cfg *Config, mode string, migrateFirst bool, log *slog.Logger, onListen func(string)) error {
	if limit, set := applyMemoryLimit(cfg.MemoryLimit); set {
		log.Info("memory limit", "go_memory_limit_bytes", limit, "container_limit_bytes", cfg.MemoryLimit)
	}
	d, err := openDatabase(ctx, cfg, mode, migrateFirst)
	if err != nil {
		return err
	}
	if d != nil {
		defer d.Close()
	}
	var authDB *db.DB
	if mode == "serve" || mode == "api" {
		// Logins and tokens have connections of their own: requests that
		// take every connection of the main pool must not stop clients
		// from authenticating (the token endpoint once got no answer
		// while slow list readers held the pool).
		if authDB, err = db.Open(ctx, cfg.DatabaseURL, authConns); err != nil {
			return err
		}
		defer authDB.Close()
	}
	rc, ok := cfg.Redis.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return errors.New("REDIS_URL: unsupported Redis connection type")
	}
	defer rc.Close()
	docs, err := openDocuments(ctx, cfg, mode, log)
	if err != nil {
		return err
	}
	if docs != nil {
		defer docs.Close()
	}
	// One pub/sub connection for every waiting E2, E5 and E9 request, not one
	// per request, so that a client cannot open a Redis connection per
	// request in flight; it connects on the first wait.
	waits := taskwait.NewHub(rc)
	defer waits.Close()
	p := &instance{cfg: cfg, mode: mode, log: log, db: d, authDB: authDB, redis: rc, docs: docs, metrics: newMetrics(rc, d, mode), waits: waits,
		limiter: auth.NewFailureLimiter(rc, cfg.AuthFailureLimit, cfg.AuthFailureWindow, log)}
	p.limiter.CountFailuresIn(p.metrics)
	handler, err := p.handler(ctx)
	if err != nil {
		return err
	}
	w, err := p.newWorker()
	if err != nil {
		return err
	}
	return p.run(ctx, handler, w, onListen)
}

// authConns is the size of the pool of authentication, apart from
// DB_MAX_CONNS: a key or token check is one short query.
const authConns = 4

// openDatabase opens PostgreSQL for every mode but the dashboard (which
// returns nil), then migrates it (--migrate) or, for the modes that serve
// the API, refuses a schema that is not up to date.
func openDatabase(ctx context.Context, cfg *Config, mode string, migrateFirst bool) (*db.DB, error) {
	if mode == "dashboard" {
		return nil, nil
	}
	d, err := db.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns)
	if err != nil {
		return nil, err
	}
	if migrateFirst {
		_, err = db.Migrate(ctx, d.DB.DB)
	} else if mode != "worker" {
		if err = db.CheckSchema(ctx, d.DB.DB); errors.Is(err, db.ErrSchemaOutdated) {
			err = fmt.Errorf("%w; run `importd migrate` first, or start with --migrate", err)
		}
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// openDocuments opens DOCUMENTS_URL, or returns nil when it is unset or mode
// is the dashboard. Without it the service still starts: only E6 and E8
// requests, and E5 accounts whose notes name a document, are refused
// (document_store_not_configured). A URL that does not open stops the
// start, naming the variable.
func openDocuments(ctx context.Context, cfg *Config, mode string, log *slog.Logger) (*documents.Store, error) {
	if cfg.DocumentsURL == "" || mode == "dashboard" {
		return nil, nil
	}
	docs, err := documents.Open(ctx, cfg.DocumentsURL, log)
	if err != nil {
		return nil, fmt.Errorf("DOCUMENTS_URL: %w", err)
	}
	return docs, nil
}

// instance is what serve has opened, shared by the steps that build and run
// the parts of one importd process. db is nil in the dashboard, docs when
// DOCUMENTS_URL is unset.
type instance struct {
	cfg  *Config
	mode string
	log  *slog.Logger
	db   *db.DB
	// authDB is the pool of authentication (API keys, tokens, refresh
	// sessions) in the modes that serve the API; nil in the others.
	authDB  *db.DB
	redis   redis.UniversalClient
	docs    *documents.Store
	metrics *metrics.Metrics
	waits   *taskwait.Hub
	// limiter counts failed authentications (API keys, tokens and the
	// MONITORING_USER login) per client address and per key, in Redis.
	limiter *auth.FailureLimiter
}

// metricsHandler is what serves GET /metrics on HTTP_ADDR, or nil when
// METRICS_ADDR serves it apart. When MONITORING_USER is set (as `make run`
// sets it), it asks for that login: HTTP_ADDR is the port clients reach,
// and the series name routes, error codes and queue depths.
func (p *instance) metricsHandler() http.Handler {
	if p.cfg.MetricsAddr != "" {
		return nil
	}
	h := p.metrics.Handler(p.log)
	if p.cfg.MonitoringUser == "" {
		return h
	}
	return api.RequireLogin(p.cfg.MonitoringUser, p.cfg.MonitoringPassword, p.limiter, "metrics",
		"/metrics on HTTP_ADDR needs the MONITORING_USER credentials; METRICS_ADDR serves it on a port of its own.", h)
}

// monitoring is the Asynqmon dashboard behind basic auth, or nil when
// MONITORING_USER is unset.
func (p *instance) monitoring() http.Handler {
	if p.cfg.MonitoringUser == "" {
		return nil
	}
	return api.Monitoring(api.MonitoringConfig{Redis: p.cfg.Redis, User: p.cfg.MonitoringUser, Password: p.cfg.MonitoringPassword,
		ReadOnly: p.cfg.MonitoringReadOnly, Limiter: p.limiter})
}

// handler builds the HTTP handler of the mode: the API (which starts
// listening for API key changes), the worker's probes or the dashboard.
func (p *instance) handler(ctx context.Context) (http.Handler, error) {
	switch p.mode {
	case "serve", "api":
		return p.apiHandler(ctx)
	case "worker":
		return withMetricsRoute(api.Probes(p.db, p.redis, p.log), p.metricsHandler()), nil
	case "dashboard":
		monitoring := p.monitoring()
		if monitoring == nil {
			return nil, errors.New("MONITORING_USER: required by `importd dashboard`")
		}
		return withMetricsRoute(api.Dashboard(p.redis, monitoring, p.cfg.TrustedProxies, p.log), p.metricsHandler()), nil
	}
	return nil, fmt.Errorf("unknown mode %q", p.mode)
}

// apiHandler builds the REST API with its services.
func (p *instance) apiHandler(ctx context.Context) (http.Handler, error) {
	cfg, d, rc, log := p.cfg, p.db, p.redis, p.log
	authSvc := auth.New(p.authDB, cfg.TokenSecret).WithSessionMaxAge(cfg.SessionMaxAge).WithAccessTTL(cfg.TokenTTL).
		WithFailureLimiter(p.limiter)
	if err := authSvc.Listen(ctx, cfg.DatabaseURL, log); err != nil {
		return nil, fmt.Errorf("DATABASE_URL: listen for API key changes: %w", err)
	}
	// E5, E2 and E9 wait on their tasks the one way, through the process's
	// one pub/sub connection.
	tasks := taskwait.NewTasks(rc, p.waits, log, p.metrics)
	return api.New(api.Config{MaxBodyBytes: cfg.MaxBodyBytes, Monitoring: p.monitoring(),
		Migration: api.MigrationLogin{User: cfg.MonitoringUser, Password: cfg.MonitoringPassword, PerMinute: cfg.MigrationPagePerMinute}, Metrics: p.metrics, MetricsHandler: p.metricsHandler(),
		BodyReadTimeout: cfg.BodyReadTimeout, StreamWriteTimeout: cfg.StreamWriteTimeout, MaxInFlightPerKey: cfg.MaxInFlightPerKey, BodyMemory: cfg.BodyMemory,
		PoolShare:      max(1, cfg.DBMaxConns/2),
		TrustedProxies: cfg.TrustedProxies}, api.Deps{
		DB: d, Redis: rc, Auth: authSvc,
		Imports:    imports.New(d).WithLog(log),
		Process:    process.New(d, rc, tasks, process.Config{Limit: cfg.ProcessConcurrencyLimit, Wait: cfg.ProcessWaitTimeout, Log: log}),
		PostImport: postimport.New(d, p.docs),
		Business:   business.New(d, nil),
		Payment:    payment.New(d, tasks, payment.Config{Log: log}),
		Progress:   progress.New(d, tasks.Inspector()),
		Log:        log,
	}).Handler(), nil
}

// newWorker builds the Asynq worker in the modes that run one ("serve" and
// "worker"), and returns nil in the others.
func (p *instance) newWorker() (*worker.Worker, error) {
	if p.mode != "serve" && p.mode != "worker" {
		return nil, nil
	}
	cfg := p.cfg
	accounts := cfg.WorkerConcurrency
	if cfg.ProcessConcurrencyLimit > 0 {
		// The E5 limit is the accounts queue's concurrency: with one
		// worker, never more than the limit run at once.
		accounts = cfg.ProcessConcurrencyLimit
	}
	sender, err := email.NewSender(p.db, cfg.SMTPURL)
	if err != nil {
		return nil, err
	}
	// ends frees the slots of ended account tasks and wakes the requests
	// that wait for them, for the creation and for the sweep alike.
	ends := creation.NewAnnouncer(p.redis, p.log)
	creator := creation.NewCreator(p.db, p.redis, account.NewCatalog(p.db, nil), p.docs, ends, p.log)
	if b := (creation.Batching{Writers: cfg.AccountWriters, Size: cfg.AccountBatch}); b.Writers > 0 || b.Size > 0 {
		creator.WithBatching(b, p.metrics)
	}
	return worker.New(worker.Config{
		AccountConcurrency: accounts, Concurrency: cfg.WorkerConcurrency, ShutdownTimeout: cfg.ShutdownTimeout,
	}, worker.Deps{DB: p.db, Redis: cfg.Redis, RedisCli: p.redis,
		Creator:  creator,
		Sweeper:  creation.NewSweeper(p.db, asynq.NewInspectorFromRedisClient(p.redis), ends),
		Verifier: payment.NewVerifier(p.db, p.redis, p.log).WithMetrics(p.metrics),
		Sender:   sender,
		Metrics:  p.metrics, Log: p.log})
}

// run listens on HTTP_ADDR (and METRICS_ADDR when set), serves handler and
// runs w (when not nil) until ctx is done, then shuts both down within
// SHUTDOWN_TIMEOUT.
func (p *instance) run(ctx context.Context, handler http.Handler, w *worker.Worker, onListen func(string)) error {
	cfg := p.cfg
	g, gctx := errgroup.WithContext(ctx)
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("HTTP_ADDR: %w", err)
	}
	mln, err := listenMetrics(cfg.MetricsAddr)
	if err != nil {
		ln.Close()
		return err
	}
	if mln != nil {
		serveMetrics(gctx, g, mln, p.metrics.Handler(p.log), cfg.MetricsProfiles, cfg.ShutdownTimeout, p.log)
	}
	// No ReadTimeout or WriteTimeout: they would bound whole requests,
	// which E5's wait and the streamed lists outlast. The API bounds body
	// reads and each streamed write itself (api.Config).
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: p.cfg.ReadHeaderTimeout, IdleTimeout: p.cfg.IdleTimeout}
	p.log.Info("listening", "addr", ln.Addr().String(), "mode", p.mode)
	if onListen != nil {
		onListen(ln.Addr().String())
	}
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		// Stop accepting requests and let those in flight finish.
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	if w != nil {
		g.Go(func() error { return w.Run(gctx) })
	}
	err = g.Wait()
	p.log.Info("stopped", "mode", p.mode)
	return err
}

// applyMemoryLimit sets the Go runtime's memory limit to 90% of the
// container's (MEMORY_LIMIT), leaving room for what the runtime does not
// count, unless the limit is zero or one is set already (GOMEMLIMIT). Near
// it the garbage collector runs more often instead of letting the heap
// grow to the container's limit and be killed. It returns the limit set.
func applyMemoryLimit(container int64) (int64, bool) {
	if container <= 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		return 0, false
	}
	limit := container / 10 * 9
	debug.SetMemoryLimit(limit)
	return limit, true
}
