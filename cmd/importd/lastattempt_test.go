package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/admin"
)

// lastAttemptTask queues ean's account:process task as E5 does (the row
// IN_PROGRESS and naming the task), but with maxRetry retries, so that a
// test reaches the task's last attempt without waiting out the real
// retries' back-off. An E5 called afterwards joins this task.
func lastAttemptTask(t *testing.T, s *service, ean string, maxRetry int) {
	t.Helper()
	p := jobs.AccountProcessPayload{SupplierCode: "DEMO", ExternalAccountNumber: ean}
	if err := s.db.QueryRow(`SELECT p.id, p.supplier_id, (SELECT id FROM operations_teams WHERE name = 'Ops')
		FROM import_processes p WHERE p.external_account_number = $1`, ean).Scan(&p.ProcessID, &p.SupplierID, &p.OperationsTeamID); err != nil {
		t.Fatal(err)
	}
	taskID := jobs.AccountTaskID("DEMO", ean, false)
	if _, err := s.db.Exec(`UPDATE import_processes SET status = 'IN_PROGRESS', task_id = $2, updated_at = now() WHERE id = $1`,
		p.ProcessID, taskID); err != nil {
		t.Fatal(err)
	}
	task, err := jobs.NewAccountProcessTask(p)
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(mustRedisOpt(t, s.env["REDIS_URL"]))
	defer client.Close()
	if _, err := client.Enqueue(task, asynq.MaxRetry(maxRetry)); err != nil {
		t.Fatal(err)
	}
}

// processRow is what a test reads of an account's import process.
type processRow struct {
	Status    string  `db:"status"`
	LastError *string `db:"last_error"`
}

func (s *service) process(t *testing.T, ean string) processRow {
	t.Helper()
	var r processRow
	if err := s.db.Get(&r, `SELECT status, last_error::text AS last_error FROM import_processes WHERE external_account_number = $1`, ean); err != nil {
		t.Fatal(err)
	}
	return r
}

// A task still running on its last attempt when its worker stops (SIGTERM,
// SHUTDOWN_TIMEOUT) is handed back to the queue by Asynq without using up
// an attempt. It has not failed: no failure is recorded on the process row,
// the waiting E5 is not told one, and once a worker runs the task again the
// account is created once and the waiting E5 gets its 201. Before, the
// cancelled handler took its own cancellation for a failure after retries
// and, when it wrote that before its process exited, the row showed UNKNOWN
// with internal_error and the waiting E5 answered 500, for an account the
// requeued task then created. Here the process usually exits first, so this
// test passed before too; the worker package's
// TestAccountTask_CancelledOnItsLastAttemptRecordsAFailureOnlyWhenItWillNotRunAgain
// keeps the handler's process alive and fails without the fix.
//
// Two places where the task can be running: before its transaction
// (validating against the catalogue) and inside it (inserting the account).
// The worker has one database connection, so the test's first account
// prepares the statements on it and the held lock stops the task where the
// case says.
func TestShutdown_TaskHandedBackOnItsLastAttemptIsNoFailure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// lock, taken in a transaction the test holds, stops the worker.
		lock string
		// blockedIn is a fragment of the statement the worker then waits in.
		blockedIn string
	}{
		{name: "before its transaction", lock: `LOCK TABLE business_contracts IN ACCESS EXCLUSIVE MODE`, blockedIn: "business_contracts"},
		{name: "inside its transaction", lock: `LOCK TABLE accounts IN SHARE MODE`, blockedIn: "INSERT INTO accounts"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startService(t, "api", map[string]string{"PROCESS_WAIT_TIMEOUT": "60s"})
			seedDemo(t, s, admin.Supplier{})
			tok := s.accessToken(t, s.newKey(t, "k"))
			warm, ean := fmt.Sprintf("ACC-HB-WARM-%d", i), fmt.Sprintf("ACC-HB-%d", i)
			s.stage(t, tok, fixture(t, warm))
			s.stage(t, tok, fixture(t, ean))
			logDir := t.TempDir()
			w := startProc(t, logDir, "worker", importdBinary(t), []string{"worker"},
				mergeEnv(s.env, map[string]string{"HTTP_ADDR": "127.0.0.1:0", "SHUTDOWN_TIMEOUT": "1s", "DB_MAX_CONNS": "1", "LOG_LEVEL": "info"}))
			t.Cleanup(func() { w.signal(syscall.SIGKILL); w.wait(10 * time.Second) })
			if r := s.do(t, "POST", processPath, tok, processBody(warm, false)); r.Status != 201 {
				t.Fatalf("E5 of the first account: %d %s", r.Status, r.Raw)
			}

			hold, err := s.db.Beginx()
			if err != nil {
				t.Fatal(err)
			}
			defer hold.Rollback()
			if _, err := hold.Exec(tc.lock); err != nil {
				t.Fatal(err)
			}
			lastAttemptTask(t, s, ean, 0)
			answer := e5InFlight(s, tok, ean)
			rdb := redis.NewClient(mustRedisOptions(t, s.env["REDIS_URL"]))
			defer rdb.Close()
			waitFor(t, "the worker blocked and E5 waiting", 20*time.Second, func() bool {
				chans, err := rdb.PubSubChannels(context.Background(), "*").Result()
				return err == nil && len(chans) > 0 && s.count(t, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock' AND strpos(query, $1) > 0`, tc.blockedIn) == 1
			})

			w.signal(syscall.SIGTERM)
			if !w.wait(10 * time.Second) {
				t.Fatal("the worker did not exit within 10s of SIGTERM (SHUTDOWN_TIMEOUT 1s)")
			}
			if code := w.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("the worker exited with %d after SIGTERM, want 0", code)
			}
			insp := asynq.NewInspector(mustRedisOpt(t, s.env["REDIS_URL"]))
			defer insp.Close()
			info, err := insp.GetTaskInfo(jobs.QueueAccounts, jobs.AccountTaskID("DEMO", ean, false))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fmt.Sprintf("%s, retried %d of %d", info.State, info.Retried, info.MaxRetry), "pending, retried 0 of 0"; got != want {
				t.Errorf("the task after the worker stopped: %s, want %s", got, want)
			}
			// A failure the stopped worker recorded or announced would show
			// by now: it recorded it within milliseconds of handing back.
			time.Sleep(time.Second)
			if r := s.process(t, ean); r.Status != "IN_PROGRESS" || r.LastError != nil {
				t.Errorf("process after the hand-back: %s %v, want IN_PROGRESS without last_error", r.Status, deref(r.LastError))
			}
			select {
			case r := <-answer:
				t.Fatalf("the waiting E5 answered %d %s after the hand-back, before any worker ran the task again", r.Status, r.Raw)
			default:
			}

			_ = hold.Rollback()
			startWorker(t, s.env)
			select {
			case r := <-answer:
				if r.Status != 201 || !serviceNumberRE.MatchString(fmt.Sprint(r.Body["service_account_number"])) {
					t.Fatalf("the waiting E5 got %d %s, want 201", r.Status, r.Raw)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the waiting E5 had no answer 30s after a new worker started")
			}
			if n := s.count(t, `SELECT count(*) FROM accounts WHERE external_account_number = $1`, ean); n != 1 {
				t.Errorf("%d accounts, want 1", n)
			}
			if r := s.process(t, ean); r.Status != "COMPLETED" || r.LastError != nil {
				t.Errorf("process at the end: %s %v, want COMPLETED", r.Status, deref(r.LastError))
			}
			if t.Failed() {
				log, _ := os.ReadFile(filepath.Join(logDir, "worker.log"))
				t.Logf("stopped worker's log:\n%s", log)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return strings.TrimSpace(*s)
}

// pgProxy forwards TCP connections to PostgreSQL until it is cut; cut, it
// breaks every open connection and closes new ones at once, as a database
// out of reach does to one process while the others still reach it.
type pgProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
}

func startPGProxy(t *testing.T, target string) *pgProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *pgProxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.mu.Unlock()
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(u, c); u.Close(); c.Close() }()
	_, _ = io.Copy(c, u)
	c.Close()
	u.Close()
}

func (p *pgProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}

// An account whose task runs out of attempts because the worker cannot
// reach PostgreSQL (out of reach for longer than every retry) does not stay
// IN_PROGRESS: once the database is back, the sweep records the failure
// after retries (internal_error, the service's failure) that the handler
// could not write, the waiting E5 answers it as a 500 with Retry-After,
// and calling E5 again creates the account once. Before, the row was
// recorded as account_processing_abandoned, whose detail says the worker
// died.
func TestProcess_DatabaseOutOfReachForEveryAttemptIsRecordedAsAFailureAfterRetries(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", map[string]string{"PROCESS_WAIT_TIMEOUT": "60s"})
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	const warm, ean = "ACC-DBOUT-WARM", "ACC-DBOUT"
	s.stage(t, tok, fixture(t, warm))
	s.stage(t, tok, fixture(t, ean))
	dbURL, err := url.Parse(s.env["DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	proxy := startPGProxy(t, dbURL.Host)
	dbURL.Host = proxy.ln.Addr().String()
	startWorker(t, mergeEnv(s.env, map[string]string{"DATABASE_URL": dbURL.String()}))
	if r := s.do(t, "POST", processPath, tok, processBody(warm, false)); r.Status != 201 {
		t.Fatalf("E5 of the first account: %d %s", r.Status, r.Raw)
	}

	proxy.setCut(true)
	lastAttemptTask(t, s, ean, 1) // two attempts, one second apart
	answer := e5InFlight(s, tok, ean)
	insp := asynq.NewInspector(mustRedisOpt(t, s.env["REDIS_URL"]))
	defer insp.Close()
	waitFor(t, "the task archived after its last attempt", 30*time.Second, func() bool {
		info, err := insp.GetTaskInfo(jobs.QueueAccounts, jobs.AccountTaskID("DEMO", ean, false))
		return err == nil && info.State == asynq.TaskStateArchived
	})
	if r := s.process(t, ean); r.Status != "IN_PROGRESS" {
		t.Fatalf("process %s %s while the worker could not reach the database", r.Status, deref(r.LastError))
	}

	proxy.setCut(false)
	var rec struct{ Code, Detail string }
	waitFor(t, "the failure recorded once the database is back", 20*time.Second, func() bool {
		r := s.process(t, ean)
		return r.Status == "UNKNOWN" && r.LastError != nil && json.Unmarshal([]byte(*r.LastError), &rec) == nil
	})
	want := struct{ Code, Detail string }{"internal_error", "Account creation failed after retries; see the service logs. Call E5 again to retry."}
	if diff := cmp.Diff(want, rec); diff != "" {
		t.Errorf("recorded failure (-want +got):\n%s", diff)
	}
	select {
	case r := <-answer:
		if r.Status != 500 || r.Body["code"] != "internal_error" || r.Header.Get("Retry-After") == "" {
			t.Errorf("the waiting E5 got %d %s (Retry-After %q), want 500 internal_error with Retry-After", r.Status, r.Raw, r.Header.Get("Retry-After"))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting E5 had no answer 10s after the failure was recorded")
	}
	if r := s.do(t, "POST", processPath, tok, processBody(ean, false)); r.Status != 201 {
		t.Fatalf("E5 again once the database is back: %d %s", r.Status, r.Raw)
	}
	if n := s.count(t, `SELECT count(*) FROM accounts WHERE external_account_number = $1`, ean); n != 1 {
		t.Errorf("%d accounts, want 1", n)
	}
}
