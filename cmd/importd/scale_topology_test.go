package main

// The production topology of the scale runs (docs/operating.md, "Running
// on many machines"), on one machine with the Debian servers: API replicas
// behind HAProxy, Redis as a cluster of three masters with a replica each
// or as a primary and a replica watched by three Sentinels, and
// PostgreSQL as a primary with a synchronous streaming standby that the
// service reaches through one connection string naming both. The chaos
// harness (chaos_test.go) starts them when chaosConfig asks for them, and
// injects their failovers (the scale faults) like its other faults.
// scale_full_test.go (build tag scale, `make scale`) has the full runs.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
)

// Redis topologies of chaosConfig.Redis; "" is one redis-server.
const (
	redisClusterTopology  = "cluster"
	redisSentinelTopology = "sentinel"
)

// Fault kinds of the scale runs, in the order of the table after the
// chaos run's own.
const (
	faultRedisClusterFailover = "Redis CLUSTER FAILOVER"
	faultRedisMasterKill      = "Redis master SIGKILL"
	faultRedisMasterKillLag   = "Redis master SIGKILL, replica 1 s behind"
	faultSentinelFailover     = "Redis Sentinel failover"
	faultPostgresPromote      = "PostgreSQL primary killed, standby promoted"
)

// failoverWait bounds how long a failover may take before the run fails:
// a cluster's takes cluster-node-timeout (2 s) and an election, a
// Sentinel's down-after (2 s) and an election, PostgreSQL's a promotion.
const failoverWait = 60 * time.Second

// info is the field of INFO section on the node (of CLUSTER INFO for
// section "cluster"), "" when it does not answer.
func (n *redisNode) info(section, field string) string {
	c := n.client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var s string
	var err error
	if section == "cluster" {
		s, err = c.ClusterInfo(ctx).Result()
	} else {
		s, err = c.Info(ctx, section).Result()
	}
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// redisCluster is a Redis Cluster of three masters with a replica each.
type redisCluster struct {
	t     testing.TB
	nodes []*redisNode
}

// startRedisCluster starts six nodes and makes them a cluster with
// redis-cli --cluster create. The node timeout is 2 s (the default 15 s
// would make each failover a quarter of a minute), and the bus port is
// chosen like the node's, since port+10000 may be taken or past 65535.
func startRedisCluster(t testing.TB, logDir string) *redisCluster {
	t.Helper()
	c := &redisCluster{t: t}
	var addrs []string
	for i := range 6 {
		n := newRedisNode(t, logDir, fmt.Sprintf("redis-%d", i+1))
		n.args = n.dataArgs("--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(n.dir, "nodes.conf"),
			"--cluster-node-timeout", "2000", "--cluster-port", strconv.Itoa(freePort(t)))
		n.start()
		c.nodes = append(c.nodes, n)
		addrs = append(addrs, n.addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	waitFor(t, "the cluster ok with three masters and three linked replicas", failoverWait, func() bool {
		masters, linked := 0, 0
		for _, n := range c.nodes {
			switch n.info("replication", "role") {
			case "master":
				masters++
			case "slave":
				if n.info("replication", "master_link_status") == "up" {
					linked++
				}
			}
		}
		return masters == 3 && linked == 3 && c.healthy()
	})
	return c
}

// url is the service's REDIS_URL for the cluster: the three nodes that
// started as masters (any of the nodes would do).
func (c *redisCluster) url() string {
	return fmt.Sprintf("redis-cluster://%s,%s,%s", c.nodes[0].addr(), c.nodes[1].addr(), c.nodes[2].addr())
}

// ok reports whether every running node says cluster_state:ok: every
// slot is served by a master that answers.
func (c *redisCluster) ok() bool {
	for _, n := range c.nodes {
		if n.proc != nil && n.info("cluster", "cluster_state") != "ok" {
			return false
		}
	}
	return true
}

// healthy is ok, with no node that any running node sees as failing.
func (c *redisCluster) healthy() bool {
	if !c.ok() {
		return false
	}
	for _, n := range c.nodes {
		if n.proc == nil {
			return false
		}
		cl := n.client()
		nodes, err := cl.ClusterNodes(context.Background()).Result()
		cl.Close()
		if err != nil || strings.Contains(nodes, "fail") {
			return false
		}
	}
	return true
}

// queueShard is the master that holds the account tasks' queue (Asynq
// keeps each queue's keys in one slot, the hash tag {accounts}) and its
// replica: the failover that matters most.
func (c *redisCluster) queueShard() (master, replica *redisNode) {
	ctx := context.Background()
	for _, n := range c.nodes {
		master, replica = nil, nil
		cl := n.client()
		slot, err1 := cl.ClusterKeySlot(ctx, "asynq:{accounts}:pending").Result()
		shards, err2 := cl.ClusterShards(ctx).Result()
		cl.Close()
		if err1 != nil || err2 != nil {
			continue
		}
		for _, sh := range shards {
			if !slices.ContainsFunc(sh.Slots, func(r redis.SlotRange) bool { return r.Start <= slot && slot <= r.End }) {
				continue
			}
			for _, sn := range sh.Nodes {
				if sn.Health != "online" {
					continue
				}
				switch sn.Role {
				case "master":
					master = c.byPort(int(sn.Port))
				case "replica":
					replica = c.byPort(int(sn.Port))
				}
			}
			if master != nil && replica != nil {
				return master, replica
			}
		}
	}
	c.t.Fatal("no node names a master and a replica for the accounts queue's slot")
	return nil, nil
}

func (c *redisCluster) byPort(port int) *redisNode {
	for _, n := range c.nodes {
		if n.port == port {
			return n
		}
	}
	c.t.Fatalf("no cluster node on port %d", port)
	return nil
}

// failover is a manual failover of the queue's master (CLUSTER FAILOVER
// on its replica): the replica catches up with the master's replication
// offset before they swap, so nothing acknowledged is lost. It returns
// once the replica is the master and the cluster is ok.
func (c *redisCluster) failover() {
	_, replica := c.queueShard()
	cl := replica.client()
	err := cl.ClusterFailover(context.Background()).Err()
	cl.Close()
	if err != nil {
		c.t.Fatalf("CLUSTER FAILOVER on %s: %v", replica.name, err)
	}
	waitFor(c.t, "the replica "+replica.name+" promoted by CLUSTER FAILOVER", failoverWait, func() bool {
		return replica.info("replication", "role") == "master" && c.ok()
	})
}

// replicaLag is how far behind its master the replica is made before
// faultRedisMasterKillLag kills the master.
const replicaLag = time.Second

// killMaster kills the queue's master with SIGKILL, waits until the
// cluster promoted its replica, and starts the killed node again, which
// rejoins as the new master's replica. It returns when the cluster is ok
// (the fault's end) and, after that, when the old master is a linked
// replica again, so that a later failover finds a replica to promote.
// killed is the moment of the kill, the fault's start.
//
// Redis replicates asynchronously: what the master acknowledged and had
// not sent to its replica when it died is gone after the failover. On one
// machine the replica is a millisecond behind; with lag the replica is
// stopped (SIGSTOP) for that long before the kill and continued
// (SIGCONT) after it, so that everything the master acknowledged meanwhile
// (tasks queued, started, finished; slots taken and freed; announcements)
// is lost, as on a network whose replica link stalled.
func (c *redisCluster) killMaster(lag time.Duration) (killed, promoted time.Time) {
	master, replica := c.queueShard()
	var replicated string
	if lag > 0 {
		replicated = replica.info("replication", "slave_repl_offset")
		replica.proc.signal(syscall.SIGSTOP)
		time.Sleep(lag)
	}
	acknowledged := master.info("replication", "master_repl_offset")
	killed = time.Now()
	master.kill()
	if lag > 0 {
		c.t.Logf("%s killed %d bytes of replication stream ahead of its stopped replica %s: lost",
			master.name, atoi(acknowledged)-atoi(replicated), replica.name)
		replica.proc.signal(syscall.SIGCONT)
	}
	master.proc = nil
	waitFor(c.t, "the replica "+replica.name+" promoted after its master was killed", failoverWait, func() bool {
		return replica.info("replication", "role") == "master" && c.ok()
	})
	promoted = time.Now()
	master.start()
	waitFor(c.t, "the killed master "+master.name+" back as a replica", failoverWait, func() bool {
		return master.info("replication", "role") == "slave" && master.info("replication", "master_link_status") == "up" && c.healthy()
	})
	return killed, promoted
}

// redisSentinel is a Redis primary and its replica, watched by three
// Sentinels that agree (quorum 2) on a failover.
type redisSentinel struct {
	t         testing.TB
	data      []*redisNode
	sentinels []*redisNode
}

// sentinelMaster is the name the Sentinels know the primary by.
const sentinelMaster = "importd"

func startRedisSentinel(t testing.TB, logDir string) *redisSentinel {
	t.Helper()
	s := &redisSentinel{t: t}
	primary := newRedisNode(t, logDir, "redis-1")
	primary.args = primary.dataArgs()
	primary.start()
	replica := newRedisNode(t, logDir, "redis-2")
	replica.args = replica.dataArgs("--replicaof", "127.0.0.1", strconv.Itoa(primary.port))
	replica.start()
	s.data = []*redisNode{primary, replica}
	waitFor(t, "the replica linked", failoverWait, func() bool { return replica.info("replication", "master_link_status") == "up" })
	for i := range 3 {
		n := newRedisNode(t, logDir, fmt.Sprintf("sentinel-%d", i+1))
		conf := filepath.Join(n.dir, "sentinel.conf")
		// Down after 2 s (the default 30 s would make a dead primary a
		// half-minute outage); the Sentinel rewrites this file as it learns.
		body := strings.NewReplacer("PORT", strconv.Itoa(n.port), "DIR", n.dir, "NAME", sentinelMaster, "PRIMARY", strconv.Itoa(primary.port)).Replace(
			"port PORT\nbind 127.0.0.1\ndir DIR\nsentinel monitor NAME 127.0.0.1 PRIMARY 2\n" +
				"sentinel down-after-milliseconds NAME 2000\nsentinel failover-timeout NAME 20000\nsentinel parallel-syncs NAME 1\n")
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		n.args = []string{conf, "--sentinel"}
		n.start()
		s.sentinels = append(s.sentinels, n)
	}
	waitFor(t, "every Sentinel knowing the replica and the other two Sentinels", failoverWait, func() bool {
		for _, n := range s.sentinels {
			cl := redis.NewSentinelClient(&redis.Options{Addr: n.addr()})
			reps, err1 := cl.Replicas(context.Background(), sentinelMaster).Result()
			sens, err2 := cl.Sentinels(context.Background(), sentinelMaster).Result()
			cl.Close()
			if err1 != nil || err2 != nil || len(reps) != 1 || len(sens) != 2 {
				return false
			}
		}
		return true
	})
	return s
}

// url is the service's REDIS_URL: the three Sentinels and the master's name.
func (s *redisSentinel) url() string {
	return fmt.Sprintf("redis-sentinel://%s,%s,%s/0?master=%s", s.sentinels[0].addr(), s.sentinels[1].addr(), s.sentinels[2].addr(), sentinelMaster)
}

// master is the data node the first Sentinel names as the primary.
func (s *redisSentinel) master() *redisNode {
	cl := redis.NewSentinelClient(&redis.Options{Addr: s.sentinels[0].addr()})
	defer cl.Close()
	addr, err := cl.GetMasterAddrByName(context.Background(), sentinelMaster).Result()
	if err != nil {
		s.t.Fatalf("SENTINEL GET-MASTER-ADDR-BY-NAME: %v", err)
	}
	for _, n := range s.data {
		if n.port == atoi(addr[1]) {
			return n
		}
	}
	s.t.Fatalf("the Sentinels name %v, no data node of the run", addr)
	return nil
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// failover is a Sentinel failover (SENTINEL FAILOVER: the Sentinels
// promote the replica and make the old primary its replica). It returns
// when every Sentinel names the new primary and it says it is one, and,
// after that, once the old primary is a linked replica, so that a later
// failover finds a replica to promote.
func (s *redisSentinel) failover() (promoted time.Time) {
	old := s.master()
	var next *redisNode
	for _, n := range s.data {
		if n != old {
			next = n
		}
	}
	cl := redis.NewSentinelClient(&redis.Options{Addr: s.sentinels[0].addr()})
	err := cl.Failover(context.Background(), sentinelMaster).Err()
	cl.Close()
	if err != nil {
		s.t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	waitFor(s.t, "the Sentinels naming "+next.name+" the primary", failoverWait, func() bool {
		for _, sn := range s.sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: sn.addr()})
			addr, err := c.GetMasterAddrByName(context.Background(), sentinelMaster).Result()
			c.Close()
			if err != nil || atoi(addr[1]) != next.port {
				return false
			}
		}
		return next.info("replication", "role") == "master"
	})
	promoted = time.Now()
	waitFor(s.t, "the old primary "+old.name+" a linked replica", failoverWait, func() bool {
		return old.info("replication", "role") == "slave" && old.info("replication", "master_link_status") == "up"
	})
	return promoted
}

// addStandby makes a streaming standby of c (pg_basebackup -R) on a port of
// its own, and then makes it c's synchronous standby: a commit is
// acknowledged only once the standby has it, so that promoting the
// standby after the primary died loses no commit a client was told of.
// The standby's own configuration names no synchronous standby, so that
// once promoted it does not wait for one that does not exist. It returns
// when the primary reports the standby as synchronous.
func (c *pgCluster) addStandby() *pgCluster {
	t := c.t
	s := &pgCluster{t: t, bin: c.bin, data: filepath.Join(filepath.Dir(c.data), "standby"), port: freePort(t), logDir: c.logDir}
	if err := c.pgRun("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", "importd", "-D", s.data,
		"-R", "-X", "stream", "-c", "fast"); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(s.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fmt.Fprintf(f, "\nport = %d\nsynchronous_standby_names = ''\n", s.port)
	f.Close()
	s.start()
	t.Cleanup(func() { _ = s.pgRun("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop") })
	d, err := sqlx.Open("postgres", c.url("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Exec(`ALTER SYSTEM SET synchronous_standby_names = '*'`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Exec(`SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the standby streaming synchronously", failoverWait, func() bool {
		var n int
		return d.Get(&n, `SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming'`) == nil && n == 1
	})
	return s
}

// pgMultiHostURL is the connection string of a primary and its standby in
// lib/pq's multi-host form: the hosts in the URL's host, their ports in
// ?port= (lib/pq reads a URL's host:port pairs only for one host), and
// target_session_attrs=read-write, so that every new connection goes to
// whichever of them accepts writes.
func pgMultiHostURL(primary, standby *pgCluster, database string) string {
	return fmt.Sprintf("postgres://importd@127.0.0.1,127.0.0.1/%s?port=%d,%d&target_session_attrs=read-write&sslmode=disable",
		database, primary.port, standby.port)
}

// promoteStandby is the PostgreSQL failover: the primary stopped at once
// (immediate shutdown, as a crash: no checkpoint, sessions cut) and the
// standby promoted. The old primary stays down (bringing it back would need
// pg_rewind; the standby is the primary now).
func (c *pgCluster) promoteStandby(standby *pgCluster) {
	if err := c.pgRun("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "-t", "60", "stop"); err != nil {
		c.t.Error(err)
	}
	if err := standby.pgRun("pg_ctl", "-D", standby.data, "-w", "-t", "60", "promote"); err != nil {
		c.t.Fatal(err)
	}
}

// haproxy is HAProxy in front of the API replicas, sending each request
// to a replica whose /readyz answers 200, checked every 500 ms.
type haproxy struct {
	port int
	proc *osProc
}

// startHAProxy starts HAProxy on a free port in front of the API replicas
// on ports, and waits until it answers /readyz through one of them.
// A request whose connection a replica refuses (killed, restarting) is
// sent to another (retries 3, option redispatch); one under way when its
// replica died is answered 502 and is the client's to retry: HAProxy
// cannot know whether the replica acted on it.
func startHAProxy(t testing.TB, logDir string, ports []int) *haproxy {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		bin = "/usr/sbin/haproxy"
		if _, err := os.Stat(bin); err != nil {
			t.Fatal("haproxy not installed; `make scale` installs it")
		}
	}
	h := &haproxy{port: freePort(t)}
	var b strings.Builder
	fmt.Fprintf(&b, "global\n  maxconn 4096\n\ndefaults\n  mode http\n  timeout connect 2s\n  timeout client 120s\n  timeout server 120s\n"+
		"  retries 3\n  option redispatch\n\nfrontend api\n  bind 127.0.0.1:%d\n  default_backend importd\n\n"+
		"backend importd\n  balance roundrobin\n  option httpchk GET /readyz\n  http-check expect status 200\n"+
		"  default-server inter 500ms fall 2 rise 1\n", h.port)
	for i, p := range ports {
		fmt.Fprintf(&b, "  server api%d 127.0.0.1:%d check\n", i+1, p)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	h.proc = startProc(t, logDir, "haproxy", bin, []string{"-f", cfg, "-db"}, nil)
	t.Cleanup(func() { h.proc.signal(syscall.SIGKILL); h.proc.wait(10 * time.Second) })
	waitFor(t, "HAProxy answering /readyz", failoverWait, func() bool {
		res, err := http.Get(h.url() + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	return h
}

func (h *haproxy) url() string { return fmt.Sprintf("http://127.0.0.1:%d", h.port) }

// The small variant of `make scale`, run by `make test-long`: 500
// accounts (2% invalid) and 3 businesses through the built runner and two
// workers, on the shared PostgreSQL and a Redis Cluster of the run's own,
// while the master of the accounts queue is killed with its replica a
// second behind (what it acknowledged in that second is lost; its replica
// is promoted, it rejoins as a replica) and a worker is killed.
func TestScale_RedisMasterKilledBehindLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("a Redis Cluster of six servers and a failover: make test-long")
	}
	t.Parallel()
	res := runPipeline(t, chaosConfig{Accounts: 500, InvalidRate: 0.02, Seed: 33, Businesses: 3, Concurrency: 12, Workers: 2,
		WorkerKills: 1, RedisMasterKillsLagging: 1, Redis: redisClusterTopology, SlowVendor: 500 * time.Millisecond,
		Deadline: 8 * time.Minute, Settle: 3 * time.Minute,
		Env: map[string]string{"PROCESS_CONCURRENCY_LIMIT": "8"}})
	t.Log("\n" + res.table())
}
