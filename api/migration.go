package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/auth"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/progress"
)

// MigrationRoot is where the migration progress page is served.
const MigrationRoot = "/migration"

// MigrationLogin is the basic-auth login of the migration progress page:
// the dashboard's MONITORING_USER and MONITORING_PASSWORD. The page is off
// when User is empty.
type MigrationLogin struct {
	User     string
	Password string
	// PerMinute is how many requests one viewer (an API key, or the
	// MONITORING_USER login) may make to the page per minute, in bursts of
	// as many; zero means 120. The page refreshes every 5 s.
	PerMinute int
}

// codeTooManyRequests (429) refuses a viewer of the migration page over its
// requests per minute.
const codeTooManyRequests = "too_many_requests"

//go:embed migrationui
var migrationUI embed.FS

// migrationPages are the page templates, parsed once.
// html/template escapes a value in a URL itself: a function that escaped it
// before made each escape twice (%253C).
var migrationPages = template.Must(template.New("").ParseFS(migrationUI, "migrationui/*.html"))

// migrationStatic is what /migration/static/ serves: the page's script and
// style, and uPlot (migrationui/static/uPlot.LICENSE).
var migrationStatic = func() http.Handler {
	sub, err := fs.Sub(migrationUI, "migrationui/static")
	if err != nil {
		panic(err) // the embed pattern guarantees the folder exists
	}
	return http.StripPrefix(MigrationRoot+"/static/", http.FileServerFS(sub))
}()

// migrationViewer is who looks at the page: the operator (MONITORING_USER),
// who sees every supplier and the queue, or the holder of an API key sent
// as the basic-auth password, who sees what the key may see.
type migrationViewer struct {
	// id names the viewer for the rate cap: "operator" or "key:<id>".
	id      string
	visible func(string) bool
	// operator is true for the MONITORING_USER login; it alone gets the
	// queue depth and the links into Asynqmon, which show every supplier's
	// tasks.
	operator bool
}

const viewerKey = "migration_viewer"

// migrationPage holds what the page's handlers share.
type migrationPage struct {
	progress           *progress.Service
	auth               *auth.Service
	wantUser, wantPass [sha256.Size]byte
	// rate caps each viewer's requests in Redis, across replicas; nil (no
	// Redis) caps nothing.
	rate  *redis_rate.Limiter
	limit redis_rate.Limit
	log   *slog.Logger
}

// routeMigration registers the page's routes on r.
// inFlight and share are the API's cap on a key's requests in flight and
// its share of the database pool: a viewer's requests count against the
// same caps as its key's API requests (the operator's login has caps of
// its own). A summary reads every counter of a supplier and a page of
// failed accounts; without them, 40 summaries at once took another
// supplier's E10 past its time-out.
func routeMigration(r *gin.Engine, login MigrationLogin, p *progress.Service, a *auth.Service, rc redis.UniversalClient, log *slog.Logger, inFlight, share gin.HandlerFunc) {
	m := &migrationPage{progress: p, auth: a, log: log,
		wantUser: sha256.Sum256([]byte(login.User)), wantPass: sha256.Sum256([]byte(login.Password))}
	perMinute := login.PerMinute
	if perMinute <= 0 {
		perMinute = 120
	}
	if rc != nil {
		m.rate, m.limit = redis_rate.NewLimiter(rc), redis_rate.PerMinute(perMinute)
	}
	r.GET(MigrationRoot, func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, MigrationRoot+"/") })
	g := r.Group(MigrationRoot, withAuthChannel(auth.ChannelMigrationPage), m.authenticate, m.limitRate, pageHeaders, refuseMalformedParams)
	g.Use(inFlight)
	g.GET("/", share, m.index)
	g.GET("/static/*file", gin.WrapH(migrationStatic))
	g.GET("/:supplier", func(c *gin.Context) {
		c.Redirect(http.StatusMovedPermanently, MigrationRoot+"/"+url.PathEscape(c.Param("supplier"))+"/")
	})
	g.GET("/:supplier/", share, m.supplier)
	g.GET("/:supplier/summary.json", share, m.summaryJSON)
}

// authenticate admits the MONITORING_USER login, or any user name with an
// API key as the password; anything else gets 401 with a basic-auth
// challenge, so that a browser asks for a login.
func (m *migrationPage) authenticate(c *gin.Context) {
	user, pass, ok := c.Request.BasicAuth()
	operatorLogin := func() bool {
		gotUser, gotPass := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
		return subtle.ConstantTimeCompare(gotUser[:], m.wantUser[:])&subtle.ConstantTimeCompare(gotPass[:], m.wantPass[:]) == 1
	}
	switch {
	case !ok:
	case !strings.HasPrefix(pass, "bik_") || operatorLogin():
		// A wrong MONITORING_USER login counts against the client's
		// address as a wrong API key does (AuthenticateKey, below).
		operator, err := m.auth.CheckLogin(c.Request.Context(), user+":"+pass, operatorLogin)
		if err != nil {
			writeError(c, err)
			return
		}
		if operator {
			c.Set(viewerKey, migrationViewer{id: "operator", visible: func(string) bool { return true }, operator: true})
			c.Set(callerKeyKey, operatorCaller)
			return
		}
	default:
		p, err := m.auth.AuthenticateKey(c.Request.Context(), pass)
		if pe, isProblem := problem.As(err); err != nil && (!isProblem || pe.Kind != problem.Unauthenticated) {
			writeError(c, err)
			return
		}
		if err == nil {
			c.Set(viewerKey, migrationViewer{id: "key:" + strconv.FormatInt(p.KeyID, 10), visible: p.CanSee})
			c.Set(callerKeyKey, p.KeyID)
			return
		}
	}
	c.Header("WWW-Authenticate", `Basic realm="migration", charset="UTF-8"`)
	code, detail := auth.CodeNotAuthenticated, "The migration page needs the MONITORING_USER login, or an API key as the password."
	if ok {
		code, detail = auth.CodeAuthenticationFailed, "Wrong login for the migration page."
	}
	writeError(c, problem.New(problem.Unauthenticated, code, detail))
}

// limitRate refuses a viewer's request past its requests per minute
// (MigrationLogin.PerMinute), counted in Redis so that the cap holds across
// replicas. Each summary reads every counter of a supplier: 785 requests a
// second of one key once slowed another supplier's E10 from 1.5 to 41 ms.
// A Redis that does not answer lets the request through (logged).
func (m *migrationPage) limitRate(c *gin.Context) {
	if m.rate == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 250*time.Millisecond)
	defer cancel()
	res, err := m.rate.Allow(ctx, "importd:migration-page:"+viewer(c).id, m.limit)
	if err != nil {
		m.log.WarnContext(ctx, "migration page rate not checked: redis did not answer", "error", err.Error())
		return
	}
	if res.Allowed == 0 {
		p := problem.New(problem.TooManyRequests, codeTooManyRequests,
			"Too many requests to the migration page; retry in "+strconv.Itoa(max(1, int(res.RetryAfter.Round(time.Second).Seconds())))+" s.")
		p.RetryAfter = res.RetryAfter
		writeError(c, p)
	}
}

// pageHeaders keeps the page's own files the only ones it loads or runs,
// and keeps it out of frames and caches.
func pageHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY") // frame-ancestors, for browsers without CSP 2
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

func viewer(c *gin.Context) migrationViewer {
	v, _ := c.Get(viewerKey)
	mv, _ := v.(migrationViewer)
	if mv.visible == nil {
		mv.visible = func(string) bool { return false }
	}
	return mv
}

func (m *migrationPage) index(c *gin.Context) {
	list, err := m.progress.Suppliers(c.Request.Context(), viewer(c).visible)
	if err != nil {
		writeError(c, err)
		return
	}
	m.render(c, "index.html", map[string]any{"Suppliers": list})
}

// summary reads the supplier's summary with the filter of the query string.
func (m *migrationPage) summary(c *gin.Context) (progress.Summary, bool) {
	v := viewer(c)
	f := progress.Filter{Code: c.Query("code"), Attr: c.Query("attr"), Before: c.Query("before")}
	sum, err := m.progress.Summarize(c.Request.Context(), c.Param("supplier"), f, v.visible, v.operator)
	if err != nil {
		writeError(c, err)
		return sum, false
	}
	return sum, true
}

func (m *migrationPage) supplier(c *gin.Context) {
	sum, ok := m.summary(c)
	if !ok {
		return
	}
	m.render(c, "supplier.html", map[string]any{
		"S":            sum,
		"Operator":     viewer(c).operator,
		"QueueURL":     MonitoringRoot + "/queues/" + jobs.QueueAccounts,
		"TaskURL":      MonitoringRoot + "/queues/" + jobs.QueueAccounts + "/tasks/",
		"Query":        c.Request.URL.RawQuery,
		"TopErrorsMax": progress.TopErrors,
	})
}

// summaryJSON is GET /migration/{supplier}/summary.json, for the page's
// refresh, scripts and alerting (api/openapi.yaml).
func (m *migrationPage) summaryJSON(c *gin.Context) {
	sum, ok := m.summary(c)
	if !ok {
		return
	}
	writeJSON(c, http.StatusOK, sum)
}

func (m *migrationPage) render(c *gin.Context, name string, data map[string]any) {
	var b strings.Builder
	if err := migrationPages.ExecuteTemplate(&b, name, data); err != nil {
		writeError(c, err)
		return
	}
	c.Data(http.StatusOK, "text/html; charset=utf-8", []byte(b.String()))
}
