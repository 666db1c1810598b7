// Package metrics defines the service's Prometheus series, shared by the API
// and the worker (which must not import each other). cmd creates one Metrics
// per process with New and hands it to both; each Metrics has a registry of
// its own rather than the global default, so that several services started
// in one test binary never count into each other's series.
//
// Every method is safe on a nil *Metrics and does nothing, so that code
// built without metrics (unit tests, tools) needs no special case.
package metrics

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Job outcomes, the outcome label of importd_jobs_total.
const (
	// JobSuccess: the handler returned nil.
	JobSuccess = "success"
	// JobFailure: the handler returned an error; Asynq retries the task
	// while it has retries left.
	JobFailure = "failure"
	// JobSkipped: the handler refused the task for good (asynq.SkipRetry:
	// an undecodable payload, an invalid account, a vendor refusal); the
	// task is archived without a retry.
	JobSkipped = "skipped"
	// JobHandedBack: a stopping worker gave the task back to its queue
	// unfinished; it runs again, on any worker, without losing a retry.
	JobHandedBack = "handed_back"
)

// jobOutcomes are the outcome label's values of importd_jobs_total.
var jobOutcomes = []string{JobSuccess, JobFailure, JobSkipped, JobHandedBack}

// Vendor call outcomes, the outcome label of importd_vendor_calls_total.
const (
	VendorOK            = "ok"
	VendorNotFound      = "not_found"
	VendorTimeout       = "timeout"
	VendorUnavailable   = "unavailable"
	VendorProtocolError = "protocol_error"
	VendorRefused       = "refused"
	VendorCancelled     = "cancelled"
	VendorError         = "error"
)

// Unmatched is the route label of requests that matched no route. Routes are
// always patterns, never raw paths: paths carry account numbers.
const Unmatched = "unmatched"

// latencyBuckets cover a fast GET (a few milliseconds) up to an E5 that
// waits its whole PROCESS_WAIT_TIMEOUT (30 s by default) and a vendor
// verification with retries.
var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Metrics holds the collectors of one process.
type Metrics struct {
	registry *prometheus.Registry

	httpRequests     *prometheus.CounterVec
	httpDuration     *prometheus.HistogramVec
	jobs             *prometheus.CounterVec
	jobDuration      *prometheus.HistogramVec
	accountsCreated  prometheus.Counter
	validationErrors *prometheus.CounterVec
	vendorCalls      *prometheus.CounterVec
	creationTxs      *prometheus.HistogramVec
	takeovers        *prometheus.CounterVec
	authFailures     *prometheus.CounterVec
}

// New returns the service's collectors registered on a registry of their
// own, together with the Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "importd_http_requests_total",
			Help: "HTTP requests answered, by method, route pattern and status.",
		}, []string{"method", "route", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "importd_http_request_duration_seconds",
			Help:    "Time from receiving an HTTP request to its last byte, by method and route pattern.",
			Buckets: latencyBuckets,
		}, []string{"method", "route"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "importd_jobs_total",
			Help: "Asynq tasks run, by type and outcome (success, failure: retried, skipped: archived without retry).",
		}, []string{"type", "outcome"}),
		jobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "importd_job_duration_seconds",
			Help:    "Time an Asynq task's handler ran, by type and outcome.",
			Buckets: latencyBuckets,
		}, []string{"type", "outcome"}),
		accountsCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "importd_accounts_created_total",
			Help: "Accounts created by E5 (dry runs excluded).",
		}),
		validationErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "importd_validation_errors_total",
			Help: "Problems reported in 400 answers (the errors[] of section 7), by code.",
		}, []string{"code"}),
		vendorCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "importd_vendor_calls_total",
			Help: "Requests to payment vendors, by vendor and outcome (ok, not_found, timeout, unavailable, protocol_error, cancelled, error).",
		}, []string{"vendor", "outcome"}),
		creationTxs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "importd_account_transaction_accounts",
			Help: "Accounts per creation transaction of the worker, by outcome (committed; split: rolled back, each account run again alone; rolled_back: a lone account's transaction).",
			// Powers of two up to beyond the largest sensible ACCOUNT_BATCH.
			Buckets: prometheus.ExponentialBuckets(1, 2, 8),
		}, []string{"outcome"}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "importd_takeovers_total",
			Help: "Tasks queued again because the worker that ran them stopped answering, by task type.",
		}, []string{"type"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "importd_auth_failures_total",
			Help: "Failed authentications, by channel (api, token, migration_page, monitoring) and reason (wrong: a credential checked and refused; throttled: refused unchecked by the failed-attempt limit).",
		}, []string{"channel", "reason"}),
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.httpRequests, m.httpDuration, m.jobs, m.jobDuration, m.accountsCreated, m.validationErrors, m.vendorCalls,
		m.creationTxs, m.takeovers, m.authFailures,
	)
	// Series whose label values are known here exist from the start, at
	// 0: a series that appears only with its first event makes rate() and
	// increase() over it empty, and a dashboard panel "No data", until
	// then. The task types are the caller's (KnownTaskTypes); the
	// labels that are open-ended (route, status, code, vendor) are not.
	for _, o := range txOutcomes {
		m.creationTxs.WithLabelValues(o)
	}
	return m
}

// KnownTaskTypes creates the series of each task type at 0: its takeovers
// (importd_takeovers_total) and its runs by outcome (importd_jobs_total
// and importd_job_duration_seconds), so that a rate or an increase over
// them is 0, not absent, before the first event. cmd calls it with every
// type of jobs, in every mode: an API process counts takeovers, a worker
// runs tasks.
func (m *Metrics) KnownTaskTypes(types ...string) {
	if m == nil {
		return
	}
	for _, t := range types {
		m.takeovers.WithLabelValues(t).Add(0)
		for _, o := range jobOutcomes {
			m.jobs.WithLabelValues(t, o).Add(0)
			m.jobDuration.WithLabelValues(t, o)
		}
	}
}

// Registry returns the registry the collectors are registered on, for
// adding more (WatchQueues) or for tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in the Prometheus text format (or
// OpenMetrics when the scraper asks for it). A collector that fails (Redis
// down for the queue sizes) is reported in the log and left out, and the
// other series are still served. log must not be nil.
func (m *Metrics) Handler(log *slog.Logger) http.Handler {
	if log == nil {
		panic("metrics.Handler: nil *slog.Logger")
	}
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		ErrorHandling:     promhttp.ContinueOnError,
		ErrorLog:          slogErrorLog{log},
		EnableOpenMetrics: true,
	})
}

// ObserveHTTP counts one answered request. route must be a pattern (or
// Unmatched) and method one of the standard methods, so that a caller
// cannot create series at will.
func (m *Metrics) ObserveHTTP(method, route string, status int, d time.Duration) {
	if m == nil {
		return
	}
	m.httpRequests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(method, route).Observe(d.Seconds())
}

// ObserveJob counts one run of a task handler.
func (m *Metrics) ObserveJob(taskType, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.jobs.WithLabelValues(taskType, outcome).Inc()
	m.jobDuration.WithLabelValues(taskType, outcome).Observe(d.Seconds())
}

// AccountCreated counts one account created.
func (m *Metrics) AccountCreated() {
	if m == nil {
		return
	}
	m.accountsCreated.Inc()
}

// Outcomes of a shared creation transaction, the outcome label of
// importd_account_transaction_accounts.
const (
	// TxCommitted: the transaction committed; each account has its outcome.
	TxCommitted = "committed"
	// TxSplit: an account failed, so the transaction was rolled back and
	// each of its accounts ran again in a transaction of its own.
	TxSplit = "split"
	// TxRolledBack: the transaction of a lone account was rolled back (it
	// failed, and is retried, or was refused while writing).
	TxRolledBack = "rolled_back"
)

// txOutcomes are the outcome label's values of
// importd_account_transaction_accounts.
var txOutcomes = []string{TxCommitted, TxSplit, TxRolledBack}

// CreationTransaction records one creation transaction of the worker's
// writers, of accounts accounts, that ended with outcome (a Tx* constant).
func (m *Metrics) CreationTransaction(outcome string, accounts int) {
	if m == nil {
		return
	}
	m.creationTxs.WithLabelValues(outcome).Observe(float64(accounts))
}

// Takeover counts one task queued again for work whose worker stopped
// answering (its heartbeat lapsed), by the task's type.
func (m *Metrics) Takeover(taskType string) {
	if m == nil {
		return
	}
	m.takeovers.WithLabelValues(taskType).Inc()
}

// AuthFailures adds n failed authentications at channel for reason (the
// label values of jobs/auth, which calls it); n is 0 to make the series
// exist before the first failure, so that a rate over it is 0, not absent.
func (m *Metrics) AuthFailures(channel, reason string, n int) {
	if m == nil {
		return
	}
	m.authFailures.WithLabelValues(channel, reason).Add(float64(n))
}

// ValidationError counts one problem of a 400 answer by its stable code.
func (m *Metrics) ValidationError(code string) {
	if m == nil {
		return
	}
	m.validationErrors.WithLabelValues(code).Inc()
}

// VendorCall counts one request to a payment vendor. vendor is the name the
// operator configured; outcome is one of the Vendor* constants.
func (m *Metrics) VendorCall(vendor, outcome string) {
	if m == nil {
		return
	}
	m.vendorCalls.WithLabelValues(vendor, outcome).Inc()
}
