//go:build scale

package main

import (
	"testing"
	"time"
)

// `make scale` (docs/operating.md, "Running on many machines"): the
// production topology on one machine (scale_topology_test.go), two API
// replicas behind HAProxy and three workers, with a generated cohort of
// 10,000 accounts (SCALE_ACCOUNTS, 1.5% invalid) and 100 businesses
// through the built `importctl run`, in two passes:
//   - Redis Cluster (three masters, a replica each) and PostgreSQL with a
//     synchronous standby, while an API replica is killed twice, the
//     accounts queue's master fails over by CLUSTER FAILOVER, then by
//     being killed, then by being killed with its replica a second behind
//     (what it acknowledged in that second is lost), two workers are
//     killed, and the PostgreSQL primary is killed and its standby
//     promoted;
//   - Redis with three Sentinels and the same PostgreSQL, while an API
//     replica is killed, Redis fails over by SENTINEL FAILOVER twice, and
//     the PostgreSQL primary is killed and its standby promoted.
//
// Each pass runs the chaos run's checks and logs its table.
func TestScale_Full(t *testing.T) {
	accounts := envInt(t, "SCALE_ACCOUNTS", 10000)
	base := chaosConfig{
		Accounts: accounts, InvalidRate: 0.015, Businesses: envInt(t, "SCALE_BUSINESSES", 100),
		Concurrency: envInt(t, "SCALE_CONCURRENCY", 16), Workers: 3, APIReplicas: 2,
		PostgresStandby: true, OwnPostgres: true, SlowVendor: 1500 * time.Millisecond,
		Deadline: 50 * time.Minute, Settle: 3 * time.Minute,
		Env: map[string]string{"PROCESS_CONCURRENCY_LIMIT": "12"},
	}
	t.Run("cluster", func(t *testing.T) {
		cfg := base
		cfg.Seed, cfg.Redis = 50, redisClusterTopology
		cfg.APIKills, cfg.WorkerKills, cfg.PostgresPromotions = 2, 2, 1
		cfg.RedisClusterFailovers, cfg.RedisMasterKills, cfg.RedisMasterKillsLagging = 1, 1, 1
		t.Log("\n" + runPipeline(t, cfg).table())
	})
	t.Run("sentinel", func(t *testing.T) {
		cfg := base
		cfg.Seed, cfg.Redis = 51, redisSentinelTopology
		cfg.APIKills, cfg.SentinelFailovers, cfg.PostgresPromotions = 1, 2, 1
		t.Log("\n" + runPipeline(t, cfg).table())
	})
}
