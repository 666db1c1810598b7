package metrics

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
)

type fakeInspector struct {
	queues []string
	infos  map[string]*asynq.QueueInfo
	err    error
}

func (f fakeInspector) Queues() ([]string, error) { return f.queues, f.err }
func (f fakeInspector) GetQueueInfo(q string) (*asynq.QueueInfo, error) {
	if info, ok := f.infos[q]; ok {
		return info, nil
	}
	return nil, errors.New("boom")
}

// gauges reads importd_queue_tasks by "queue/state".
func gauges(t *testing.T, m *Metrics) (map[string]float64, error) {
	t.Helper()
	fams, err := m.Registry().Gather()
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "importd_queue_tasks" {
			continue
		}
		for _, s := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["queue"]+"/"+l["state"]] = s.GetGauge().GetValue()
		}
	}
	return out, err
}

func TestQueues_SizesByStateAndZeroForUnusedQueues(t *testing.T) {
	t.Parallel()
	m := New()
	m.WatchQueues(fakeInspector{queues: []string{"accounts"}, infos: map[string]*asynq.QueueInfo{
		"accounts": {Pending: 3, Active: 2, Scheduled: 1, Retry: 4, Archived: 5},
	}}, "accounts", "emails")
	got, err := gauges(t, m)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"accounts/pending": 3, "accounts/active": 2, "accounts/scheduled": 1, "accounts/retry": 4, "accounts/archived": 5,
		"emails/pending": 0, "emails/active": 0, "emails/scheduled": 0, "emails/retry": 0, "emails/archived": 0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("importd_queue_tasks (-want +got):\n%s", diff)
	}
}

// A queue that cannot be read is an error of the scrape, and the other
// queues and series are still gathered (the handler serves them).
func TestQueues_AFailingQueueLeavesTheOthers(t *testing.T) {
	t.Parallel()
	m := New()
	m.AccountCreated()
	m.WatchQueues(fakeInspector{queues: []string{"accounts", "emails"}, infos: map[string]*asynq.QueueInfo{
		"emails": {Pending: 7},
	}}, "accounts", "emails")
	got, err := gauges(t, m)
	if err == nil {
		t.Error("no error for the queue that failed")
	}
	if got["emails/pending"] != 7 {
		t.Errorf("the readable queue: %v", got)
	}
	fams, _ := m.Registry().Gather()
	created := -1.0
	for _, f := range fams {
		if f.GetName() == "importd_accounts_created_total" {
			created = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if created != 1 {
		t.Errorf("importd_accounts_created_total %v, want 1", created)
	}
}

func TestMetrics_NilCountsNothing(t *testing.T) {
	t.Parallel()
	var m *Metrics
	m.ObserveHTTP("GET", "/x", 200, time.Second)
	m.ObserveJob("t", JobSuccess, time.Second)
	m.AccountCreated()
	m.ValidationError("c")
	m.VendorCall("v", VendorOK)
	m.CreationTransaction(TxCommitted, 3)
	m.AuthFailures("api", "wrong", 1)
	m.KnownTaskTypes("t")
	m.WatchQueues(fakeInspector{})
}
