package deploy

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// composeFile is the top-level compose file, relative to this package.
const composeFile = "../docker-compose.yml"

// importdServices are the compose services that run the importd image.
var importdServices = []string{"migrate", "api", "worker", "dashboard"}

// importdEnv is every environment variable that importd reads. The compose
// file passes all of them, so that a reader sees every knob in one place.
var importdEnv = []string{
	"DATABASE_URL", "DB_MAX_CONNS", "REDIS_URL", "HTTP_ADDR", "TOKEN_SECRET", "DOCUMENTS_URL",
	"PROCESS_CONCURRENCY_LIMIT", "WORKER_CONCURRENCY", "PROCESS_WAIT_TIMEOUT",
	"MONITORING_USER", "MONITORING_PASSWORD", "MONITORING_READ_ONLY",
	"METRICS_ADDR", "SMTP_URL", "MAX_BODY_BYTES", "SHUTDOWN_TIMEOUT", "LOG_LEVEL",
}

// loadCompose loads the compose file the way `docker compose` does, with
// interpolation and normalisation, but with an empty environment: the file's
// own defaults must be enough to make a valid project.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	p, err := loadComposeEnv(t, composeSecrets)
	if err != nil {
		t.Fatalf("load %s: %v", composeFile, err)
	}
	return p
}

// composeSecrets are the variables compose requires from the shell, with
// values made as the compose file says (importd refuses guessable ones).
var composeSecrets = []string{
	"TOKEN_SECRET=5b0c8e2f9a61d4473e8c0b9f12a6d5e7c3f48a9b0e1d2c6f7a8b9c0d1e2f3a4b",
	"MONITORING_USER=ops-7f3a9c21",
	"MONITORING_PASSWORD=9e4b1c7d2a8f6e0b3c5d7a9f1e2b4c6d",
	"POSTGRES_PASSWORD=c81f4a9e27d05b6e3f9a1c8d4b7e2f60",
}

func loadComposeEnv(t *testing.T, env []string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{composeFile},
		cli.WithWorkingDirectory(".."),
		cli.WithEnv(env),
		cli.WithInterpolation(true),
		cli.WithNormalization(true),
		cli.WithConsistency(true),
	)
	if err != nil {
		t.Fatalf("compose options for %s: %v", composeFile, err)
	}
	return opts.LoadProject(t.Context())
}

// The compose file once gave TOKEN_SECRET, the dashboard's login
// (MONITORING_USER=admin and its password) and POSTGRES_PASSWORD=importd
// public defaults. Now each must come from the shell, and compose refuses
// to start without it, naming the variable.
func TestCompose_SecretsHaveNoDefault(t *testing.T) {
	t.Parallel()
	for i, kv := range composeSecrets {
		name, _, _ := strings.Cut(kv, "=")
		env := append(slices.Clone(composeSecrets[:i]), composeSecrets[i+1:]...)
		_, err := loadComposeEnv(t, env)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: %v, want an error naming it", name, err)
		}
	}
}

// service returns the named service or fails the test.
func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("%s: service %q is missing", composeFile, name)
	}
	return s
}

func TestCompose_HasEveryService(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	for _, name := range []string{"postgres", "redis", "migrate", "api", "worker", "dashboard"} {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("%s: service %q is missing; have %v", composeFile, name, p.ServiceNames())
		}
	}
}

func TestCompose_ImportdServicesGetTheirEnvironment(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	for _, name := range importdServices {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := service(t, p, name)
			for _, key := range []string{"DATABASE_URL", "REDIS_URL"} {
				if v := s.Environment[key]; v == nil || *v == "" {
					t.Errorf("service %q: %s is not set", name, key)
				}
			}
			for _, key := range importdEnv {
				if _, ok := s.Environment[key]; !ok {
					t.Errorf("service %q: environment does not list %s (the shared x-importd-env block should)", name, key)
				}
			}
			if v := s.Environment["HTTP_ADDR"]; v == nil || *v != "0.0.0.0:8080" {
				t.Errorf("service %q: HTTP_ADDR = %v, want 0.0.0.0:8080: the loopback default is unreachable from outside the container", name, deref(v))
			}
			if s.Image == "" || s.Build == nil {
				t.Errorf("service %q: want both image and build (the Dockerfile), got image %q, build %v", name, s.Image, s.Build)
			}
		})
	}
}

func TestCompose_APIHasTokenSecret(t *testing.T) {
	t.Parallel()
	api := service(t, loadCompose(t), "api")
	v := api.Environment["TOKEN_SECRET"]
	if v == nil {
		t.Fatal("service \"api\": TOKEN_SECRET is not set")
	}
	if len(*v) < 32 {
		t.Errorf("service \"api\": default TOKEN_SECRET is %d bytes; importd refuses fewer than 32", len(*v))
	}
}

func TestCompose_ImportdServicesRunTheirSubcommand(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	for _, name := range importdServices {
		s := service(t, p, name)
		if want := []string{name}; !slices.Equal(s.Command, want) {
			t.Errorf("service %q: command = %q, want %q", name, s.Command, want)
		}
	}
}

func TestCompose_StopGracePeriodOutlastsShutdownTimeout(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	for _, name := range importdServices {
		s := service(t, p, name)
		v := s.Environment["SHUTDOWN_TIMEOUT"]
		if v == nil {
			t.Errorf("service %q: SHUTDOWN_TIMEOUT is not set", name)
			continue
		}
		shutdown, err := time.ParseDuration(*v)
		if err != nil {
			t.Errorf("service %q: SHUTDOWN_TIMEOUT %q: %v", name, *v, err)
			continue
		}
		// Docker's default is 10 s, after which it sends SIGKILL.
		grace := 10 * time.Second
		if s.StopGracePeriod != nil {
			grace = time.Duration(*s.StopGracePeriod)
		}
		if grace <= shutdown {
			t.Errorf("service %q: stop_grace_period %v must exceed SHUTDOWN_TIMEOUT %v, or Docker kills importd mid-drain", name, grace, shutdown)
		}
	}
}

func TestCompose_WorkerScales(t *testing.T) {
	t.Parallel()
	w := service(t, loadCompose(t), "worker")
	if w.ContainerName != "" {
		t.Errorf("service \"worker\": container_name %q stops `docker compose up --scale worker=N`", w.ContainerName)
	}
	if len(w.Ports) != 0 {
		t.Errorf("service \"worker\": publishes ports %v; a second replica could not bind them", w.Ports)
	}
	if w.Deploy == nil || w.Deploy.Replicas == nil || *w.Deploy.Replicas < 1 {
		t.Errorf("service \"worker\": deploy.replicas must be set and at least 1, got %+v", w.Deploy)
	}
}

func TestCompose_RedisAppendOnly(t *testing.T) {
	t.Parallel()
	r := service(t, loadCompose(t), "redis")
	i := slices.Index(r.Command, "--appendonly")
	if i < 0 || i+1 >= len(r.Command) || r.Command[i+1] != "yes" {
		t.Errorf("service \"redis\": command %q must contain --appendonly yes: queued tasks live only in Redis", r.Command)
	}
}

func TestCompose_DataServicesHaveHealthchecksAndVolumes(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	for _, name := range []string{"postgres", "redis"} {
		s := service(t, p, name)
		if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 || s.HealthCheck.Disable {
			t.Errorf("service %q: no healthcheck; services that wait for it being healthy would never start", name)
		}
		named := 0
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeVolume {
				continue
			}
			named++
			if _, ok := p.Volumes[v.Source]; !ok {
				t.Errorf("service %q: volume %q is not declared under top-level volumes", name, v.Source)
			}
		}
		if named == 0 {
			t.Errorf("service %q: no named volume; its data would not survive `docker compose down`", name)
		}
	}
	if hc := service(t, p, "postgres").HealthCheck; hc != nil && !slices.ContainsFunc(hc.Test, containsPgIsready) {
		t.Errorf("service \"postgres\": healthcheck %q does not run pg_isready", hc.Test)
	}
}

func TestCompose_MigrateRunsOnceBeforeTheAPI(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	m := service(t, p, "migrate")
	if m.Restart != types.RestartPolicyNo {
		t.Errorf("service \"migrate\": restart = %q, want %q: a one-shot job must not be restarted", m.Restart, types.RestartPolicyNo)
	}
	if dep, ok := m.DependsOn["postgres"]; !ok || dep.Condition != types.ServiceConditionHealthy {
		t.Errorf("service \"migrate\": depends_on postgres = %+v, want condition %s", dep, types.ServiceConditionHealthy)
	}
	for _, name := range []string{"api", "worker"} {
		s := service(t, p, name)
		dep, ok := s.DependsOn["migrate"]
		if !ok || dep.Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("service %q: depends_on migrate = %+v (present %v), want condition %s", name, dep, ok, types.ServiceConditionCompletedSuccessfully)
		}
		if dep, ok := s.DependsOn["redis"]; !ok || dep.Condition != types.ServiceConditionHealthy {
			t.Errorf("service %q: depends_on redis = %+v (present %v), want condition %s", name, dep, ok, types.ServiceConditionHealthy)
		}
	}
}

func TestCompose_PublishedPortsAreDistinct(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	seen := map[string]string{}
	for _, name := range p.ServiceNames() {
		for _, port := range p.Services[name].Ports {
			key := port.HostIP + ":" + port.Published
			if other, ok := seen[key]; ok {
				t.Errorf("services %q and %q both publish %s", other, name, key)
			}
			seen[key] = name
		}
	}
	for _, name := range []string{"api", "dashboard"} {
		if ports := service(t, p, name).Ports; len(ports) != 1 || ports[0].Target != 8080 {
			t.Errorf("service %q: ports = %+v, want one published port to container port 8080", name, ports)
		}
	}
}

func containsPgIsready(s string) bool {
	return slices.Contains(strings.Fields(s), "pg_isready")
}

func deref(p *string) string {
	if p == nil {
		return "<unset>"
	}
	return *p
}

// importd had no memory limit: a request could grow its heap until the
// container was killed. Each importd service now has a mem_limit and passes
// the same number as MEMORY_LIMIT, from which importd sets its Go memory
// limit.
func TestCompose_ImportdServicesKnowTheirMemoryLimit(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	for _, name := range importdServices {
		s := service(t, p, name)
		v := s.Environment["MEMORY_LIMIT"]
		if s.MemLimit <= 0 || v == nil || *v != strconv.FormatInt(int64(s.MemLimit), 10) {
			t.Errorf("service %q: mem_limit %d, MEMORY_LIMIT %v; want the same number of bytes", name, s.MemLimit, deref(v))
		}
	}
}
