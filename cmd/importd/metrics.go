package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/metrics"
	"github.com/bulkimport/bulkimport/jobs/progress"
)

// queues are the Asynq queues whose sizes /metrics reports.
var queues = []string{jobs.QueueAccounts, jobs.QueueVendors, jobs.QueueEmails}

// newMetrics returns the metrics of one process, with the queue sizes read
// through rc at scrape time and, when d is not nil (every mode but the
// dashboard), the pool's statistics. The processes that serve the API also
// report each supplier's accounts by state from the progress counters:
// workers leave that to them, so that a deployment of many workers does not
// ask the database the same question once per worker. Each run gets a
// registry of its own.
func newMetrics(rc redis.UniversalClient, d *db.DB, mode string) *metrics.Metrics {
	m := metrics.New()
	m.KnownTaskTypes(jobs.TaskTypes...)
	m.WatchQueues(asynq.NewInspectorFromRedisClient(rc), queues...)
	if d == nil {
		return m
	}
	m.WatchDatabase(d)
	if mode == "serve" || mode == "api" {
		counters := progress.New(d, nil)
		m.WatchSuppliers(func(ctx context.Context) ([]metrics.SupplierAccounts, error) {
			ps, err := counters.Suppliers(ctx, func(string) bool { return true })
			if err != nil {
				return nil, err
			}
			out := make([]metrics.SupplierAccounts, len(ps))
			for i, p := range ps {
				out[i] = metrics.SupplierAccounts{Supplier: p.Code, Staged: p.Counts.Staged,
					InProgress: p.Counts.InProgress, Completed: p.Counts.Completed, Failed: p.Counts.Failed,
					Refused: p.Counts.Refused, RefusedNotOngoing: p.Counts.RefusedNotOngoing}
			}
			return out, nil
		})
	}
	return m
}

// withMetricsRoute serves metricsHandler at GET /metrics in front of h, for
// the processes whose handler is not the API's (worker, dashboard). A nil
// metricsHandler (METRICS_ADDR is set) leaves h as it is.
func withMetricsRoute(h, metricsHandler http.Handler) http.Handler {
	if metricsHandler == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metricsHandler)
	mux.Handle("/", h)
	return mux
}

// listenMetrics opens METRICS_ADDR, or returns nil when it is unset.
func listenMetrics(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("METRICS_ADDR: %w", err)
	}
	return ln, nil
}

// serveMetrics serves GET /metrics on ln until ctx is done, and with
// profiles the runtime profiles of net/http/pprof under /debug/pprof/. They
// are served only here, on the operators' port, never on HTTP_ADDR: a
// profile shows the process's internals and costs CPU while it runs.
func serveMetrics(ctx context.Context, g *errgroup.Group, ln net.Listener, h http.Handler, profiles bool, shutdownTimeout time.Duration, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	if profiles {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving metrics", "addr", ln.Addr().String())
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("METRICS_ADDR: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		return srv.Shutdown(sctx)
	})
}
