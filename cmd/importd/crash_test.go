package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
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
	deadline = time.Now().Add(20 * time.Second)
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
	waitFor(t, "the request's log line", 10*time.Second, func() bool {
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
