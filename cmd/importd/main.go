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
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
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
	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/imports"
	"github.com/bulkimport/bulkimport/jobs/payment"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/process"
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
			return serve(cmd.Context(), cfg, mode, migrateFirst, newLogger(stderr, cfg.LogLevel), onListen)
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
			n, err := db.Migrate(cmd.Context(), d.DB)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "applied %d migration(s); the schema is up to date\n", n)
			return nil
		}}
	root.AddCommand(serveCmd, apiCmd, workerCmd, dashboardCmd, migrateCmd)
	return root.ExecuteContext(ctx)
}

// newLogger returns the service's logger: JSON lines on w from level up. It
// is passed to every part of the service; slog's default logger is left
// alone, so that several services in one test binary keep their logs apart.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// serve runs the parts of the service that mode names until ctx is done.
func serve(ctx context.Context, cfg *Config, mode string, migrateFirst bool, log *slog.Logger, onListen func(string)) error {
	var d *sqlx.DB
	if mode != "dashboard" {
		var err error
		d, err = db.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns)
		if err != nil {
			return err
		}
		defer d.Close()
		if migrateFirst {
			if _, err := db.Migrate(ctx, d.DB); err != nil {
				return err
			}
		} else if mode != "worker" {
			if err := db.CheckSchema(ctx, d.DB); err != nil {
				if errors.Is(err, db.ErrSchemaOutdated) {
					return fmt.Errorf("%w; run `importd migrate` first, or start with --migrate", err)
				}
				return err
			}
		}
	}
	rc, ok := cfg.Redis.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return errors.New("REDIS_URL: unsupported Redis connection type")
	}
	defer rc.Close()
	m := newMetrics(rc)
	var metricsHandler http.Handler // nil: METRICS_ADDR serves /metrics apart
	if cfg.MetricsAddr == "" {
		metricsHandler = m.Handler(log)
	}

	var monitoring http.Handler
	if cfg.MonitoringUser != "" {
		monitoring = api.Monitoring(api.MonitoringConfig{Redis: cfg.Redis, User: cfg.MonitoringUser, Password: cfg.MonitoringPassword, ReadOnly: cfg.MonitoringReadOnly})
	}

	var catalog account.Catalog
	if d != nil {
		catalog = account.NewCatalog(d, nil)
	}
	// Without DOCUMENTS_URL the service still starts: only E6 and E8
	// requests, and E5 accounts whose notes name a document, are refused
	// (document_store_not_configured). A URL that does not open stops the
	// start, naming the variable.
	var docs *documents.Store
	if cfg.DocumentsURL != "" && mode != "dashboard" {
		var err error
		if docs, err = documents.Open(ctx, cfg.DocumentsURL, log); err != nil {
			return fmt.Errorf("DOCUMENTS_URL: %w", err)
		}
		defer docs.Close()
	}
	var handler http.Handler
	switch mode {
	case "serve", "api":
		authSvc := auth.New(d, cfg.TokenSecret)
		if err := authSvc.Listen(ctx, cfg.DatabaseURL, log); err != nil {
			return fmt.Errorf("DATABASE_URL: listen for API key changes: %w", err)
		}
		handler = api.New(api.Config{MaxBodyBytes: cfg.MaxBodyBytes, Monitoring: monitoring, Metrics: m, MetricsHandler: metricsHandler}, api.Deps{
			DB: d, Redis: rc, Auth: authSvc,
			Imports:    imports.New(d),
			Process:    process.New(d, rc, process.Config{Limit: cfg.ProcessConcurrencyLimit, Wait: cfg.ProcessWaitTimeout, Log: log}),
			PostImport: postimport.New(d, docs),
			Business:   business.New(d, nil),
			Payment:    payment.New(d, rc, payment.Config{Log: log}),
			Log:        log,
		}).Handler()
	case "worker":
		handler = withMetricsRoute(api.Probes(d, rc, log), metricsHandler)
	case "dashboard":
		if monitoring == nil {
			return errors.New("MONITORING_USER: required by `importd dashboard`")
		}
		handler = withMetricsRoute(api.Dashboard(rc, monitoring, log), metricsHandler)
	}

	var w *worker.Worker
	var err error
	if mode == "serve" || mode == "worker" {
		accounts := cfg.WorkerConcurrency
		if cfg.ProcessConcurrencyLimit > 0 {
			// The E5 limit is the accounts queue's concurrency: with one
			// worker, never more than the limit run at once.
			accounts = cfg.ProcessConcurrencyLimit
		}
		w, err = worker.New(worker.Config{
			AccountConcurrency: accounts, Concurrency: cfg.WorkerConcurrency,
			ShutdownTimeout: cfg.ShutdownTimeout, SMTPURL: cfg.SMTPURL,
		}, worker.Deps{DB: d, Redis: cfg.Redis, RedisCli: rc, Catalog: catalog, Documents: docs, Metrics: m, Log: log})
		if err != nil {
			return err
		}
	}

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
		serveMetrics(gctx, g, mln, m.Handler(log), cfg.ShutdownTimeout, log)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	log.Info("listening", "addr", ln.Addr().String(), "mode", mode)
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
	log.Info("stopped", "mode", mode)
	return err
}
