package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"

	"github.com/bulkimport/bulkimport/jobs/auth"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// MonitoringConfig configures the Asynqmon dashboard.
type MonitoringConfig struct {
	Redis    asynq.RedisConnOpt
	User     string
	Password string
	// ReadOnly makes Asynqmon (v0.7.2) refuse every non-GET call to its API
	// with 405, so that nothing can pause, delete, retry, run, archive or
	// cancel through the dashboard; its UI also hides those buttons.
	ReadOnly bool
	// Limiter counts wrong logins per client address, as it counts wrong
	// API keys and tokens, and refuses them with 429 once over its limit;
	// nil counts nothing. The client address is the one the router stored
	// (auth.WithClientAddr, which follows TRUSTED_PROXIES), else the
	// connection's.
	Limiter *auth.FailureLimiter
}

// MonitoringRoot is where the dashboard is mounted.
const MonitoringRoot = "/monitoring"

// Monitoring returns the Asynqmon dashboard behind HTTP basic auth, for
// mounting at MonitoringRoot behind withClientAddr, whose address the
// failed-login limit counts.
func Monitoring(cfg MonitoringConfig) http.Handler {
	h := withoutExternalFonts(asynqmon.New(asynqmon.Options{RootPath: MonitoringRoot, RedisConnOpt: cfg.Redis, ReadOnly: cfg.ReadOnly}))
	return RequireLogin(cfg.User, cfg.Password, cfg.Limiter, "monitoring", "Monitoring needs the MONITORING_USER credentials.", h)
}

// RequireLogin serves h to the HTTP basic-auth login user:password alone.
// Wrong logins count against the client address in limiter (nil counts
// nothing) and get 429 once over its limit; a missing or wrong login gets
// the section 7 401 with detail and a challenge of realm, so that a browser
// asks for the login.
func RequireLogin(user, password string, limiter *auth.FailureLimiter, realm, detail string, h http.Handler) http.Handler {
	// Compare hashes so that the comparison takes the same time whatever the
	// lengths of the guesses.
	wantUser, wantPass := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, given := r.BasicAuth()
		right := func() bool {
			gotUser, gotPass := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
			return subtle.ConstantTimeCompare(gotUser[:], wantUser[:])&subtle.ConstantTimeCompare(gotPass[:], wantPass[:]) == 1
		}
		ok := false
		if given {
			var err error
			ok, err = limiter.CheckLogin(r.Context(), u+":"+p, right)
			if pe, isProblem := problem.As(err); isProblem {
				writeProblem(w, pe)
				return
			}
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="`+realm+`", charset="UTF-8"`)
			code := auth.CodeNotAuthenticated
			if given {
				code = auth.CodeAuthenticationFailed
			}
			writeProblem(w, problem.New(problem.Unauthenticated, code, detail))
			return
		}
		h.ServeHTTP(w, r)
	})
}
