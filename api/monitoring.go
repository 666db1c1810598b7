package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"

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
}

// MonitoringRoot is where the dashboard is mounted.
const MonitoringRoot = "/monitoring"

// Monitoring returns the Asynqmon dashboard behind HTTP basic auth, for
// mounting at MonitoringRoot.
func Monitoring(cfg MonitoringConfig) http.Handler {
	h := asynqmon.New(asynqmon.Options{RootPath: MonitoringRoot, RedisConnOpt: cfg.Redis, ReadOnly: cfg.ReadOnly})
	// Compare hashes so that the comparison takes the same time whatever the
	// lengths of the guesses.
	wantUser, wantPass := sha256.Sum256([]byte(cfg.User)), sha256.Sum256([]byte(cfg.Password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		gotUser, gotPass := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		if !ok || subtle.ConstantTimeCompare(gotUser[:], wantUser[:])&subtle.ConstantTimeCompare(gotPass[:], wantPass[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="monitoring", charset="UTF-8"`)
			writeProblem(w, problem.New(problem.Unauthenticated, "not_authenticated", "Monitoring needs the MONITORING_USER credentials."))
			return
		}
		h.ServeHTTP(w, r)
	})
}
