package metrics

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
)

// QueueInspector is the part of *asynq.Inspector the queue collector uses.
type QueueInspector interface {
	Queues() ([]string, error)
	GetQueueInfo(queue string) (*asynq.QueueInfo, error)
}

// queueStates are the state label values of importd_queue_tasks.
var queueStates = []string{"pending", "active", "scheduled", "retry", "archived"}

// WatchQueues registers a collector that asks insp, at each scrape, how
// many tasks each of queues holds in each state. A queue that has never
// held a task reports zeros. It does nothing on a nil *Metrics.
func (m *Metrics) WatchQueues(insp QueueInspector, queues ...string) {
	if m == nil {
		return
	}
	m.registry.MustRegister(&queueCollector{insp: insp, queues: queues,
		desc: prometheus.NewDesc(
			"importd_queue_tasks",
			"Tasks in each Asynq queue by state, read from Redis at scrape time.",
			[]string{"queue", "state"}, nil),
		latency: prometheus.NewDesc(
			"importd_queue_latency_seconds",
			"Age of the oldest pending task of each Asynq queue (0 when none is pending), read from Redis at scrape time.",
			[]string{"queue"}, nil),
		up: prometheus.NewDesc(
			"importd_redis_up",
			"1 when Redis answered the scrape's queue inspection, 0 when it did not.",
			nil, nil),
	})
}

type queueCollector struct {
	insp    QueueInspector
	queues  []string
	desc    *prometheus.Desc
	latency *prometheus.Desc
	up      *prometheus.Desc
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.latency
	ch <- c.up
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	// Asynq knows a queue once a task was enqueued to it; asking about
	// another is an error, so list the known ones first.
	known, err := c.insp.Queues()
	if err != nil {
		// The series of Redis's health stays, so that an alert can fire
		// on it; the queue sizes are reported as failed.
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		ch <- prometheus.NewInvalidMetric(c.desc, fmt.Errorf("list asynq queues: %w", err))
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, q := range c.queues {
		counts := make([]int, len(queueStates))
		var latency time.Duration
		if slices.Contains(known, q) {
			info, err := c.insp.GetQueueInfo(q)
			if err != nil {
				ch <- prometheus.NewInvalidMetric(c.desc, fmt.Errorf("asynq queue %s: %w", q, err))
				continue
			}
			counts = []int{info.Pending, info.Active, info.Scheduled, info.Retry, info.Archived}
			latency = info.Latency
		}
		for i, state := range queueStates {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[i]), q, state)
		}
		ch <- prometheus.MustNewConstMetric(c.latency, prometheus.GaugeValue, latency.Seconds(), q)
	}
}

// slogErrorLog routes promhttp's error log through log/slog.
type slogErrorLog struct{ log *slog.Logger }

func (l slogErrorLog) Println(v ...any) {
	l.log.Warn(fmt.Sprint(v...), "component", "metrics")
}
