package main

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestConfig_LogFormatChoosesTheHandler(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "REDIS_URL": "redis://127.0.0.1:1/0", "TOKEN_SECRET": testSecret}
	cases := []struct {
		format, want string
	}{
		{"", `{"level":"INFO","msg":"hello","code":"x"}` + "\n"},
		{"json", `{"level":"INFO","msg":"hello","code":"x"}` + "\n"},
		{"TEXT", "level=INFO msg=hello code=x\n"},
	}
	for _, tc := range cases {
		t.Run(tc.format, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"LOG_FORMAT": tc.format}
			for k, v := range base {
				env[k] = v
			}
			cfg, err := loadConfig(func(k string) string { return env[k] }, needDB|needRedis|needToken)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			log := newLogger(&buf, cfg.LogLevel, cfg.LogFormat)
			// Drop the time, which changes on every run.
			log = slog.New(withoutTime{log.Handler()})
			log.Info("hello", "code", "x")
			if diff := cmp.Diff(tc.want, buf.String()); diff != "" {
				t.Errorf("log line (-want +got):\n%s", diff)
			}
		})
	}
}

// withoutTime clears the record's time, which both built-in handlers then omit.
type withoutTime struct{ slog.Handler }

func (h withoutTime) Handle(ctx context.Context, r slog.Record) error {
	r.Time = time.Time{}
	return h.Handler.Handle(ctx, r)
}
