package metrics

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db/dbtest"
)

// series reads every series of the family name as "label=value,..." ->
// value (gauges and counters), with the gather error.
func series(t *testing.T, m *Metrics, name string) (map[string]float64, error) {
	t.Helper()
	fams, err := m.Registry().Gather()
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			var ls []string
			for _, p := range s.GetLabel() {
				ls = append(ls, p.GetName()+"="+p.GetValue())
			}
			v := s.GetGauge().GetValue() + s.GetCounter().GetValue()
			out[strings.Join(ls, ",")] = v
		}
	}
	return out, err
}

// The accounts queue reports how long its oldest pending task has waited,
// read from a real Redis, and importd_redis_up is 1 while Redis answers.
func TestQueues_LatencyOfTheOldestPendingTaskAndRedisUp(t *testing.T) {
	t.Parallel()
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	client := asynq.NewClientFromRedisClient(rc)
	if _, err := client.Enqueue(asynq.NewTask("account:process", nil), asynq.Queue("accounts")); err != nil {
		t.Fatal(err)
	}
	m := New()
	m.WatchQueues(asynq.NewInspectorFromRedisClient(rc), "accounts", "emails")
	deadline := time.Now().Add(30 * time.Second)
	for {
		lat, err := series(t, m, "importd_queue_latency_seconds")
		if err != nil {
			t.Fatal(err)
		}
		if lat["queue=emails"] != 0 {
			t.Fatalf("an empty queue has latency %v", lat["queue=emails"])
		}
		if lat["queue=accounts"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pending task's queue never reported a latency: %v", lat)
		}
		time.Sleep(100 * time.Millisecond)
	}
	up, _ := series(t, m, "importd_redis_up")
	if d := cmp.Diff(map[string]float64{"": 1}, up); d != "" {
		t.Errorf("importd_redis_up (-want +got):\n%s", d)
	}
}

// A Redis that does not answer reports importd_redis_up 0, so that an
// alert can fire on it, and the scrape still answers.
func TestQueues_RedisDownReportsRedisUpZero(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	rc := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { rc.Close() })
	m := New()
	m.WatchQueues(asynq.NewInspectorFromRedisClient(rc), "accounts")
	up, err := series(t, m, "importd_redis_up")
	if err == nil {
		t.Error("no scrape error for the queue sizes Redis could not give")
	}
	if d := cmp.Diff(map[string]float64{"": 0}, up); d != "" {
		t.Errorf("importd_redis_up (-want +got):\n%s", d)
	}
}

// Each supplier's accounts by state come from the source at scrape time,
// the accounts refused at staging among them; a source that fails is an
// error of the scrape, not a zero.
func TestSuppliers_AccountsByStateFromTheSource(t *testing.T) {
	t.Parallel()
	fail := false
	m := New()
	m.WatchSuppliers(func(context.Context) ([]SupplierAccounts, error) {
		if fail {
			return nil, errors.New("database down")
		}
		return []SupplierAccounts{{Supplier: "ACME", Staged: 1, InProgress: 2, Completed: 30, Failed: 4, Refused: 5, RefusedNotOngoing: 6}}, nil
	})
	got, err := series(t, m, "importd_supplier_accounts")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"state=completed,supplier=ACME": 30, "state=failed,supplier=ACME": 4,
		"state=in_progress,supplier=ACME": 2, "state=staged,supplier=ACME": 1,
		"state=refused,supplier=ACME": 5, "state=refused_not_ongoing,supplier=ACME": 6,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("importd_supplier_accounts (-want +got):\n%s", d)
	}
	fail = true
	got, err = series(t, m, "importd_supplier_accounts")
	if err == nil || len(got) != 0 {
		t.Errorf("a failing source gave %v, %v; want no series and an error", got, err)
	}
}

// importd_database_up pings the pool at each scrape: 1 while PostgreSQL
// answers, 0 once it does not; the pool's statistics come with it.
func TestDatabase_UpWhileItAnswersAndPoolStatistics(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	m := New()
	m.WatchDatabase(d)
	up, err := series(t, m, "importd_database_up")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]float64{"": 1}, up); d != "" {
		t.Errorf("importd_database_up (-want +got):\n%s", d)
	}
	open, _ := series(t, m, "go_sql_max_open_connections")
	if _, ok := open["db_name=importd"]; !ok {
		t.Errorf("no pool statistics labelled db_name=importd: %v", open)
	}
	var one int
	if err := d.GetContext(t.Context(), &one, `SELECT $1::int`, 1); err != nil {
		t.Fatal(err)
	}
	prepared, _ := series(t, m, "importd_database_prepared_statements")
	unprepared, _ := series(t, m, "importd_database_unprepared_statements_total")
	if d := cmp.Diff([]map[string]float64{{"": 1}, {"": 0}}, []map[string]float64{prepared, unprepared}); d != "" {
		t.Errorf("importd_database_prepared_statements, importd_database_unprepared_statements_total (-want +got):\n%s", d)
	}
	d.Close()
	up, _ = series(t, m, "importd_database_up")
	if d := cmp.Diff(map[string]float64{"": 0}, up); d != "" {
		t.Errorf("importd_database_up of a closed pool (-want +got):\n%s", d)
	}
}

// The takeover counter counts by task type.
func TestTakeover_CountsByTaskType(t *testing.T) {
	t.Parallel()
	m := New()
	m.Takeover("account:process")
	m.Takeover("account:process")
	m.Takeover("payment_instruction:verify")
	got, err := series(t, m, "importd_takeovers_total")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"type=account:process": 2, "type=payment_instruction:verify": 1}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("importd_takeovers_total (-want +got):\n%s", d)
	}
	var nilMetrics *Metrics
	nilMetrics.Takeover("x")
	nilMetrics.WatchDatabase(nil)
	nilMetrics.WatchSuppliers(nil)
}
