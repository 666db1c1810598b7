package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	netmail "net/mail"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/admin"
)

// parkTask enqueues a task on the accounts queue of redisURL; with no worker
// running ("api" mode) it stays pending.
func parkTask(t testing.TB, redisURL string) *asynq.TaskInfo {
	t.Helper()
	c := asynq.NewClient(mustRedisOpt(t, redisURL))
	defer c.Close()
	info, err := c.Enqueue(asynq.NewTask("ops:parked", nil), asynq.Queue(jobs.QueueAccounts))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func monitoringReq(t testing.TB, s *service, method, path string) response {
	t.Helper()
	req, _ := http.NewRequest(method, s.base+"/monitoring/api"+path, nil)
	req.SetBasicAuth("ops", testPassword)
	return doReq(t, req)
}

// By default (MONITORING_READ_ONLY=true) Asynqmon refuses every API call that
// is not a GET, even with the right credentials, and Redis is left alone;
// MONITORING_READ_ONLY=false lets the same calls through.
func TestDashboard_ReadOnlyByDefaultRefusesChanges(t *testing.T) {
	t.Parallel()
	t.Run("default", func(t *testing.T) {
		t.Parallel()
		s := startService(t, "api", map[string]string{"MONITORING_USER": "ops", "MONITORING_PASSWORD": testPassword})
		task := parkTask(t, s.env["REDIS_URL"])
		calls := []struct{ method, path string }{
			{"POST", "/queues/accounts:pause"},
			{"DELETE", "/queues/accounts/pending_tasks/" + task.ID},
			{"POST", "/queues/accounts/pending_tasks:archive_all"},
			{"DELETE", "/queues/accounts?force=true"},
		}
		for _, c := range calls {
			if r := monitoringReq(t, s, c.method, c.path); r.Status != http.StatusMethodNotAllowed || !strings.Contains(string(r.Raw), "read-only") {
				t.Errorf("%s %s on a read-only dashboard: %d %s, want 405 read-only", c.method, c.path, r.Status, r.Raw)
			}
		}
		if r := monitoringReq(t, s, "GET", "/queues/accounts"); r.Status != 200 {
			t.Errorf("GET of the queue on a read-only dashboard: %d %s", r.Status, r.Raw)
		}
		insp := asynq.NewInspector(mustRedisOpt(t, s.env["REDIS_URL"]))
		defer insp.Close()
		q, err := insp.GetQueueInfo(jobs.QueueAccounts)
		if err != nil {
			t.Fatalf("the accounts queue after the refused calls: %v", err)
		}
		if q.Paused || q.Pending != 1 || q.Archived != 0 {
			t.Errorf("the refused calls changed the queue: paused %v, pending %d, archived %d", q.Paused, q.Pending, q.Archived)
		}
		if info, err := insp.GetTaskInfo(jobs.QueueAccounts, task.ID); err != nil || info.State != asynq.TaskStatePending {
			t.Errorf("the parked task after the refused calls: %+v %v", info, err)
		}
	})
	t.Run("MONITORING_READ_ONLY=false", func(t *testing.T) {
		t.Parallel()
		s := startService(t, "api", map[string]string{"MONITORING_USER": "ops", "MONITORING_PASSWORD": testPassword, "MONITORING_READ_ONLY": "false"})
		task := parkTask(t, s.env["REDIS_URL"])
		if r := monitoringReq(t, s, "POST", "/queues/accounts:pause"); r.Status != http.StatusNoContent {
			t.Fatalf("pause on a writable dashboard: %d %s", r.Status, r.Raw)
		}
		if r := monitoringReq(t, s, "DELETE", "/queues/accounts/pending_tasks/"+task.ID); r.Status != http.StatusNoContent {
			t.Fatalf("delete task on a writable dashboard: %d %s", r.Status, r.Raw)
		}
		insp := asynq.NewInspector(mustRedisOpt(t, s.env["REDIS_URL"]))
		defer insp.Close()
		if q, err := insp.GetQueueInfo(jobs.QueueAccounts); err != nil || !q.Paused {
			t.Errorf("queue after pause: %+v %v, want paused", q, err)
		}
		if _, err := insp.GetTaskInfo(jobs.QueueAccounts, task.ID); !errors.Is(err, asynq.ErrTaskNotFound) {
			t.Errorf("task after delete: %v, want not found", err)
		}
	})
}

// lockedBuffer is a bytes.Buffer that the service writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Every request writes one JSON log line with its request id, route, status
// and duration, and no credential (API key, access or refresh token,
// Authorization value) ever reaches the logs, even at LOG_LEVEL=debug.
// Each service writes only to its own log: another service started beside
// it in the same process (as parallel tests do) keeps its lines apart.
func TestLogs_OneLinePerRequestAndNoCredentials(t *testing.T) {
	t.Parallel()
	var logs, otherLogs lockedBuffer
	s := startServiceLogging(t, "api", map[string]string{"LOG_LEVEL": "debug"}, &logs)
	other := startServiceLogging(t, "api", map[string]string{"LOG_LEVEL": "debug"}, &otherLogs)
	key := s.newKey(t, "logged")

	send := func(s *service, id, method, path, authz string, body any) response {
		t.Helper()
		var rd *bytes.Reader
		if body != nil {
			j, _ := json.Marshal(body)
			rd = bytes.NewReader(j)
		} else {
			rd = bytes.NewReader(nil)
		}
		req, _ := http.NewRequest(method, s.base+path, rd)
		req.Header.Set("X-Request-Id", id)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		return doReq(t, req)
	}
	r := send(s, "ops-log-gql", "POST", "/v1/graphql/", "", map[string]any{
		"query":     `mutation($input: ObtainJSONWebTokenInput!) { obtainServiceToken(input: $input) { token refreshToken } }`,
		"variables": map[string]any{"input": map[string]any{"APIKey": key}},
	})
	data, _ := r.Body["data"].(map[string]any)
	out, _ := data["obtainServiceToken"].(map[string]any)
	tok, _ := out["token"].(string)
	refresh, _ := out["refreshToken"].(string)
	if r.Status != 200 || tok == "" || refresh == "" {
		t.Fatalf("obtainServiceToken: %d %s", r.Status, r.Raw)
	}
	if r := send(s, "ops-log-ok", "GET", "/v1/data-import/whoami/", "Token "+tok, nil); r.Status != 200 {
		t.Fatalf("whoami: %d %s", r.Status, r.Raw)
	}
	forged := tok + "x"
	if r := send(s, "ops-log-401", "GET", "/v1/data-import/whoami/", "Token "+forged, nil); r.Status != 401 {
		t.Fatalf("whoami with a forged token: %d %s", r.Status, r.Raw)
	}
	if r := send(other, "ops-log-other", "GET", "/healthz", "", nil); r.Status != 200 {
		t.Fatalf("healthz of the other service: %d %s", r.Status, r.Raw)
	}

	want := map[string]struct {
		method, route string
		status        int
	}{
		"ops-log-gql": {"POST", "/v1/graphql/", 200},
		"ops-log-ok":  {"GET", "/v1/data-import/whoami/", 200},
		"ops-log-401": {"GET", "/v1/data-import/whoami/", 401},
	}
	// The line is written once the handler returns, which may be just after
	// the client has read the answer.
	var lines, otherLines map[string][]map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		lines, otherLines = requestLogLines(logs.String()), requestLogLines(otherLogs.String())
		if len(lines["ops-log-gql"]) > 0 && len(lines["ops-log-ok"]) > 0 && len(lines["ops-log-401"]) > 0 &&
			len(otherLines["ops-log-other"]) > 0 {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for id, w := range want {
		if len(lines[id]) != 1 {
			t.Errorf("request %s: %d request log lines, want 1; logs:\n%s", id, len(lines[id]), logs.String())
			continue
		}
		l := lines[id][0]
		if l["method"] != w.method || l["route"] != w.route || l["status"] != float64(w.status) {
			t.Errorf("request %s logged as %v, want %s %s %d", id, l, w.method, w.route, w.status)
		}
		if d, ok := l["duration_ms"].(float64); !ok || d < 0 {
			t.Errorf("request %s: duration_ms %v", id, l["duration_ms"])
		}
		if l["level"] != "INFO" || l["time"] == nil {
			t.Errorf("request %s: level %v, time %v", id, l["level"], l["time"])
		}
	}
	var ids, otherIDs []string
	for id := range lines {
		ids = append(ids, id)
	}
	for id := range otherLines {
		otherIDs = append(otherIDs, id)
	}
	sort.Strings(ids)
	if diff := cmp.Diff([]string{"ops-log-401", "ops-log-gql", "ops-log-ok"}, ids); diff != "" {
		t.Errorf("request ids in the service's log (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ops-log-other"}, otherIDs); diff != "" {
		t.Errorf("request ids in the other service's log (-want +got):\n%s", diff)
	}
	all := logs.String()
	sig := tok[strings.LastIndex(tok, ".")+1:]
	for what, secret := range map[string]string{
		"API key": key, "access token": tok, "token signature": sig, "refresh token": refresh,
		"forged token": forged, "Authorization value": "Token " + tok,
	} {
		if strings.Contains(all, secret) {
			t.Errorf("the %s appears in the logs", what)
		}
	}
}

// requestLogLines returns the "request" lines of a service's JSON log by
// request id.
func requestLogLines(logs string) map[string][]map[string]any {
	lines := map[string][]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) != nil || l["msg"] != "request" {
			continue
		}
		id, _ := l["request_id"].(string)
		lines[id] = append(lines[id], l)
	}
	return lines
}

// smtpMessage is one message the fake SMTP server accepted.
type smtpMessage struct {
	From string
	To   []string
	Data string
}

// fakeSMTP speaks just enough SMTP for net/smtp.SendMail and keeps what it
// is sent.
type fakeSMTP struct {
	addr string
	mu   sync.Mutex
	msgs []smtpMessage
}

func startFakeSMTP(t testing.TB) *fakeSMTP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f := &fakeSMTP{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeSMTP) messages() []smtpMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]smtpMessage(nil), f.msgs...)
}

func (f *fakeSMTP) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	reply := func(s string) { fmt.Fprintf(c, "%s\r\n", s) }
	angle := func(line string) string {
		_, rest, _ := strings.Cut(line, "<")
		addr, _, _ := strings.Cut(rest, ">")
		return addr
	}
	reply("220 fake.test ESMTP")
	var m smtpMessage
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		verb, _, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO", "HELO":
			reply("250 fake.test")
		case "MAIL":
			m = smtpMessage{From: angle(line)}
			reply("250 OK")
		case "RCPT":
			m.To = append(m.To, angle(line))
			reply("250 OK")
		case "DATA":
			reply("354 end with <CRLF>.<CRLF>")
			var data strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				data.WriteString(strings.TrimPrefix(l, "."))
			}
			m.Data = data.String()
			f.mu.Lock()
			f.msgs = append(f.msgs, m)
			f.mu.Unlock()
			m = smtpMessage{}
			reply("250 OK queued")
		case "RSET":
			m = smtpMessage{}
			reply("250 OK")
		case "NOOP":
			reply("250 OK")
		case "QUIT":
			reply("221 bye")
			return
		default:
			reply("502 command not implemented")
		}
	}
}

// With SMTP_URL set, the migration e-mails of a new account are sent through
// SMTP, once each, from the configured address, and their outbox rows are
// marked sent.
func TestProcess_MigrationEmailsAreSentThroughSMTP(t *testing.T) {
	t.Parallel()
	mail := startFakeSMTP(t)
	s := startService(t, "serve", map[string]string{"SMTP_URL": "smtp://" + mail.addr + "?from=migration@demo.test"})
	seedDemo(t, s, admin.Supplier{MigrationEmails: true})
	tok := s.accessToken(t, s.newKey(t, "k"))
	acc := fixture(t, "ACC-SMTP")
	// A given name with line breaks and an SMTP command must neither add a
	// header or a recipient nor end the message early.
	acc["customers"].([]any)[0].(map[string]any)["given_name"] = "Amelia\r\nBcc: evil@example.com\r\n.\r\nMAIL FROM:<evil@example.com>"
	s.stage(t, tok, acc)
	if r := s.do(t, "POST", processPath, tok, processBody("ACC-SMTP", false)); r.Status != 201 {
		t.Fatalf("E5: %d %s", r.Status, r.Raw)
	}
	deadline := time.Now().Add(liveness)
	for s.count(t, `SELECT count(*) FROM email_outbox WHERE sent_at IS NULL`) > 0 {
		if time.Now().After(deadline) {
			var errs []string
			_ = s.db.Select(&errs, `SELECT coalesce(last_error, '') FROM email_outbox WHERE sent_at IS NULL`)
			t.Fatalf("outbox rows still unsent (errors %q); the server got %d message(s)", errs, len(mail.messages()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	var rows []struct {
		To        string  `db:"to_address"`
		Subject   string  `db:"subject"`
		LastError *string `db:"last_error"`
	}
	if err := s.db.Select(&rows, `SELECT to_address, subject, last_error FROM email_outbox WHERE sent_at IS NOT NULL ORDER BY to_address`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d sent outbox rows, want one per customer with an address (2)", len(rows))
	}
	msgs := mail.messages()
	sort.Slice(msgs, func(i, j int) bool { return strings.Join(msgs[i].To, ",") < strings.Join(msgs[j].To, ",") })
	if len(msgs) != len(rows) {
		t.Fatalf("the SMTP server got %d message(s), want %d: %+v", len(msgs), len(rows), msgs)
	}
	for i, row := range rows {
		m := msgs[i]
		if row.LastError != nil {
			t.Errorf("%s: last_error %q on a sent row", row.To, *row.LastError)
		}
		if len(m.To) != 1 || m.To[0] != row.To {
			t.Errorf("message %d went to %v, want [%s]", i, m.To, row.To)
		}
		if m.From != "migration@demo.test" {
			t.Errorf("message to %s from %q, want the SMTP_URL from address", row.To, m.From)
		}
		// The headers are parsed rather than matched as text: the mail library
		// writes addresses in angle brackets and encodes subjects as needed.
		msg, err := netmail.ReadMessage(strings.NewReader(m.Data))
		if err != nil {
			t.Errorf("message to %s does not parse: %v\n%s", row.To, err, m.Data)
			continue
		}
		to, err := msg.Header.AddressList("To")
		if err != nil || len(to) != 1 || to[0].Address != row.To {
			t.Errorf("message to %s has To header %v (%v):\n%s", row.To, to, err, m.Data)
		}
		if bcc := msg.Header.Get("Bcc"); bcc != "" {
			t.Errorf("message to %s has a Bcc header %q", row.To, bcc)
		}
		body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
		if first, _, _ := strings.Cut(string(body), "\n"); err != nil || !strings.HasPrefix(first, "Dear ") || !strings.HasSuffix(first, ",\r") {
			t.Errorf("message to %s: the greeting is not one line (%v):\n%s", row.To, err, body)
		}
		subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
		if err != nil || subject != row.Subject {
			t.Errorf("message to %s has Subject %q (%v), want %q", row.To, subject, err, row.Subject)
		}
	}
}

// A request in flight when the service is told to stop (SIGTERM cancels run's
// context) still completes with its normal answer.
func TestServe_ShutdownLetsARequestInFlightFinish(t *testing.T) {
	t.Parallel()
	// One request in flight per key, so that a second request of the key
	// shows when the first one's handler has started.
	s := startService(t, "api", map[string]string{"MAX_IN_FLIGHT_PER_KEY": "1"})
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	body, _ := json.Marshal(fixture(t, "ACC-INFLIGHT"))
	addr := strings.TrimPrefix(s.base, "http://")

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	// Send the headers and half the body, so that the handler is running,
	// reading the body, when the service is stopped.
	half := len(body) / 2
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Token %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		stagePath, addr, tok, len(body))
	if _, err := c.Write(append([]byte(head), body[:half]...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the half-sent request in its handler (a second request of its key is refused)", 30*time.Second, func() bool {
		return s.do(t, "GET", "/v1/data-import/whoami/", tok, nil).Status == http.StatusTooManyRequests
	})
	s.stop()
	// Shutdown has begun once the listener refuses new connections.
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		nc.Close()
		if time.Now().After(deadline) {
			t.Fatal("the service still accepts connections 30s after it was stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.Write(body[half:]); err != nil {
		t.Fatalf("finishing the body after shutdown began: %v", err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the request in flight got no answer: %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode != 201 {
		t.Errorf("the request in flight answered %d, want 201", res.StatusCode)
	}
	if n := s.count(t, `SELECT count(*) FROM import_processes WHERE external_account_number = 'ACC-INFLIGHT'`); n != 1 {
		t.Errorf("%d staged rows for the request in flight, want 1", n)
	}
}
