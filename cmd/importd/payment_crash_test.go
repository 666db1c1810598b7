package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/payment"
	"github.com/bulkimport/bulkimport/jobs/payment/vendorsim"
)

// A worker process killed with SIGKILL while it verifies a payment
// instruction at a slow vendor stalls the waiting E9 requests for seconds,
// not the minute and more of Asynq's own recovery: they notice that the
// task's heartbeat stopped, queue it again, another worker stores the
// instruction once, and of six identical requests one answers 201 and the
// others payment_instruction_already_exists, as they would without the
// crash. The API process counts the takeover, and the killed worker's own
// task, once Asynq recovers it, ends as done rather than archived.
func TestPaymentInstruction_WorkerKilledMidVerificationIsTakenOver(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills a worker process and waits for a slow vendor; make test-long runs it")
	}
	s := startService(t, "api", nil)
	ctx := context.Background()
	if _, err := admin.CreateSupplier(ctx, s.db, admin.Supplier{Code: "PAY"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTeam(ctx, s.db, "ops"); err != nil {
		t.Fatal(err)
	}
	instructions, _ := json.Marshal([]map[string]any{{"reference": "CARD-KILL", "type": "CARD", "status": "ACTIVE", "last4": "4242"}})
	sim, err := vendorsim.New(vendorsim.Config{Instructions: instructions, Delay: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	if _, err := payment.AddVendor(ctx, s.db, payment.Vendor{Name: "SLOW", BaseURL: srv.URL, Timeout: 20 * time.Second,
		Attempts: 1, Backoff: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`
		WITH p AS (
			INSERT INTO import_processes (supplier_id, external_account_number, payload, status, service_account_number, account_created_at)
			SELECT id, 'PAY-KILL', '{}', 'COMPLETED', 'A-1000ABCD', now() FROM import_suppliers WHERE code = 'PAY' RETURNING id, supplier_id)
		INSERT INTO accounts (service_account_number, supplier_id, external_account_number, import_process_id, operations_team_id, billing_country)
		SELECT 'A-1000ABCD', p.supplier_id, 'PAY-KILL', p.id, (SELECT id FROM operations_teams WHERE name = 'ops'), 'GB' FROM p`); err != nil {
		t.Fatal(err)
	}
	tok := s.accessToken(t, s.newKey(t, "pay"))
	var logs lockedBuffer
	doomed := startWorkerProcess(t, s.env, &logs)

	const concurrent = 6
	body := map[string]any{"import_supplier": "PAY", "external_account_number": "PAY-KILL", "vendor": "SLOW",
		"reference": "CARD-KILL", "type": "CARD"}
	type answer struct {
		status int
		code   string
	}
	answers := make(chan answer, concurrent)
	var wg sync.WaitGroup
	for range concurrent {
		wg.Go(func() {
			r := s.do(t, http.MethodPost, pathE9, tok, body)
			code, _ := r.Body["code"].(string)
			answers <- answer{r.Status, code}
		})
	}
	// The doomed worker is inside the verification, waiting for the vendor.
	waitFor(t, "the doomed worker asking the vendor", 30*time.Second, func() bool { return sim.Requests("CARD-KILL") >= 1 })
	if err := doomed.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	killed := time.Now()
	_ = doomed.Wait()
	startWorker(t, s.env)
	wg.Wait()
	close(answers)
	stall := time.Since(killed)
	t.Logf("E9 answered %v after the worker was killed", stall)
	if stall > 45*time.Second {
		t.Errorf("E9 answered %v after the worker was killed, want well under Asynq's minute", stall)
	}
	counts := map[string]int{}
	for a := range answers {
		counts[fmt.Sprintf("%d %s", a.status, a.code)]++
	}
	want := map[string]int{"201 ": 1, "400 " + payment.CodeAlreadyExists: concurrent - 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("answers %v, want %v", counts, want)
	}
	if n := s.count(t, `SELECT count(*) FROM payment_instructions WHERE reference = 'CARD-KILL'`); n != 1 {
		t.Errorf("%d instructions stored, want 1", n)
	}
	m := scrapeMetrics(t, s.base+"/metrics")
	if got := m.value("importd_takeovers_total", map[string]string{"type": jobs.TypePaymentInstructionVerify}); got != 1 {
		t.Errorf("importd_takeovers_total of the verification: %v, want 1", got)
	}
	insp := asynq.NewInspector(mustRedisOpt(t, s.env["REDIS_URL"]))
	defer insp.Close()
	// The killed worker's task is still in Asynq's active set until its
	// lease expires and the recoverer, which runs every minute, retries it
	// (or, without a retry left, archives it as failed: "task lease
	// expired", a failure that did not happen). Its retry finds the
	// instruction stored and ends as done, without asking the vendor.
	asked := sim.Requests("CARD-KILL")
	waitFor(t, "the killed worker's task recovered and ended", 3*time.Minute, func() bool {
		for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){insp.ListActiveTasks, insp.ListRetryTasks, insp.ListPendingTasks} {
			if tasks, err := list(jobs.QueueVendors); err != nil || len(tasks) > 0 {
				return false
			}
		}
		return true
	})
	if archived, err := insp.ListArchivedTasks(jobs.QueueVendors); err != nil || len(archived) > 0 {
		for _, a := range archived {
			t.Errorf("archived verification task %s (%s) for an instruction that was stored", a.ID, a.LastErr)
		}
		if err != nil {
			t.Error(err)
		}
	}
	if n := sim.Requests("CARD-KILL"); n != asked {
		t.Errorf("the vendor was asked %d times after the instruction was stored, want 0", n-asked)
	}
	if n := s.count(t, `SELECT count(*) FROM payment_instructions WHERE reference = 'CARD-KILL'`); n != 1 {
		t.Errorf("%d instructions stored after the recovery, want 1", n)
	}
	if t.Failed() {
		t.Logf("killed worker's log:\n%s", logs.String())
	}
}
