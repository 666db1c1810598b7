// Package api is the HTTP transport: the Gin router, authentication
// middleware, the token GraphQL endpoint, and thin handlers that call the
// domain code in jobs. Errors are rendered in one place (errors.go).
package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/semaphore"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/auth"
	"github.com/bulkimport/bulkimport/jobs/business"
	"github.com/bulkimport/bulkimport/jobs/imports"
	"github.com/bulkimport/bulkimport/jobs/metrics"
	"github.com/bulkimport/bulkimport/jobs/payment"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/process"
	"github.com/bulkimport/bulkimport/jobs/progress"
)

// Config holds the API's settings; cmd fills it from the environment.
type Config struct {
	// MaxBodyBytes limits request bodies; larger ones get 400
	// request_too_large.
	MaxBodyBytes int64
	// Monitoring, when non-nil, is mounted at /monitoring/ (the Asynqmon
	// dashboard, already behind basic auth).
	Monitoring http.Handler
	// Migration, when its User is set, serves the migration progress page
	// at /migration/ behind that basic-auth login (migration.go).
	Migration MigrationLogin
	// Metrics counts requests and validation errors; nil counts nothing.
	Metrics *metrics.Metrics
	// MetricsHandler, when non-nil, is served at GET /metrics without a
	// token (cmd leaves it nil when METRICS_ADDR serves it apart).
	MetricsHandler http.Handler
	// BodyReadTimeout bounds the reading of a request body; zero means 30s.
	BodyReadTimeout time.Duration
	// StreamWriteTimeout bounds each write of a streamed list (E11-E13), so
	// that a client that stops reading cannot hold a database connection
	// for longer; zero means 30s.
	StreamWriteTimeout time.Duration
	// MaxInFlightPerKey is how many requests one API key may have in flight
	// on this replica; zero means 64.
	MaxInFlightPerKey int
	// TrustedProxies are the addresses or CIDRs of the reverse proxies whose
	// X-Forwarded-For names the client; none means the connection's
	// address is the client's. It must parse (cmd checks it).
	TrustedProxies []string
	// PoolShare is how many requests of one API key may use the database
	// at once on this replica (E1, E3, E4, E6 to E8, E10 to E13; not E5, E2
	// and E9, which spend their time waiting on the worker or the vendor);
	// more wait up to PoolShareWait, then get 429. Zero means no cap. cmd
	// sets half of DB_MAX_CONNS, so that no key can take the whole pool.
	PoolShare int
	// PoolShareWait is how long a request waits for its key's share of
	// the pool; zero means poolShareWait (30 s).
	PoolShareWait time.Duration
	// BodyMemory is the memory, in bytes, that the request bodies over
	// LargeBody being parsed and answered at once may add to this
	// replica, each counted at twice what its parse holds (bodyCost);
	// zero means 512 MiB.
	BodyMemory int64
}

// Deps are the API's collaborators.
type Deps struct {
	DB      *db.DB
	Redis   redis.UniversalClient
	Auth    *auth.Service
	Imports *imports.Service
	Process *process.Service
	// PostImport serves E6 to E8 (notes, transactions, statements).
	PostImport *postimport.Service
	// Business serves E1.
	Business *business.Service
	// Payment serves E2 and E9.
	Payment *payment.Service
	// Progress serves the migration progress page; it is needed when
	// Config.Migration has a User.
	Progress *progress.Service
	// Log receives one line per request and the causes of 500s; it must
	// not be nil.
	Log *slog.Logger
}

// Server is the HTTP API.
type Server struct {
	cfg     Config
	db      *db.DB
	redis   redis.UniversalClient
	auth    *auth.Service
	imports *imports.Service
	process *process.Service
	router  *gin.Engine
	log     *slog.Logger
	// bodies is the budget of Config.BodyMemory (chargeBody).
	bodies *semaphore.Weighted
	// shares are the keys' shares of the database pool
	// (Config.PoolShare), for the API and the migration page alike.
	shares *poolShares

	postImport *postimport.Service
	business   *business.Service
	payment    *payment.Service
}

func init() { gin.SetMode(gin.ReleaseMode) }

// New builds the API with every route registered.
func New(cfg Config, deps Deps) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 10 << 20
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = 30 * time.Second
	}
	if cfg.StreamWriteTimeout <= 0 {
		cfg.StreamWriteTimeout = 30 * time.Second
	}
	if cfg.MaxInFlightPerKey <= 0 {
		cfg.MaxInFlightPerKey = 64
	}
	if cfg.BodyMemory <= 0 {
		cfg.BodyMemory = 512 << 20
	}
	if cfg.PoolShareWait <= 0 {
		cfg.PoolShareWait = poolShareWait
	}
	if deps.Log == nil {
		panic("api.New: nil Deps.Log")
	}
	s := &Server{cfg: cfg, db: deps.DB, redis: deps.Redis, auth: deps.Auth, imports: deps.Imports, process: deps.Process, log: deps.Log,
		bodies: semaphore.NewWeighted(cfg.BodyMemory), shares: newPoolShares(cfg.PoolShare, cfg.PoolShareWait)}
	s.postImport = deps.PostImport
	s.business, s.payment = deps.Business, deps.Payment
	r := gin.New()
	// Gin trusts every proxy by default, which would let any client pick
	// the address the failed-authentication limit counts.
	if err := r.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		panic("api.New: Config.TrustedProxies: " + err.Error())
	}
	r.HandleMethodNotAllowed = true
	r.RedirectTrailingSlash = false
	// Account numbers may contain an escaped slash (%2F); match on the raw
	// path so that it stays inside its path segment.
	r.UseRawPath = true
	r.UnescapePathValues = true
	r.Use(s.boundBodyRead, s.releaseBody, withRequestID, withClientAddr, withLogger(deps.Log), observeRequests(cfg.Metrics), logRequests, recoverPanics, clearWriteDeadline)
	r.NoRoute(notFound)
	r.NoMethod(func(c *gin.Context) {
		writeError(c, problem.New(problem.MethodNotAllowed, "method_not_allowed", "Method "+c.Request.Method+" is not allowed on this path."))
	})

	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	// The reference's address ends with a slash; a client that leaves it
	// out still gets a GraphQL answer, not a REST 404 it cannot read.
	gql := s.graphql()
	r.POST("/v1/graphql/", gql)
	r.POST("/v1/graphql", gql)
	r.GET(SchemaPath, serveSchema)
	r.GET(DocsPath+"*file", serveDocs)
	if cfg.MetricsHandler != nil {
		r.GET("/metrics", gin.WrapH(cfg.MetricsHandler))
	}
	if cfg.Monitoring != nil {
		r.Any("/monitoring/*any", gin.WrapH(cfg.Monitoring))
		r.GET("/monitoring", func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, "/monitoring/") })
	}

	// One in-flight cap and one share of the pool per key, whichever of
	// the API and the migration page its requests reach.
	inFlight := limitInFlight(cfg.MaxInFlightPerKey)
	share := s.shares.handler()
	if cfg.Migration.User != "" {
		if deps.Progress == nil {
			panic("api.New: Config.Migration without Deps.Progress")
		}
		routeMigration(r, cfg.Migration, deps.Progress, deps.Auth, deps.Redis, deps.Log, inFlight, share)
	}

	v1 := r.Group("/v1/data-import", s.authenticate, refuseMalformedParams, inFlight)
	v1.GET("/whoami/", s.whoami)
	v1.POST("/validate-account/", share, s.validateAccount)
	v1.POST("/account-import-process/create-or-update/", share, s.stageAccount)
	v1.POST("/account-import-process/process/", s.processAccount)
	v1.GET("/account-transfer-status/:supplier/:ean/", share, s.processStatus)
	v1.GET("/account/:supplier/:ean/", share, s.accountDetail)
	v1.GET("/all-account-import-processes/:supplier/", share, s.listProcesses(imports.All))
	v1.GET("/pending-account-import-processes/:supplier/", share, s.listProcesses(imports.Pending))
	v1.GET("/imported-account-import-processes/:supplier/", share, s.listProcesses(imports.Imported))
	v1.POST("/notes/create/", share, s.createNotes)
	v1.POST("/transactions/create/", share, s.createTransactions)
	v1.POST("/historical-statements/create/", share, s.createStatements)
	v1.POST("/business/", share, s.createBusiness)
	v1.POST("/payment-instruction/create/", s.createAccountPaymentInstruction)
	v1.POST("/business-payment-instruction/create/", s.createBusinessPaymentInstruction)
	v1.GET("/reconciliation/:supplier/", share, s.reconciliation)
	s.router = r
	return s
}

// Handler returns the root HTTP handler.
func (s *Server) Handler() http.Handler { return s.router }

func notFound(c *gin.Context) {
	if p := c.Request.URL.Path; strings.HasPrefix(p, "/v1/") && !strings.HasSuffix(p, "/") {
		writeError(c, problem.New(problem.NotFound, "not_found", "No endpoint at this path. The paths of this API end with a slash: try "+p+"/"))
		return
	}
	writeError(c, problem.New(problem.NotFound, "not_found", "No endpoint at this path."))
}

func (s *Server) healthz(c *gin.Context) {
	writeJSON(c, http.StatusOK, gin.H{"status": "ok"})
}

// Ready reports whether PostgreSQL and Redis answer, naming the first that
// does not. A process without a database (d nil: the dashboard) checks
// Redis alone. The worker's probe server uses it too.
func Ready(ctx context.Context, d *db.DB, r redis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if d != nil {
		if err := d.PingContext(ctx); err != nil {
			return problem.New(problem.NotReady, codeDatabaseUnavailable, "PostgreSQL is not reachable.")
		}
	}
	if err := r.Ping(ctx).Err(); err != nil {
		return problem.New(problem.NotReady, "redis_unavailable", "Redis is not reachable.")
	}
	return nil
}

func (s *Server) readyz(c *gin.Context) {
	if err := Ready(c.Request.Context(), s.db, s.redis); err != nil {
		s.log.WarnContext(c.Request.Context(), "not ready", "error", err)
		writeError(c, err)
		return
	}
	writeJSON(c, http.StatusOK, gin.H{"status": "ready"})
}

// whoami answers which key the token belongs to. It is an addition to the
// spec that lets a migration team check its credentials and scope.
func (s *Server) whoami(c *gin.Context) {
	p := principal(c)
	suppliers := p.Suppliers
	if suppliers == nil {
		suppliers = []string{}
	}
	writeJSON(c, http.StatusOK, gin.H{"key_name": p.KeyName, "organisation": p.Organisation, "import_suppliers": suppliers})
}

// Probes returns a handler with only /healthz and /readyz, for processes that
// serve no API (the worker). log must not be nil.
func Probes(d *db.DB, r redis.UniversalClient, log *slog.Logger) http.Handler {
	return probes(d, r, log)
}

func probes(d *db.DB, r redis.UniversalClient, log *slog.Logger) *gin.Engine {
	if log == nil {
		panic("api: nil *slog.Logger")
	}
	s := &Server{db: d, redis: r, log: log}
	e := gin.New()
	e.Use(withRequestID, withLogger(log), recoverPanics)
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.NoRoute(notFound)
	return e
}

// Dashboard returns the handler of `importd dashboard`: the probes of a
// process without a database (its /readyz checks Redis alone, the only
// store the dashboard reads) and the Asynqmon dashboard at MonitoringRoot.
// trustedProxies are as Config.TrustedProxies: the dashboard's failed-login
// limit counts the client address they give. log must not be nil.
func Dashboard(r redis.UniversalClient, monitoring http.Handler, trustedProxies []string, log *slog.Logger) http.Handler {
	e := probes(nil, r, log)
	if err := e.SetTrustedProxies(trustedProxies); err != nil {
		panic("api.Dashboard: trustedProxies: " + err.Error())
	}
	e.Any(MonitoringRoot+"/*any", withClientAddr, gin.WrapH(monitoring))
	return e
}
