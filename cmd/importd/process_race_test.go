package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// A dry run and a real E5 for one account, sent at the same moment: each
// answers at once with its documented status. The real one creates the
// account (201); the dry run answers its rolled-back 400 when it ran first,
// and the already-imported 400 when the real one won. Neither waits for an
// outcome that never comes (PROCESS_WAIT_TIMEOUT) to answer "still in
// progress".
func TestProcess_DryRunRacingARealRunAnswersPromptly(t *testing.T) {
	t.Parallel()
	const rounds = 10
	// Long, so that the bound below (half of it) is generous for a loaded
	// machine and still tells a prompt answer from a wait that ran out.
	const wait = time.Minute
	s := startService(t, "serve", map[string]string{"PROCESS_WAIT_TIMEOUT": wait.String()})
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	for round := range rounds {
		s.stage(t, tok, fixture(t, fmt.Sprintf("ACC-PAIR-%d", round)))
	}
	outcomes := map[string]int{}
	for round := range rounds {
		ean := fmt.Sprintf("ACC-PAIR-%d", round)
		var dry, real response
		var dryTook, realTook time.Duration
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			t0 := time.Now()
			dry = s.do(t, "POST", processPath, tok, processBody(ean, true))
			dryTook = time.Since(t0)
		})
		wg.Go(func() {
			<-start
			t0 := time.Now()
			real = s.do(t, "POST", processPath, tok, processBody(ean, false))
			realTook = time.Since(t0)
		})
		close(start)
		wg.Wait()
		if real.Status != 201 {
			t.Fatalf("%s real run: %d %s", ean, real.Status, real.Raw)
		}
		number := real.Body["service_account_number"]
		switch {
		case dry.Status == 400 && dry.Body["code"] == "dry_run_rolled_back":
		case dry.Status == 400 && dry.Body["code"] == "account_import_process_already_imported" &&
			dry.Body["external_account_number"] == ean && dry.Body["service_account_number"] == number:
		default:
			t.Errorf("%s dry run: %d %s", ean, dry.Status, dry.Raw)
		}
		outcomes[fmt.Sprint(dry.Body["code"])]++
		// The bound leaves room for a loaded machine; the failure it
		// catches waits the whole PROCESS_WAIT_TIMEOUT.
		if dryTook > wait/2 || realTook > wait/2 {
			t.Errorf("%s: the dry run took %v and the real one %v; the wait timeout is %v", ean, dryTook, realTook, wait)
		}
	}
	if n := s.count(t, `SELECT count(*) FROM accounts`); n != rounds {
		t.Errorf("%d accounts created, want %d", n, rounds)
	}
	t.Logf("dry run answers: %v", outcomes)
}

// A dry run that joins the dry run of the same account which has just
// announced its outcome, before Asynq marks that task finished, answers the
// outcome at once: it subscribed too late to hear it, and a dry run leaves
// nothing in PostgreSQL to read instead.
func TestProcess_DryRunJoiningATaskThatHasJustEndedAnswersItsOutcome(t *testing.T) {
	t.Parallel()
	const wait = time.Minute // as in TestProcess_DryRunRacingARealRunAnswersPromptly
	s := startService(t, "api", map[string]string{"PROCESS_WAIT_TIMEOUT": wait.String()})
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-DRY-ENDED"))
	var processID, supplierID, teamID int64
	_ = s.db.Get(&processID, `SELECT id FROM import_processes WHERE external_account_number = 'ACC-DRY-ENDED'`)
	_ = s.db.Get(&supplierID, `SELECT id FROM import_suppliers WHERE code = 'DEMO'`)
	_ = s.db.Get(&teamID, `SELECT id FROM operations_teams WHERE name = 'Ops'`)
	// The task is still listed (no worker runs in "api" mode) and has
	// announced its end, as a worker's finish does just before Asynq marks
	// the task completed.
	p := jobs.AccountProcessPayload{ProcessID: processID, SupplierID: supplierID, SupplierCode: "DEMO",
		ExternalAccountNumber: "ACC-DRY-ENDED", OperationsTeamID: teamID, DryRun: true}
	task, err := jobs.NewAccountProcessTask(p)
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(mustRedisOpt(t, s.env["REDIS_URL"]))
	defer client.Close()
	if _, err := client.Enqueue(task); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(mustRedisOptions(t, s.env["REDIS_URL"]))
	defer rdb.Close()
	taskID := jobs.AccountTaskID("DEMO", "ACC-DRY-ENDED", true)
	if err := taskwait.Publish(context.Background(), rdb, taskID, map[string]string{"outcome": "dry_run_succeeded"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := s.do(t, "POST", processPath, tok, processBody("ACC-DRY-ENDED", true))
	if r.Status != 400 || r.Body["code"] != "dry_run_rolled_back" {
		t.Fatalf("dry run joining an ended task: %d %s", r.Status, r.Raw)
	}
	if d := time.Since(start); d > wait/2 {
		t.Errorf("the dry run took %v: it waited for an announcement already made", d)
	}
}
