package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/bulkimport/bulkimport/db"
)

// scrapeTimeout bounds what one scrape asks PostgreSQL, so that a database
// that hangs shows as down instead of holding the scrape until Prometheus
// gives up on it.
const scrapeTimeout = 5 * time.Second

// WatchDatabase registers the pool statistics of d (go_sql_*, labelled
// db_name="importd": connections open, in use and idle, and how often and
// how long callers waited for one), importd_database_up, which pings d at
// each scrape, and the figures of d's prepared statements
// (importd_database_prepared_statements and
// importd_database_unprepared_statements_total). It does nothing on a nil
// *Metrics.
func (m *Metrics) WatchDatabase(d *db.DB) {
	if m == nil {
		return
	}
	m.registry.MustRegister(
		collectors.NewDBStatsCollector(d.DB.DB, "importd"),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "importd_database_prepared_statements",
			Help: "Query texts the pool holds prepared (at most db.MaxStatements).",
		}, func() float64 { return float64(d.StatementStats().Prepared) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "importd_database_unprepared_statements_total",
			Help: "Statements run unprepared: their text came when the pool held db.MaxStatements texts, or could not be prepared.",
		}, func() float64 { return float64(d.StatementStats().Unprepared) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "importd_database_up",
			Help: "1 when PostgreSQL answered a ping at scrape time, 0 when it did not.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
			defer cancel()
			if d.PingContext(ctx) != nil {
				return 0
			}
			return 1
		}),
	)
}

// SupplierAccounts is one supplier's import processes by state, and its
// accounts refused at staging, as the progress counters hold them.
type SupplierAccounts struct {
	Supplier                              string
	Staged, InProgress, Completed, Failed int64
	// Refused counts the accounts whose latest E3 or E4 was refused for
	// their data; RefusedNotOngoing those refused because the supplier
	// was not Ongoing (the supplier's refusal). Neither is an import
	// process: a refused account has none unless an earlier staging made
	// one.
	Refused, RefusedNotOngoing int64
}

// SupplierSource reads every supplier's counts; the progress counters
// implement it in cmd, so that this package stays free of domain code.
type SupplierSource func(ctx context.Context) ([]SupplierAccounts, error)

// WatchSuppliers registers importd_supplier_accounts, each supplier's
// accounts by state (staged, in_progress, completed, failed, and the
// accounts refused at staging: refused, refused_not_ongoing), read from
// src at scrape time. The first four are import processes and add up to
// the page's total; the refused ones are counted apart, as on the page. The counts come from the database, so every API
// replica reports the same figures whatever process did the work; take
// max by (supplier, state) across replicas. It does nothing on a nil
// *Metrics.
func (m *Metrics) WatchSuppliers(src SupplierSource) {
	if m == nil {
		return
	}
	m.registry.MustRegister(&supplierCollector{src: src, desc: prometheus.NewDesc(
		"importd_supplier_accounts",
		"Accounts of each supplier by state: import processes staged, in_progress, completed or failed, and accounts refused at staging for their data (refused) or because the supplier was not Ongoing (refused_not_ongoing), read from the database at scrape time.",
		[]string{"supplier", "state"}, nil,
	)})
}

type supplierCollector struct {
	src  SupplierSource
	desc *prometheus.Desc
}

func (c *supplierCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *supplierCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	rows, err := c.src(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, fmt.Errorf("supplier accounts: %w", err))
		return
	}
	for _, r := range rows {
		for _, s := range []struct {
			state string
			n     int64
		}{{"staged", r.Staged}, {"in_progress", r.InProgress}, {"completed", r.Completed}, {"failed", r.Failed},
			{"refused", r.Refused}, {"refused_not_ongoing", r.RefusedNotOngoing}} {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(s.n), r.Supplier, s.state)
		}
	}
}
