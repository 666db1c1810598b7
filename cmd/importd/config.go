package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bulkimport/bulkimport/jobs/creation"
	"github.com/hibiken/asynq"
)

// Config is every setting of importd, read once from the environment at
// startup. Each field comes from one variable of the vars table below.
type Config struct {
	DatabaseURL             string
	DBMaxConns              int
	RedisURL                string
	Redis                   asynq.RedisConnOpt
	HTTPAddr                string
	TokenSecret             []byte
	SessionMaxAge           time.Duration
	TokenTTL                time.Duration
	DocumentsURL            string
	ProcessConcurrencyLimit int
	WorkerConcurrency       int
	AccountWriters          int
	AccountBatch            int
	ProcessWaitTimeout      time.Duration
	MonitoringUser          string
	MonitoringPassword      string
	MonitoringReadOnly      bool
	MigrationPagePerMinute  int
	MetricsAddr             string
	MetricsProfiles         bool
	SMTPURL                 string
	MaxBodyBytes            int64
	ReadHeaderTimeout       time.Duration
	BodyReadTimeout         time.Duration
	IdleTimeout             time.Duration
	StreamWriteTimeout      time.Duration
	MaxInFlightPerKey       int
	BodyMemory              int64
	MemoryLimit             int64
	AuthFailureLimit        int
	AuthFailureWindow       time.Duration
	TrustedProxies          []string
	ShutdownTimeout         time.Duration
	LogLevel                slog.Level
	LogFormat               LogFormat
}

// LogFormat is how log lines are written: JSON for collectors, text for a
// person at a terminal.
type LogFormat string

// The values of LOG_FORMAT.
const (
	LogJSON LogFormat = "json"
	LogText LogFormat = "text"
)

// need says which variables a subcommand requires.
type need int

const (
	needDB need = 1 << iota
	needRedis
	needToken
)

// variable describes one environment variable: its default, what it means,
// and how it is parsed into the Config. The help text and the configuration
// table of docs/operating.md are written from this table.
type variable struct {
	name, def, help string
	need            need
	set             func(c *Config, v string) error
}

var vars = []variable{
	{"DATABASE_URL", "", "PostgreSQL URL, e.g. postgres://user:pass@host:5432/db?sslmode=require", needDB, func(c *Config, v string) error {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return errors.New("must be a postgres:// URL")
		}
		if err := checkHostPorts(u.Host); err != nil {
			return err
		}
		c.DatabaseURL = v
		return nil
	}},
	{"DB_MAX_CONNS", "20", "maximum PostgreSQL connections per process for requests and jobs; one API key may run requests on half of them at once (the others wait); the API opens 4 more of its own for logins and tokens, and one for its NOTIFY listener", 0, func(c *Config, v string) error {
		return positiveInt(v, &c.DBMaxConns)
	}},
	{"REDIS_URL", "", "Redis URL: redis://[:pass@]host:port/db, rediss://..., redis-sentinel://[:pass@]host1:port,host2:port/db?master=NAME[&username=U][&password=P] (percent-encoded), or redis-cluster://[user:pass@]host1:port,host2:port", needRedis, func(c *Config, v string) error {
		opt, err := parseRedisURL(v)
		if err != nil {
			return err
		}
		c.RedisURL, c.Redis = v, opt
		return nil
	}},
	{"HTTP_ADDR", "127.0.0.1:8080", "address the HTTP server listens on (probes and /metrics for the worker)", 0, func(c *Config, v string) error {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return errors.New("must be host:port")
		}
		c.HTTPAddr = v
		return nil
	}},
	{"TOKEN_SECRET", "", "key that signs access tokens: at least 32 bytes, generated (about 80 bits that no word, name or pattern explains, and not another secret), e.g. openssl rand -hex 32", needToken, func(c *Config, v string) error {
		if len(v) < 32 {
			return fmt.Errorf("must be at least 32 bytes (got %d)", len(v))
		}
		c.TokenSecret = []byte(v)
		return nil
	}},
	{"SESSION_MAX_AGE", "720h", "longest a chain of refresh tokens may go on from the key's token request; then the API key must be presented again", 0, func(c *Config, v string) error {
		return positiveDuration(v, &c.SessionMaxAge)
	}},
	{"TOKEN_TTL", "60m", "lifetime of an access token; clients refresh it with their refresh token or API key", 0, func(c *Config, v string) error {
		return positiveDuration(v, &c.TokenTTL)
	}},
	{"DOCUMENTS_URL", "", "object storage bucket as a gocloud.dev/blob URL: file:///path locally, s3://bucket?region=... in production", 0, func(c *Config, v string) error {
		u, err := url.Parse(v)
		if err != nil || u.Scheme == "" {
			return errors.New("must be a bucket URL such as file:///var/lib/importd/documents")
		}
		c.DocumentsURL = v
		return nil
	}},
	{"PROCESS_CONCURRENCY_LIMIT", "0", "E5 limit: accounts queued or processing at once; 0 disables the limit", 0, func(c *Config, v string) error {
		return nonNegativeInt(v, &c.ProcessConcurrencyLimit)
	}},
	{"WORKER_CONCURRENCY", "10", "tasks a worker runs at once when PROCESS_CONCURRENCY_LIMIT is 0", 0, func(c *Config, v string) error {
		return positiveInt(v, &c.WorkerConcurrency)
	}},
	{"ACCOUNT_WRITERS", strconv.Itoa(creation.DefaultBatching.Writers), "transactions in which one worker creates accounts at once; one makes the fullest transactions, and the least CPU per account; keep the total over all workers under twice the database's cores", 0, func(c *Config, v string) error {
		return positiveInt(v, &c.AccountWriters)
	}},
	{"ACCOUNT_BATCH", strconv.Itoa(creation.DefaultBatching.Size), "most accounts one such transaction creates; each account is still all or nothing, and 1 gives every account a transaction of its own", 0, func(c *Config, v string) error {
		return positiveInt(v, &c.AccountBatch)
	}},
	{"PROCESS_WAIT_TIMEOUT", "30s", "how long E5 waits for its job before answering that it is still in progress", 0, func(c *Config, v string) error {
		return positiveDuration(v, &c.ProcessWaitTimeout)
	}},
	{"MONITORING_USER", "", "basic-auth user of the dashboard at /monitoring/; the dashboard is off when unset", 0, func(c *Config, v string) error {
		c.MonitoringUser = v
		return nil
	}},
	{"MONITORING_PASSWORD", "", "basic-auth password of the dashboard and the migration page: generated (about 60 bits that no word, name or pattern explains, and not the user name or another secret), e.g. openssl rand -hex 16", 0, func(c *Config, v string) error {
		c.MonitoringPassword = v
		return nil
	}},
	{"MONITORING_READ_ONLY", "true", "when true the dashboard cannot delete, retry or cancel tasks", 0, func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		c.MonitoringReadOnly = b
		return err
	}},
	{"MIGRATION_PAGE_PER_MINUTE", "120", "requests one viewer (API key or MONITORING_USER login) may make to the migration page per minute, in bursts of as many; more get 429 too_many_requests (the page refreshes every 5 s)", 0, func(c *Config, v string) error {
		return positiveInt(v, &c.MigrationPagePerMinute)
	}},
	{"METRICS_ADDR", "", "separate address for /metrics; when unset /metrics is served on HTTP_ADDR", 0, func(c *Config, v string) error {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return errors.New("must be host:port")
		}
		c.MetricsAddr = v
		return nil
	}},
	{"METRICS_PROFILES", "false", "when true METRICS_ADDR also serves Go's runtime profiles under /debug/pprof/ (go tool pprof http://METRICS_ADDR/debug/pprof/profile); needs METRICS_ADDR", 0, func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		c.MetricsProfiles = b
		return err
	}},
	{"SMTP_URL", "", "smtp://user:pass@host:port for migration e-mails; when unset e-mails are only recorded in the outbox", 0, func(c *Config, v string) error {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") {
			return errors.New("must be an smtp:// or smtps:// URL")
		}
		c.SMTPURL = v
		return nil
	}},
	{"MAX_BODY_BYTES", "10485760", "largest accepted request body; larger ones get 400 request_too_large", 0, func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return errors.New("must be a positive number of bytes")
		}
		c.MaxBodyBytes = n
		return nil
	}},
	{"HTTP_READ_HEADER_TIMEOUT", "10s", "longest a client may take to send a request's headers", 0, func(c *Config, v string) error {
		return positiveDuration(v, &c.ReadHeaderTimeout)
	}},
	{"HTTP_BODY_READ_TIMEOUT", "30s", "longest a client may take to send a request body; a slower one gets 400 request_body_timeout", 0, func(c *Config, v string) error {
		return positiveDuration(v, &c.BodyReadTimeout)
	}},
	{"HTTP_IDLE_TIMEOUT", "120s", "how long a keep-alive connection may wait for its next request", 0, func(c *Config, v string) error {
		return positiveDuration(v, &c.IdleTimeout)
	}},
	{"HTTP_STREAM_WRITE_TIMEOUT", "30s", "longest one write of a streamed list (E11-E13) may block; a client that reads slower is disconnected and its database connection freed", 0, func(c *Config, v string) error {
		return positiveDuration(v, &c.StreamWriteTimeout)
	}},
	{"MAX_IN_FLIGHT_PER_KEY", "64", "requests one API key may have in flight on a replica; more get 429 too_many_requests_in_flight", 0, func(c *Config, v string) error {
		return positiveInt(v, &c.MaxInFlightPerKey)
	}},
	{"BODY_MEMORY", "536870912", "bytes of memory that request bodies over 64 KiB may add to a replica while they are parsed and answered, each counted at twice what its parse holds (for its JSON values, not its size: a body of many small numbers costs far more than a string of the same size), since a finished request's memory stays in the heap until the collector runs; past it a large body waits up to HTTP_BODY_READ_TIMEOUT, then gets 429 too_many_large_requests", 0, func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 16<<20 {
			return errors.New("must be a number of bytes, at least 16777216 (16 MiB)")
		}
		c.BodyMemory = n
		return nil
	}},
	{"MEMORY_LIMIT", "", "the container's memory limit in bytes (deploy/k8s passes limits.memory, docker-compose.yml its mem_limit, make run 1 GiB); importd keeps its Go heap under 90% of it, collecting more often as it nears (as GOMEMLIMIT does; GOMEMLIMIT, when set, wins); unset: no limit", 0, func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 64<<20 {
			return errors.New("must be a number of bytes, at least 67108864 (64 MiB)")
		}
		c.MemoryLimit = n
		return nil
	}},
	{"AUTH_FAILURE_LIMIT", "20", "failed authentication attempts (wrong API key, token, refresh token or MONITORING_USER login) allowed per client address (not per key, so no one can lock a key out), counted in Redis across replicas; further attempts get 429 too_many_failed_attempts", 0, func(c *Config, v string) error {
		return positiveInt(v, &c.AuthFailureLimit)
	}},
	{"AUTH_FAILURE_WINDOW", "10m", "period of AUTH_FAILURE_LIMIT: past the limit one more attempt is allowed every period/limit, and failures are forgotten a period after the last one", 0, func(c *Config, v string) error {
		return positiveDuration(v, &c.AuthFailureWindow)
	}},
	{"TRUSTED_PROXIES", "", "comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For names the client address (for AUTH_FAILURE_LIMIT); when unset the connection's address is the client's, so behind an ingress or load balancer set it to the proxies' range, or every client shares the proxy's address and count", 0, func(c *Config, v string) error {
		for p := range strings.SplitSeq(v, ",") {
			p = strings.TrimSpace(p)
			if _, err := netip.ParsePrefix(p); err == nil {
				c.TrustedProxies = append(c.TrustedProxies, p)
				continue
			}
			if _, err := netip.ParseAddr(p); err != nil {
				return fmt.Errorf("%q is not an IP address or CIDR", p)
			}
			c.TrustedProxies = append(c.TrustedProxies, p)
		}
		return nil
	}},
	{"SHUTDOWN_TIMEOUT", "30s", "how long requests and jobs in flight may finish after SIGTERM", 0, func(c *Config, v string) error {
		return positiveDuration(v, &c.ShutdownTimeout)
	}},
	{"LOG_LEVEL", "info", "debug, info, warn or error", 0, func(c *Config, v string) error {
		return c.LogLevel.UnmarshalText([]byte(v))
	}},
	{"LOG_FORMAT", "json", "json (one object a line, for collectors) or text (key=value, for a terminal)", 0, func(c *Config, v string) error {
		switch f := LogFormat(strings.ToLower(v)); f {
		case LogJSON, LogText:
			c.LogFormat = f
			return nil
		}
		return errors.New("must be json or text")
	}},
}

// checkHostPorts refuses a URL host part that names several hosts with
// their ports (pg1:5432,pg2:5432). lib/pq splits a URL's host:port only
// for one host; of several it takes the ports for part of the names and
// dials "pg2:5432" as a host, which fails only at the first connection,
// and only once the first host is down. Several hosts take their ports, in
// the same order, in ?port= (docs/operating.md, "Running on many machines").
func checkHostPorts(host string) error {
	hosts := strings.Split(host, ",")
	if len(hosts) < 2 {
		return nil
	}
	for _, h := range hosts {
		// (url.Parse refuses bracketed IPv6 addresses in a list, so a colon
		// here is a port's.)
		if strings.Contains(h, ":") {
			return errors.New("several hosts take their ports in ?port=, in the same order (postgres://u@pg1,pg2/db?port=5432,5432&target_session_attrs=read-write), not beside each host")
		}
	}
	return nil
}

func positiveInt(v string, dst *int) error {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return errors.New("must be a positive integer")
	}
	*dst = n
	return nil
}

func nonNegativeInt(v string, dst *int) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return errors.New("must be 0 or a positive integer")
	}
	*dst = n
	return nil
}

func positiveDuration(v string, dst *time.Duration) error {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return errors.New("must be a positive duration such as 30s")
	}
	*dst = d
	return nil
}

// exampleSecrets are the values that docker-compose.yml and deploy/k8s once
// gave as defaults or placeholders: anyone can read them, so they sign
// nothing and guard nothing.
var exampleSecrets = map[string]bool{
	"local-only-token-secret-change-me-0123456789": true,
	"REPLACE_ME": true,
	"admin":      true,
}

// loadConfig reads every variable, applying defaults, and reports all
// problems at once, each naming its variable.
func loadConfig(getenv func(string) string, needs need) (*Config, error) {
	c := &Config{}
	var problems []string
	for _, v := range vars {
		val := strings.TrimSpace(getenv(v.name))
		if val == "" {
			if v.need&needs != 0 {
				problems = append(problems, v.name+": required but not set")
				continue
			}
			val = v.def
		}
		if val == "" {
			continue
		}
		if err := v.set(c, val); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", v.name, err))
		}
	}
	token := secret{"TOKEN_SECRET", string(c.TokenSecret)}
	password := secret{"MONITORING_PASSWORD", c.MonitoringPassword}
	user := secret{"MONITORING_USER", c.MonitoringUser}
	stores := c.storePasswords()
	if token.value != "" {
		if p := weakSecret(token, append([]secret{password, user}, stores...), minTokenSecretBits, "openssl rand -hex 32"); p != "" {
			problems = append(problems, p)
		}
	}
	if password.value != "" {
		if p := weakSecret(password, append([]secret{user, token}, stores...), minPasswordBits, "openssl rand -hex 16"); p != "" {
			problems = append(problems, p)
		}
	}
	if (c.MonitoringUser == "") != (c.MonitoringPassword == "") {
		problems = append(problems, "MONITORING_PASSWORD: MONITORING_USER and MONITORING_PASSWORD must be set together")
	}
	if c.MetricsProfiles && c.MetricsAddr == "" {
		problems = append(problems, "METRICS_PROFILES: needs METRICS_ADDR (profiles are served only on the metrics port)")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuration: %s", strings.Join(problems, "; "))
	}
	return c, nil
}

// storePasswords are the passwords in DATABASE_URL, REDIS_URL and
// SMTP_URL, which TOKEN_SECRET and MONITORING_PASSWORD must not repeat: the
// stores' passwords are read by more people and programs (a backup job, a
// connection string in a log) than importd's own secrets.
func (c *Config) storePasswords() []secret {
	var out []secret
	for _, u := range []struct{ name, url string }{{"DATABASE_URL", c.DatabaseURL}, {"SMTP_URL", c.SMTPURL}} {
		if parsed, err := url.Parse(u.url); err == nil && parsed.User != nil {
			if p, ok := parsed.User.Password(); ok {
				out = append(out, secret{"the password of " + u.name, p})
			}
		}
	}
	switch o := c.Redis.(type) {
	case asynq.RedisClientOpt:
		out = append(out, secret{"the password of REDIS_URL", o.Password})
	case asynq.RedisFailoverClientOpt:
		out = append(out, secret{"the password of REDIS_URL", o.Password}, secret{"the sentinel password of REDIS_URL", o.SentinelPassword})
	case asynq.RedisClusterClientOpt:
		out = append(out, secret{"the password of REDIS_URL", o.Password})
	}
	return out
}

// configHelp lists every variable with its default, for --help.
func configHelp() string {
	var b strings.Builder
	b.WriteString("Environment variables:\n")
	for _, v := range vars {
		def := v.def
		if v.need != 0 {
			def = "required"
		} else if def == "" {
			def = "unset"
		}
		fmt.Fprintf(&b, "  %-26s %s (default: %s)\n", v.name, v.help, def)
	}
	return b.String()
}

// toolVars are read by the local stack and the tools, not by importd: they
// appear in the configuration table of docs/operating.md after importd's
// own, and deploy/local/stack.sh env prints the ones the tools need.
var toolVars = []variable{
	{name: "STACK_PG_PORT", def: "55432", help: "local stack (deploy/local/stack.sh, make run): port of its PostgreSQL"},
	{name: "STACK_REDIS_PORT", def: "56379", help: "local stack: port of its Redis"},
	{name: "VENDOR_SIM_ADDR", def: "127.0.0.1:18090", help: "local stack: address of the demo payment vendor simulator that make run starts"},
}

// configTable renders the variables as the Markdown table between the
// config-table markers of docs/operating.md; TestDocs_ConfigTableMatchesCode
// checks it there, and with -update rewrites it.
func configTable() string {
	var b strings.Builder
	b.WriteString("| Variable | Default | Meaning |\n|---|---|---|\n")
	for _, v := range append(vars[:len(vars):len(vars)], toolVars...) {
		def := "`" + v.def + "`"
		switch {
		case v.need != 0:
			def = "required"
		case v.def == "":
			def = "unset"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.name, def, strings.ReplaceAll(v.help, "|", `\|`))
	}
	return b.String()
}
