package migrate_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/auth"
	"github.com/bulkimport/bulkimport/jobs/payment"
	"github.com/bulkimport/bulkimport/jobs/payment/vendorsim"
)

// The runner's tests run the real service as an OS process (the runner
// talks to it only over HTTP, as it would in production), built once per
// test binary.
var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func binaries(t testing.TB) (importd, importctl string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "runner-bin-")
		if buildErr != nil {
			return
		}
		gobin := "go"
		if _, err := exec.LookPath(gobin); err != nil {
			gobin = "/usr/local/go/bin/go"
		}
		cmd := exec.Command(gobin, "build", "-o", binDir+"/",
			"github.com/bulkimport/bulkimport/cmd/importd", "github.com/bulkimport/bulkimport/cmd/importctl")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out.String())
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "importd"), filepath.Join(binDir, "importctl")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

const testSecret = "f07fb65b08cc30ae81427df622b4e9ca91e1f6b70f5b97c5305f967c2a6649d7" // random: importd refuses secrets that are easy to guess

// service is a running `importd serve` with the catalogue that generated
// cohorts name, a payment vendor simulator and an API key.
type service struct {
	base  string
	redis string
	db    *db.DB
	key   string
	log   *bytes.Buffer
	pid   int // importd's, for the benchmark's CPU accounting
}

func startService(t testing.TB, extra map[string]string) *service {
	t.Helper()
	importd, _ := binaries(t)
	dbURL := dbtest.NewDatabase(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	env := map[string]string{
		"DATABASE_URL": dbURL, "REDIS_URL": dbtest.NewRedis(t), "HTTP_ADDR": addr,
		"TOKEN_SECRET": testSecret, "LOG_LEVEL": "error", "DB_MAX_CONNS": "10",
	}
	for k, v := range extra {
		env[k] = v
	}
	cmd := exec.Command(importd, "serve")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	s := &service{base: "http://" + addr, redis: env["REDIS_URL"], log: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.pid = cmd.Process.Pid
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		// The service's own shutdown is tested in cmd/importd; here it only
		// has to go, and the test's database and Redis go with it.
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("importd log:\n%s", s.log.String())
		}
	})
	started := time.Now()
	deadline := started.Add(60 * time.Second)
	for {
		res, err := http.Get(s.base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("importd did not become ready: %v\n%s", err, s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("importd ready in %s", time.Since(started).Round(time.Millisecond))
	if s.db, err = db.Open(context.Background(), dbURL, 2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.db.Close() })
	s.seed(t)
	return s
}

const team = "Ops"

// seed creates what generated cohorts name (cohort.Generate's defaults).
func (s *service) seed(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	sup, err := admin.CreateSupplier(ctx, s.db, admin.Supplier{Code: "DEMO"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTeam(ctx, s.db, team); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateProduct(ctx, s.db, "DEMO-PRODUCTS", cohort.Tariffs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`WITH b AS (INSERT INTO businesses (supplier_id, external_business_identifier, business_type, company_number, company_name)
		VALUES ($1, 'BIZ-1', 'LTD', '01234567', 'Hughes Ltd') RETURNING id)
		INSERT INTO business_contracts (business_id, supplier_id, identifier) SELECT id, $1, 'BC-2024-0042' FROM b`, sup.ID); err != nil {
		t.Fatal(err)
	}
	sim, err := vendorsim.New(vendorsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	vs := httptest.NewServer(sim)
	t.Cleanup(vs.Close)
	if _, err := payment.AddVendor(ctx, s.db, payment.Vendor{Name: "DEMO_PAY", BaseURL: vs.URL}); err != nil {
		t.Fatal(err)
	}
	if s.key, err = auth.CreateKey(ctx, s.db, "runner", "", auth.AllSuppliers()); err != nil {
		t.Fatal(err)
	}
}

func (s *service) count(t testing.TB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := s.db.Get(&n, q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// writeCohort generates a cohort file and returns its path and the invalid
// accounts.
func writeCohort(t testing.TB, opts cohort.Options) (string, []cohort.Expected) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cohort.ndjson")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := cohort.Generate(f, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, exp
}
