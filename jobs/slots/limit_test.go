package slots

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ownRedis is a redis-server of the test's own, with the append-only file
// on, so that the test can restart it without disturbing other tests.
type ownRedis struct {
	t    *testing.T
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startOwnRedis(t *testing.T) *ownRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not installed; `make test` installs it")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r := &ownRedis{t: t, bin: bin, port: port, dir: t.TempDir()}
	r.start()
	t.Cleanup(func() { _ = r.cmd.Process.Kill(); <-r.done })
	return r
}

func (r *ownRedis) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *ownRedis) start() {
	r.t.Helper()
	r.cmd = exec.Command(r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--appendonly", "yes", "--save", "")
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(r.cmd, r.done)
	rc := redis.NewClient(&redis.Options{Addr: r.addr()})
	defer rc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for rc.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			r.t.Fatal("redis-server did not answer within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop shuts Redis down as an orchestrator does (SIGTERM: it writes its
// append-only file first).
func (r *ownRedis) stop() {
	r.t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		r.t.Fatal("redis-server did not stop within 20s of SIGTERM")
	}
}

// A slot whose release fails because Redis is restarting is freed once
// Redis is back, not ten minutes later when it expires: with the limit set,
// each such slot was an account fewer processed at once until then.
func TestRelease_FreesTheSlotOnceRedisIsBack(t *testing.T) {
	t.Parallel()
	r := startOwnRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	expires := float64(time.Now().Add(TTL).UnixMilli())
	for _, task := range []string{"task-ended-during-restart", "task-still-running"} {
		if err := rdb.ZAdd(ctx, Key, redis.Z{Score: expires, Member: task}).Err(); err != nil {
			t.Fatal(err)
		}
	}

	r.stop()
	if err := Release(ctx, rdb, "task-ended-during-restart"); err == nil {
		t.Fatal("Release with Redis stopped reported no error")
	}
	r.start()

	deadline := time.Now().Add(10 * time.Second)
	for {
		held, err := rdb.ZRange(ctx, Key, 0, -1).Result()
		if err == nil && fmt.Sprint(held) == "[task-still-running]" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slots held 10s after Redis came back: %v (%v), want only task-still-running", held, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := Release(ctx, rdb, "task-still-running"); err != nil {
		t.Fatalf("Release with Redis up: %v", err)
	}
	if n, _ := rdb.ZCard(ctx, Key).Result(); n != 0 {
		t.Errorf("%d slots held after every task released its own, want 0", n)
	}
}
