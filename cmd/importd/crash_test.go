package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/admin"
)

// A task that Asynq archives without running its handler (what its
// recoverer does on the last attempt of a task whose worker died) leaves a
// recorded failure, not an IN_PROGRESS row for ever: E10 stops saying
// IN_PROGRESS, E5 answers the failure as the service's, and a new E5
// processes the account.
func TestProcess_TaskArchivedWithoutItsHandlerIsRecordedAsAbandoned(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", map[string]string{"PROCESS_WAIT_TIMEOUT": "300ms"})
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-LOST"))
	if r := s.do(t, "POST", processPath, tok, processBody("ACC-LOST", false)); r.Status != 500 || r.Body["code"] != "account_processing_in_progress" {
		t.Fatalf("E5 without a worker: %d %s", r.Status, r.Raw)
	}
	insp := asynq.NewInspector(mustRedisOpt(t, s.env["REDIS_URL"]))
	defer insp.Close()
	if err := insp.ArchiveTask(jobs.QueueAccounts, jobs.AccountTaskID("DEMO", "ACC-LOST", false)); err != nil {
		t.Fatal(err)
	}
	startWorker(t, s.env)
	deadline := time.Now().Add(15 * time.Second)
	for {
		st := s.status(t, tok, "ACC-LOST")
		if st["status"] != "IN_PROGRESS" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("E10 still IN_PROGRESS after the task was archived: %v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := s.count(t, `SELECT count(*) FROM import_processes WHERE last_error->>'code' = 'account_processing_abandoned'`); n != 1 {
		t.Errorf("%d processes with the abandoned failure recorded, want 1", n)
	}
	// The wait of this service is short: the new E5 may answer before the
	// worker ends, so E10 tells when it did.
	s.do(t, "POST", processPath, tok, processBody("ACC-LOST", false))
	deadline = time.Now().Add(30 * time.Second)
	for s.status(t, tok, "ACC-LOST")["status"] != "COMPLETED" {
		if time.Now().After(deadline) {
			t.Fatalf("a new E5 never completed the account: %v", s.status(t, tok, "ACC-LOST"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A client that hangs up while E5 waits is a client's cancel: one info
// line with status 499, counted under 499 in the metrics, never an ERROR
// line or a 500.
func TestProcess_ClientHangingUpIsCountedAsACancelNotA500(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	s := startServiceLogging(t, "api", map[string]string{"LOG_LEVEL": "info"}, &logs) // no worker: E5 waits
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-HANGUP"))
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	body, _ := json.Marshal(processBody("ACC-HANGUP", false))
	req, _ := http.NewRequestWithContext(ctx, "POST", s.base+processPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Token "+tok)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("E5 answered %d before the client hung up", res.StatusCode)
	}
	var line map[string]any
	waitFor(t, "the request's log line", 30*time.Second, func() bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" && m["route"] == processPath {
				line = m
				return true
			}
		}
		return false
	})
	if line["status"] != float64(499) {
		t.Errorf("request logged with status %v, want 499", line["status"])
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("a client's hang-up was logged as an error:\n%s", logs.String())
	}
	m := scrapeMetrics(t, s.base+"/metrics")
	if got := m.value("importd_http_requests_total", map[string]string{"route": processPath, "status": "499"}); got != 1 {
		t.Errorf("E5 requests counted under 499: %v, want 1", got)
	}
	if got := m.value("importd_http_requests_total", map[string]string{"route": processPath, "status": "500"}); got != -1 {
		t.Errorf("E5 requests counted under 500: %v, want none", got)
	}
}

// crashWorkerEnv is set in the environment of a worker that a crash test
// starts as a process of its own (TestCrashHelper_WorkerProcess).
const crashWorkerEnv = "IMPORTD_CRASH_TEST_WORKER"

// TestCrashHelper_WorkerProcess is not a test of its own: startWorkerProcess
// runs the test binary again with crashWorkerEnv set, and this function
// then runs `importd worker` in that process, which the test can kill.
func TestCrashHelper_WorkerProcess(t *testing.T) {
	if os.Getenv(crashWorkerEnv) != "1" {
		t.Skip("the worker process of the crash tests")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, []string{"worker"}, os.Getenv, io.Discard, os.Stderr, nil); err != nil {
		t.Fatal(err)
	}
}

// startWorkerProcess starts `importd worker` with env as an operating system
// process of its own and returns it; the test's end kills it if it still
// runs. Its log goes to logs.
func startWorkerProcess(t *testing.T, env map[string]string, logs io.Writer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper_WorkerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashWorkerEnv+"=1", "HTTP_ADDR=127.0.0.1:0", "LOG_LEVEL=warn")
	for k, v := range env {
		if k != "HTTP_ADDR" && k != "LOG_LEVEL" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// post sends an E5 request from a goroutine other than the test's.
func post(base, tok string, body any) (int, map[string]any, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", base+processPath, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Token "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	var m map[string]any
	err = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m, err
}

// A worker process killed with SIGKILL while it creates accounts stalls
// them for seconds, not the minute and more of Asynq's own recovery (its
// lease, an allowance for clock skew and a recoverer run once a minute):
// the waiting E5 requests notice that the tasks' heartbeat
// stopped and queue them again, another worker creates each account once,
// and each request answers 201 with its account's number. While the worker
// is slow but alive (blocked on a lock), nothing is taken over. The takeover
// takes 5 to 10 s; the bound is generous for a loaded machine and still well
// under Asynq's own recovery, which cannot come before a minute.
func TestProcess_WorkerKilledMidTaskIsTakenOverBeforeAsynqRecovers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		// About 15 s, most of it the heartbeat's expiry; make test-long runs it.
		t.Skip("kills a worker process and waits for its accounts")
	}
	s := startService(t, "api", map[string]string{"PROCESS_WAIT_TIMEOUT": "60s"})
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	eans := []string{"ACC-KILL-1", "ACC-KILL-2", "ACC-KILL-3", "ACC-KILL-4"}
	for _, e := range eans {
		s.stage(t, tok, fixture(t, e))
	}
	// Inserting an account waits for this lock, so the worker's tasks stay
	// in their transactions, the process rows locked, until it is killed.
	hold, err := s.db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback()
	if _, err := hold.Exec(`LOCK TABLE accounts IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	doomed := startWorkerProcess(t, s.env, &logs)

	type answer struct {
		ean    string
		status int
		body   map[string]any
		err    error
	}
	answers := make(chan answer, len(eans))
	for _, e := range eans {
		go func() {
			status, body, err := post(s.base, tok, processBody(e, false))
			answers <- answer{e, status, body, err}
		}()
	}
	// Every task is running (its row IN_PROGRESS) and the worker is blocked
	// on the held lock. Not one waiter per task: the worker prepares its
	// statements once per connection, and preparing an INSERT into accounts
	// waits on the lock too, so tasks can also wait behind that preparation.
	waitFor(t, "the doomed worker's tasks blocked in their transactions", 30*time.Second, func() bool {
		return s.count(t, `SELECT count(*) FROM import_processes WHERE status = 'IN_PROGRESS'`) == len(eans) &&
			s.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) >= 1
	})
	time.Sleep(3 * time.Second) // a slow worker with its heartbeat is left alone
	if n := s.count(t, `SELECT count(*) FROM import_processes WHERE task_id LIKE '%-takeover-%'`); n != 0 {
		t.Fatalf("%d accounts of a live, slow worker were taken over", n)
	}

	if err := doomed.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	killed := time.Now()
	_ = doomed.Wait()
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}
	startWorker(t, s.env)
	waitFor(t, "every account created after the kill", 60*time.Second, func() bool {
		return s.count(t, `SELECT count(*) FROM accounts`) == len(eans)
	})
	stall := time.Since(killed)
	t.Logf("accounts created %v after the worker was killed", stall)
	if stall > 45*time.Second {
		t.Errorf("accounts created %v after the worker was killed, want well under Asynq's minute", stall)
	}
	for range eans {
		a := <-answers
		if a.err != nil || a.status != 201 {
			t.Errorf("E5 %s: %d %v %v", a.ean, a.status, a.body, a.err)
			continue
		}
		var number string
		if err := s.db.Get(&number, `SELECT service_account_number FROM accounts WHERE external_account_number = $1`, a.ean); err != nil || a.body["service_account_number"] != number {
			t.Errorf("E5 %s answered %v; the account's number is %q (%v)", a.ean, a.body, number, err)
		}
	}
	if n := s.count(t, `SELECT count(*) FROM import_processes WHERE status = 'COMPLETED'`); n != len(eans) {
		t.Errorf("%d accounts COMPLETED, want %d", n, len(eans))
	}
	if t.Failed() {
		t.Logf("killed worker's log:\n%s", logs.String())
	}
}

// A task that vanishes from Redis while E5 waits for it (Redis lost its
// data, or an operator deleted it) is queued again by the waiting E5 within
// seconds, and the request answers 201. The wait is long, so that the bound
// on the answer can be generous for a loaded machine and still tell a task
// queued again from a wait that ran out.
func TestProcess_TaskVanishedWhileE5WaitsIsQueuedAgain(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", map[string]string{"PROCESS_WAIT_TIMEOUT": "3m"})
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-VANISHED"))
	type answer struct {
		status int
		body   map[string]any
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		status, body, err := post(s.base, tok, processBody("ACC-VANISHED", false))
		answered <- answer{status, body, err}
	}()
	insp := asynq.NewInspector(mustRedisOpt(t, s.env["REDIS_URL"]))
	defer insp.Close()
	id := jobs.AccountTaskID("DEMO", "ACC-VANISHED", false)
	waitFor(t, "the task queued", 30*time.Second, func() bool {
		_, err := insp.GetTaskInfo(jobs.QueueAccounts, id)
		return err == nil
	})
	if err := insp.DeleteTask(jobs.QueueAccounts, id); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	startWorker(t, s.env)
	select {
	case a := <-answered:
		if a.err != nil || a.status != 201 {
			t.Fatalf("E5 after its task vanished: %d %v %v", a.status, a.body, a.err)
		}
		if d := time.Since(deleted); d > time.Minute {
			t.Errorf("E5 answered %v after its task vanished, want well within its 3m wait", d)
		}
		// The API process that queued the task again counts a takeover.
		m := scrapeMetrics(t, s.base+"/metrics")
		if got := m.value("importd_takeovers_total", map[string]string{"type": jobs.TypeAccountProcess}); got != 1 {
			t.Errorf("importd_takeovers_total after one takeover: %v, want 1", got)
		}
	case <-time.After(4 * time.Minute):
		t.Fatal("E5 did not answer after its task vanished")
	}
}
