package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/payment/vendorsim"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// Vendors of every bundle, each a simulator of its own behaviour. Their
// timeouts and backoffs are short so that the tests are fast.
const (
	vendorOK    = "SIM_OK"    // answers at once
	vendorFlaky = "SIM_FLAKY" // 503 twice per reference, then answers
	vendorDown  = "SIM_DOWN"  // always 503
	vendorSlow  = "SIM_SLOW"  // answers after 2 s; the vendor's timeout is 150 ms
	vendorGone  = "SIM_GONE"  // nothing listens at its address
)

const testAttempts = 3

// testInstructions is what the simulators serve: CARD-0 .. CARD-99 (CARD,
// ACTIVE, with details), DD-1 (DIRECT_DEBIT) and SO-1 (STANDING_ORDER, a
// type the spec does not list).
// longReference has the reference's maxLength of a reference, 512.
var longReference = "CARD-" + strings.Repeat("7", 507)

func testInstructions() []byte {
	var list []map[string]any
	for i := range 100 {
		list = append(list, map[string]any{"reference": fmt.Sprintf("CARD-%d", i), "type": TypeCard, "status": "ACTIVE",
			"last4": "4242", "expiry": "2027-08", "limits": map[string]any{"daily": 250.00}})
	}
	list = append(list, map[string]any{"reference": "DD-1", "type": TypeDirectDebit, "status": "ACTIVE", "mandate_id": "MD-1"})
	list = append(list, map[string]any{"reference": "SO-1", "type": "STANDING_ORDER", "status": "ACTIVE"})
	list = append(list, map[string]any{"reference": longReference, "type": TypeCard, "status": "ACTIVE"})
	b, _ := json.Marshal(list)
	return b
}

type bundle struct {
	db  *db.DB
	rdb redis.UniversalClient
	svc *Service
	// tasks is how svc waits on the verification tasks.
	tasks *taskwait.Tasks
	sims  map[string]*vendorsim.Simulator
	// supplier DEMO's id, and OTHER's
	demo, other int64
	team        int64
	seq         atomic.Int64
}

// setup returns a fresh database and Redis database with suppliers DEMO,
// OTHER and HIDDEN (which the caller may not see), the vendors above, a
// running verification worker when worker is true, and the API side.
func setup(t *testing.T, worker bool) *bundle {
	t.Helper()
	d := dbtest.New(t)
	redisURL := dbtest.NewRedis(t)
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()

	b := &bundle{db: d, rdb: rdb, sims: map[string]*vendorsim.Simulator{}}
	if err := d.Get(&b.demo, `INSERT INTO import_suppliers (code) VALUES ('DEMO') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	if err := d.Get(&b.other, `INSERT INTO import_suppliers (code) VALUES ('OTHER') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	mustExec(t, d, `INSERT INTO import_suppliers (code) VALUES ('HIDDEN')`)
	if err := d.Get(&b.team, `INSERT INTO operations_teams (name) VALUES ('Ops') RETURNING id`); err != nil {
		t.Fatal(err)
	}

	instructions := testInstructions()
	for _, v := range []struct {
		name    string
		cfg     vendorsim.Config
		timeout time.Duration
	}{
		{vendorOK, vendorsim.Config{}, time.Second},
		{vendorFlaky, vendorsim.Config{FailFirst: 2}, time.Second},
		{vendorDown, vendorsim.Config{AlwaysFail: true}, time.Second},
		{vendorSlow, vendorsim.Config{Delay: 2 * time.Second}, 150 * time.Millisecond},
	} {
		v.cfg.Instructions = instructions
		sim, err := vendorsim.New(v.cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		b.sims[v.name] = sim
		if _, err := AddVendor(ctx, d, Vendor{Name: v.name, BaseURL: srv.URL, Timeout: v.timeout, Attempts: testAttempts, Backoff: 10 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	gone := httptest.NewServer(nil)
	gone.Close() // its port now refuses connections
	if _, err := AddVendor(ctx, d, Vendor{Name: vendorGone, BaseURL: gone.URL, Timeout: time.Second, Attempts: testAttempts, Backoff: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}

	if worker {
		ropt, err := asynq.ParseRedisURI(redisURL)
		if err != nil {
			t.Fatal(err)
		}
		srv := asynq.NewServer(ropt, asynq.Config{Concurrency: 20, Queues: map[string]int{jobs.QueueVendors: 1},
			TaskCheckInterval: 10 * time.Millisecond, LogLevel: asynq.FatalLevel})
		mux := asynq.NewServeMux()
		verifier := NewVerifier(d, rdb, slog.New(slog.DiscardHandler))
		mux.HandleFunc(jobs.TypePaymentInstructionVerify, func(ctx context.Context, task *asynq.Task) error {
			var p jobs.PaymentInstructionVerifyPayload
			if err := json.Unmarshal(task.Payload(), &p); err != nil {
				return err
			}
			return verifier.Run(ctx, p)
		})
		if err := srv.Start(mux); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
	}
	log := slog.New(slog.DiscardHandler)
	hub := taskwait.NewHub(rdb)
	t.Cleanup(func() { hub.Close() })
	b.tasks = taskwait.NewTasks(rdb, hub, log, nil)
	b.svc = New(d, b.tasks, Config{QueueWait: time.Second, Log: log})
	return b
}

func mustExec(t *testing.T, d *db.DB, q string, args ...any) {
	t.Helper()
	if _, err := d.Exec(q, args...); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
}

// account inserts an imported account of the supplier, as E5 would have
// created it, linked to the contract when contract is not 0, and returns its
// service account number.
func (b *bundle) account(t *testing.T, supplier int64, external string, contract int64) string {
	t.Helper()
	number := fmt.Sprintf("A-%08X", b.seq.Add(1)+supplier<<20)
	var contractID *int64
	if contract != 0 {
		contractID = &contract
	}
	mustExec(t, b.db, `WITH p AS (
			INSERT INTO import_processes (supplier_id, external_account_number, payload, status, service_account_number, account_created_at)
			VALUES ($1, $2, '{}', 'COMPLETED', $3, now()) RETURNING id)
		INSERT INTO accounts (service_account_number, supplier_id, external_account_number, import_process_id,
			operations_team_id, business_contract_id, billing_country)
		SELECT $3, $1, $2, p.id, $4, $5, 'GB' FROM p`, supplier, external, number, b.team, contractID)
	return number
}

// staged inserts an import process that has not been created yet.
func (b *bundle) staged(t *testing.T, supplier int64, external string) {
	t.Helper()
	mustExec(t, b.db, `INSERT INTO import_processes (supplier_id, external_account_number, payload) VALUES ($1, $2, '{}')`, supplier, external)
}

// business inserts a business of the supplier with one contract and
// returns the contract's id.
func (b *bundle) business(t *testing.T, supplier int64, external, name, contract string) int64 {
	t.Helper()
	var id int64
	if err := b.db.Get(&id, `WITH b AS (
			INSERT INTO businesses (supplier_id, external_business_identifier, business_type, company_number, company_name)
			VALUES ($1, $2, 'LTD', '01234567', $3) RETURNING id, supplier_id)
		INSERT INTO business_contracts (business_id, supplier_id, identifier, valid_from_date)
		SELECT b.id, b.supplier_id, $4, '2024-01-01' FROM b RETURNING id`, supplier, external, name, contract); err != nil {
		t.Fatal(err)
	}
	return id
}

func visible(code string) bool { return code != "HIDDEN" }

func raw(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func asProblem(t *testing.T, err error) *problem.Error {
	t.Helper()
	p, ok := problem.As(err)
	if !ok {
		t.Fatalf("want a *problem.Error, got %v", err)
	}
	return p
}

func (b *bundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := b.db.Get(&n, q, args...); err != nil {
		t.Fatal(err)
	}
	return n
}
