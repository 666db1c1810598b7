package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
)

// syncBuffer is a bytes.Buffer safe for asynq's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServerConfig_LogsRefusalsAtInfoAndOtherArchivedTasksAtWarn(t *testing.T) {
	t.Parallel()
	opt, err := asynq.ParseRedisURI(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := serverConfig(log)
	cfg.Queues = map[string]int{"q": 1}
	cfg.TaskCheckInterval = 10 * time.Millisecond
	srv := asynq.NewServer(opt, cfg)
	mux := asynq.NewServeMux()
	mux.HandleFunc("refused", func(context.Context, *asynq.Task) error {
		return &jobs.Refused{Code: "invalid_postcode", Err: errors.New("account A-1 refused (invalid_postcode)")}
	})
	mux.HandleFunc("broken", func(context.Context, *asynq.Task) error {
		return fmt.Errorf("decode payload: %w", asynq.SkipRetry)
	})
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	cli := asynq.NewClient(opt)
	defer cli.Close()
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	for _, id := range []string{"refused", "broken"} {
		if _, err := cli.Enqueue(asynq.NewTask(id, nil), asynq.Queue("q"), asynq.TaskID(id)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		q, err := insp.GetQueueInfo("q")
		if err == nil && q.Archived == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks not archived: %+v, %v", q, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.Shutdown()

	type line struct{ Level, Msg, TaskID, Code string }
	var got []line
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lv, _ := m["level"].(string)
		msg, _ := m["msg"].(string)
		if lv == "INFO" && m["component"] == "asynq" {
			continue // start and shutdown notices
		}
		id, _ := m["task_id"].(string)
		code, _ := m["code"].(string)
		got = append(got, line{lv, msg, id, code})
	}
	want := []line{
		{"INFO", "task refused", "refused", "invalid_postcode"},
		{"WARN", "Retry exhausted for task id=broken", "", ""},
	}
	less := func(a, b line) bool { return a.Msg < b.Msg }
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(less)); diff != "" {
		t.Errorf("log lines (-want +got):\n%s\nlog:\n%s", diff, buf.String())
	}
}
