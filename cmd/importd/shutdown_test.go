package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/admin"
)

// e5InFlight calls E5 for ean in the background and returns its answer on
// the channel (status 0 and the error's text when the call failed).
func e5InFlight(s *service, tok, ean string) <-chan response {
	out := make(chan response, 1)
	body, _ := json.Marshal(processBody(ean, false))
	go func() {
		req, _ := http.NewRequest("POST", s.base+processPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Token "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- response{Raw: []byte(err.Error())}
			return
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		r := response{Status: res.StatusCode, Header: res.Header, Raw: raw}
		_ = json.Unmarshal(raw, &r.Body)
		out <- r
	}()
	return out
}

// taskState is the state of ean's account:process task in Asynq, or "" when
// there is none.
func taskState(t *testing.T, insp *asynq.Inspector, ean string) string {
	t.Helper()
	info, err := insp.GetTaskInfo(jobs.QueueAccounts, jobs.AccountTaskID("DEMO", ean, false))
	if err != nil {
		return ""
	}
	return info.State.String()
}

// SIGTERM on a worker lets the account it is creating finish when it can
// within SHUTDOWN_TIMEOUT, and otherwise hands the task back to the queue
// at the timeout, where another worker takes it at once: not after Asynq's
// one-to-two-minute recovery of a dead worker's tasks. Either way the worker
// exits cleanly within the timeout, and the waiting E5 gets its 201.
func TestShutdown_WorkerFinishesOrHandsBackItsTasks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name            string
		shutdownTimeout time.Duration
		// unlockAfter is when, after the SIGTERM, the worker's blocked
		// transaction may go on.
		unlockAfter   time.Duration
		wantAfterStop string // the task's state once the worker exited
	}{
		{name: "a task that ends within the timeout finishes", shutdownTimeout: 10 * time.Second, unlockAfter: 500 * time.Millisecond, wantAfterStop: "completed"},
		{name: "a task still running at the timeout is handed back", shutdownTimeout: time.Second, unlockAfter: -1, wantAfterStop: "pending"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startService(t, "api", map[string]string{"PROCESS_WAIT_TIMEOUT": "60s"})
			seedDemo(t, s, admin.Supplier{})
			tok := s.accessToken(t, s.newKey(t, "k"))
			ean := fmt.Sprintf("ACC-TERM-%d", i)
			s.stage(t, tok, fixture(t, ean))
			insp := asynq.NewInspector(mustRedisOpt(t, s.env["REDIS_URL"]))
			defer insp.Close()

			// No worker yet: E5 marks the process and queues its task.
			answer := e5InFlight(s, tok, ean)
			waitFor(t, "the task queued", 30*time.Second, func() bool { return taskState(t, insp, ean) == "pending" })
			// The worker will block on the process row inside its
			// transaction until unlock.
			tx, err := s.db.Beginx()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.Exec(`SELECT 1 FROM import_processes WHERE external_account_number = $1 FOR UPDATE`, ean); err != nil {
				t.Fatal(err)
			}
			w := startProc(t, t.TempDir(), "worker", importdBinary(t), []string{"worker"},
				mergeEnv(s.env, map[string]string{"HTTP_ADDR": "127.0.0.1:0", "SHUTDOWN_TIMEOUT": tc.shutdownTimeout.String(), "LOG_LEVEL": "warn"}))
			t.Cleanup(func() { w.signal(syscall.SIGKILL); w.wait(10 * time.Second) })
			waitFor(t, "the task active", 20*time.Second, func() bool { return taskState(t, insp, ean) == "active" })

			stopped := time.Now()
			w.signal(syscall.SIGTERM)
			if tc.unlockAfter >= 0 {
				time.Sleep(tc.unlockAfter)
				_ = tx.Rollback()
			}
			if !w.wait(tc.shutdownTimeout + 5*time.Second) {
				t.Fatalf("the worker did not exit within %v of SIGTERM (SHUTDOWN_TIMEOUT %v)", tc.shutdownTimeout+5*time.Second, tc.shutdownTimeout)
			}
			t.Logf("the worker exited %v after SIGTERM", time.Since(stopped).Round(time.Millisecond))
			if code := w.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("the worker exited with %d after SIGTERM, want 0", code)
			}
			if got := taskState(t, insp, ean); got != tc.wantAfterStop {
				t.Errorf("task %s after the worker stopped, want %s", got, tc.wantAfterStop)
			}
			_ = tx.Rollback()
			if tc.wantAfterStop == "pending" {
				startWorker(t, s.env)
			}
			select {
			case r := <-answer:
				if r.Status != 201 || !serviceNumberRE.MatchString(fmt.Sprint(r.Body["service_account_number"])) {
					t.Fatalf("the waiting E5 got %d %s, want 201", r.Status, r.Raw)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the waiting E5 had no answer 30s after the worker stopped")
			}
			if n := s.count(t, `SELECT count(*) FROM accounts WHERE external_account_number = $1`, ean); n != 1 {
				t.Errorf("%d accounts, want 1", n)
			}
		})
	}
}

// SIGTERM on the API closes its listener at once and answers the requests in
// flight: an E5 waiting for its account gets the 201 of the account created
// after the signal, and the API then exits cleanly.
func TestShutdown_APIAnswersRequestsInFlight(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	env := map[string]string{
		"DATABASE_URL": dbtest.NewDatabase(t), "REDIS_URL": dbtest.NewRedis(t), "TOKEN_SECRET": testSecret,
		"HTTP_ADDR": addr, "LOG_LEVEL": "warn", "DOCUMENTS_URL": "file://" + t.TempDir(),
		"PROCESS_WAIT_TIMEOUT": "60s", "SHUTDOWN_TIMEOUT": "30s",
	}
	logDir := t.TempDir()
	api := startProc(t, logDir, "api", importdBinary(t), []string{"api"}, env)
	t.Cleanup(func() { api.signal(syscall.SIGKILL); api.wait(10 * time.Second) })
	waitTCP(t, addr)
	s := &service{base: "http://" + addr, env: env}
	var err error
	if s.db, err = db.Open(context.Background(), env["DATABASE_URL"], 4); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.db.Close() })
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	s.stage(t, tok, fixture(t, "ACC-INFLIGHT"))

	// No worker yet: the request waits for its account.
	answer := e5InFlight(s, tok, "ACC-INFLIGHT")
	waitFor(t, "E5 waiting", 30*time.Second, func() bool {
		return s.count(t, `SELECT count(*) FROM import_processes WHERE status = 'IN_PROGRESS'`) == 1
	})
	api.signal(syscall.SIGTERM)
	waitFor(t, "the listener closed", 30*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case r := <-answer:
		t.Fatalf("E5 answered before its account existed: %d %s", r.Status, r.Raw)
	case <-api.done:
		t.Fatal("the API exited with a request in flight")
	default:
	}
	startWorker(t, env)
	select {
	case r := <-answer:
		if r.Status != 201 || !serviceNumberRE.MatchString(fmt.Sprint(r.Body["service_account_number"])) {
			t.Fatalf("E5 in flight during shutdown: %d %s, want 201", r.Status, r.Raw)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("E5 in flight had no answer 30s after SIGTERM")
	}
	if !api.wait(10 * time.Second) {
		t.Fatal("the API did not exit after answering its last request")
	}
	if code := api.cmd.ProcessState.ExitCode(); code != 0 {
		log, _ := os.ReadFile(filepath.Join(logDir, "api.log"))
		t.Errorf("the API exited with %d after SIGTERM, want 0; its log:\n%s", code, strings.TrimSpace(string(log)))
	}
}
