package metrics

import (
	"fmt"
	"log/slog"
	"slices"

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
	m.registry.MustRegister(&queueCollector{insp: insp, queues: queues, desc: prometheus.NewDesc(
		"importd_queue_tasks",
		"Tasks in each Asynq queue by state, read from Redis at scrape time.",
		[]string{"queue", "state"}, nil,
	)})
}

type queueCollector struct {
	insp   QueueInspector
	queues []string
	desc   *prometheus.Desc
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	// Asynq knows a queue once a task was enqueued to it; asking about
	// another is an error, so list the known ones first.
	known, err := c.insp.Queues()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, fmt.Errorf("list asynq queues: %w", err))
		return
	}
	for _, q := range c.queues {
		counts := make([]int, len(queueStates))
		if slices.Contains(known, q) {
			info, err := c.insp.GetQueueInfo(q)
			if err != nil {
				ch <- prometheus.NewInvalidMetric(c.desc, fmt.Errorf("asynq queue %s: %w", q, err))
				continue
			}
			counts = []int{info.Pending, info.Active, info.Scheduled, info.Retry, info.Archived}
		}
		for i, state := range queueStates {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[i]), q, state)
		}
	}
}

// slogErrorLog routes promhttp's error log through log/slog.
type slogErrorLog struct{ log *slog.Logger }

func (l slogErrorLog) Println(v ...any) {
	l.log.Warn(fmt.Sprint(v...), "component", "metrics")
}
