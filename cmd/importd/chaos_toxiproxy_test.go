package main

// Network faults for the chaos runs: Shopify's toxiproxy, run inside the
// test process as its own tests run it, between the importd processes and
// PostgreSQL and between them and Redis. A fault is a toxic added for a
// few seconds and removed (a latency spike, a bandwidth limit, connections
// reset or left hanging mid-statement and mid-command), or the proxy
// stopped and started again (every connection cut, new ones refused).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
)

// netProxies are the proxies in front of the run's stores.
type netProxies struct {
	pg, redis *toxiproxy.Proxy
}

// startProxies starts a proxy in front of PostgreSQL at pgAddr and one in
// front of Redis at redisAddr, each on a port of its own (their Listen).
func startProxies(t testing.TB, pgAddr, redisAddr string) *netProxies {
	t.Helper()
	// Some toxics log through zerolog's global logger, at trace level, for
	// every connection they touch; only toxiproxy uses zerolog here.
	zlog.Logger = zerolog.Nop()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	start := func(name, upstream string) *toxiproxy.Proxy {
		p := toxiproxy.NewProxy(srv, name, fmt.Sprintf("127.0.0.1:%d", freePort(t)), upstream)
		if err := p.Start(); err != nil {
			t.Fatalf("toxiproxy %s: %v", name, err)
		}
		t.Cleanup(p.Stop)
		return p
	}
	return &netProxies{pg: start("postgres", pgAddr), redis: start("redis", redisAddr)}
}

// A network fault: what it does to which store, for how long.
type networkFault struct {
	kind  string
	store string // "PostgreSQL" or "Redis"
	// toxic is the toxic's JSON (toxiproxy's API form); "" stops the proxy.
	toxic string
	lasts time.Duration
}

// networkFaults are the network's fault kinds, each lasting a few seconds:
// long enough to catch requests mid-statement and mid-command at the
// run's rate, short enough that a client's retries outlast it.
var networkFaults = func() []networkFault {
	var out []networkFault
	for _, store := range []string{"PostgreSQL", "Redis"} {
		out = append(out,
			// Every byte from the store delayed 400 to 800 ms.
			networkFault{kind: store + " latency spike", store: store, lasts: 4 * time.Second,
				toxic: `{"name": "fault", "type": "latency", "stream": "downstream", "attributes": {"latency": 600, "jitter": 200}}`},
			// The store's answers at 20 KB/s.
			networkFault{kind: store + " bandwidth limit", store: store, lasts: 4 * time.Second,
				toxic: `{"name": "fault", "type": "bandwidth", "stream": "downstream", "attributes": {"rate": 20}}`},
			// A connection that sends anything is reset (TCP RST) at once:
			// statements and commands cut as they are sent.
			networkFault{kind: store + " connections reset", store: store, lasts: 1500 * time.Millisecond,
				toxic: `{"name": "fault", "type": "reset_peer", "stream": "upstream", "attributes": {"timeout": 0}}`},
			// Nothing gets through, and each connection is closed after
			// 2 s: a statement or command left hanging, then cut.
			networkFault{kind: store + " blackhole, then cut", store: store, lasts: 3 * time.Second,
				toxic: `{"name": "fault", "type": "timeout", "stream": "upstream", "attributes": {"timeout": 2000}}`},
			// The proxy gone: every connection cut, new ones refused.
			networkFault{kind: store + " unreachable", store: store, lasts: 2 * time.Second},
		)
	}
	return out
}()

// networkFaultKinds lists the network's fault kinds in the order of the
// table.
func networkFaultKinds() []string {
	out := make([]string, len(networkFaults))
	for i, f := range networkFaults {
		out[i] = f.kind
	}
	return out
}

// inject runs the network fault kind: it adds the toxic (or stops the
// proxy), waits its time, and removes it (or starts the proxy again).
func (n *netProxies) inject(t testing.TB, kind string) {
	var nf networkFault
	for _, f := range networkFaults {
		if f.kind == kind {
			nf = f
		}
	}
	if nf.kind == "" || n == nil {
		t.Errorf("network fault %q: no such fault, or the run has no proxies", kind)
		return
	}
	p := n.pg
	if nf.store == "Redis" {
		p = n.redis
	}
	if nf.toxic == "" {
		p.Stop()
		time.Sleep(nf.lasts)
		if err := p.Start(); err != nil {
			t.Errorf("toxiproxy %s: start again: %v", p.Name, err)
		}
		return
	}
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(nf.toxic)); err != nil {
		t.Errorf("toxiproxy %s: add %s: %v", p.Name, kind, err)
		return
	}
	time.Sleep(nf.lasts)
	if err := p.Toxics.RemoveToxic(context.Background(), "fault"); err != nil {
		t.Errorf("toxiproxy %s: remove %s: %v", p.Name, kind, err)
	}
}
