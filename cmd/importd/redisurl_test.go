package main

import (
	"strings"
	"testing"

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
