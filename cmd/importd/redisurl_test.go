package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// REDIS_URL's three topologies map to asynq's three connection options,
// and each option makes the redis.UniversalClient the API's pub/sub needs.
// Parsing only: no server is contacted.
func TestConfig_RedisURLTopologies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		url  string
		want asynq.RedisConnOpt
	}{
		{"single server", "redis://:secret@10.0.0.5:6379/3",
			asynq.RedisClientOpt{Addr: "10.0.0.5:6379", Password: "secret", DB: 3}},
		{"sentinel", "redis-sentinel://:secret@s1:26379,s2:26379,s3:26379/2?master=importd",
			asynq.RedisFailoverClientOpt{MasterName: "importd", SentinelAddrs: []string{"s1:26379", "s2:26379", "s3:26379"}, SentinelPassword: "secret", DB: 2}},
		{"sentinel with the primary's own credentials", "redis-sentinel://:sentinel-secret@s1:26379/0?master=importd&username=importd&password=primary-secret",
			asynq.RedisFailoverClientOpt{MasterName: "importd", SentinelAddrs: []string{"s1:26379"}, SentinelPassword: "sentinel-secret",
				Username: "importd", Password: "primary-secret"}},
		{"sentinel with a percent-encoded primary password", "redis-sentinel://s1:26379/0?master=importd&password=ab%2Bc%23d%26e",
			asynq.RedisFailoverClientOpt{MasterName: "importd", SentinelAddrs: []string{"s1:26379"}, Password: "ab+c#d&e"}},
		{"cluster", "redis-cluster://n1:7000,n2:7001,n3:7002",
			asynq.RedisClusterClientOpt{Addrs: []string{"n1:7000", "n2:7001", "n3:7002"}}},
		{"cluster with ACL credentials", "redis-cluster://importd:secret@n1:7000/",
			asynq.RedisClusterClientOpt{Addrs: []string{"n1:7000"}, Username: "importd", Password: "secret"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadConfig(func(k string) string { return map[string]string{"REDIS_URL": tc.url}[k] }, needRedis)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cfg.Redis); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			rc, ok := cfg.Redis.MakeRedisClient().(redis.UniversalClient)
			if !ok {
				t.Fatalf("%T makes no redis.UniversalClient", cfg.Redis)
			}
			_ = rc.Close()
		})
	}
}

func TestConfig_RedisURLRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, url, want string }{
		{"unknown scheme", "memcached://x:1", "REDIS_URL:"},
		{"cluster node without port", "redis-cluster://n1:7000,n2:", `cluster node "n2:" must be host:port`},
		{"cluster with a database", "redis-cluster://n1:7000/3", "only database 0"},
		{"cluster with options", "redis-cluster://n1:7000?master=x", "no query parameters"},
		{"sentinel without master", "redis-sentinel://s1:26379/0", "needs ?master=NAME"},
		{"sentinel with an unknown parameter", "redis-sentinel://s1:26379/0?master=m&pasword=x", `not "pasword"`},
		{"sentinel with a bad escape in the password", "redis-sentinel://s1:26379/0?master=m&password=a%zz", "do not parse"},
		{"sentinel with the password twice", "redis-sentinel://s1:26379/0?master=m&password=a&password=b", `"password" is given 2 times`},
		{"sentinel with an unescaped # in the password", "redis-sentinel://s1:26379/0?master=m&password=ab#c", "percent-encode '#'"},
		{"sentinel with a database that is not a number", "redis-sentinel://s1:26379/x?master=m", `database "x" must be a number`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadConfig(func(k string) string { return map[string]string{"REDIS_URL": tc.url}[k] }, needRedis)
			if err == nil || !strings.Contains(err.Error(), "REDIS_URL") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming REDIS_URL and containing %q", err, tc.want)
			}
		})
	}
}

// A Sentinel deployment where the Sentinels and the primary each require a
// password of their own, run for real: the URL's password reaches the
// Sentinels and ?password= the primary. Without ?password= the client
// cannot authenticate to the primary.
func TestConfig_RedisSentinelWithSeparatePasswords(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not installed; `make test` installs it")
	}
	dir := t.TempDir()
	// start runs redis-server with the arguments args(port) on a free port
	// and returns the port once the server listens. freePort's port may be
	// taken by a parallel test before redis-server binds it; a server that
	// exits before listening is started again on another port, and its log
	// is shown if it never comes up.
	start := func(name string, args func(port int) []string) int {
		logPath := filepath.Join(dir, name+".log")
		for range 3 {
			port := freePort(t)
			cmd := exec.Command(bin, args(port)...)
			cmd.Dir = dir
			out, err := os.Create(logPath)
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				select {
				case <-exited:
					deadline = time.Time{} // it failed to start; try another port
					continue
				default:
				}
				if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
					c.Close()
					return port
				}
			}
		}
		log, _ := os.ReadFile(logPath)
		t.Fatalf("%s did not start:\n%s", name, log)
		return 0
	}
	primary := start("primary", func(port int) []string {
		return []string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--requirepass", "primary-secret",
			"--save", "", "--appendonly", "no", "--dir", dir}
	})
	conf := filepath.Join(dir, "sentinel.conf")
	sentinel := start("sentinel", func(port int) []string {
		// Sentinel rewrites its configuration, so each try writes it anew.
		if err := os.WriteFile(conf, fmt.Appendf(nil, "port %d\nbind 127.0.0.1\nrequirepass sentinel-secret\ndir %s\n"+
			"sentinel monitor importd 127.0.0.1 %d 1\nsentinel auth-pass importd primary-secret\n", port, dir, primary), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{conf, "--sentinel"}
	})

	ping := func(url string) error {
		cfg, err := loadConfig(func(k string) string { return map[string]string{"REDIS_URL": url}[k] }, needRedis)
		if err != nil {
			t.Fatal(err)
		}
		rc := cfg.Redis.MakeRedisClient().(redis.UniversalClient)
		defer rc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return rc.Ping(ctx).Err()
	}
	base := fmt.Sprintf("redis-sentinel://:sentinel-secret@127.0.0.1:%d/0?master=importd", sentinel)
	var err2 error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err2 = ping(base + "&password=primary-secret"); err2 == nil {
			break
		}
	}
	if err2 != nil {
		t.Fatalf("ping through the Sentinel with both passwords: %v", err2)
	}
	if err := ping(base); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("ping without the primary's password: %v, want NOAUTH", err)
	}
}
