package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"sigs.k8s.io/yaml"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/metrics"
)

const (
	alertRules     = "prometheus/importd-alerts.yml"
	alertRuleTests = "prometheus/importd-alerts_test.yml"
	dashboard      = "grafana/importd-dashboard.json"
)

// promtool is Debian's prometheus package's rule checker; make test
// installs it (deploy/local/stack.sh promtool).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (make test installs Debian's prometheus package)")
	}
	return p
}

// The alerting rules are valid Prometheus rules, and their unit tests (an
// error rate, a database down, a supplier over its failure threshold) pass.
func TestAlertRules_PassPromtoolsCheckAndTheirUnitTests(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", alertRules}, {"test", "rules", alertRuleTests}} {
		cmd := exec.Command(bin, args...)
		if strings.HasPrefix(args[0], "test") {
			cmd.Dir = "prometheus"
			cmd.Args[3] = strings.TrimPrefix(alertRuleTests, "prometheus/")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// metricName finds the series names in a PromQL expression: importd's own
// and the client library's (go_sql_ for the pool, process_ for memory).
var metricName = regexp.MustCompile(`\b(?:importd|go_sql|process)_[a-z_]+\b`)

// expressions returns every PromQL expression of the rules and the
// dashboard, by where it stands.
func expressions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	raw, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("%s: %v", alertRules, err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out[alertRules+": "+r.Alert] = r.Expr
		}
	}
	raw, err = os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out[dashboard+": "+p.Title+" "+tg.RefID] = tg.Expr
		}
	}
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			out[dashboard+": variable "+v.Name] = v.Definition
		}
	}
	for where, q := range scalingQueries(t) {
		out[where] = q
	}
	return out
}

// scalingQueries returns the PromQL query of every prometheus trigger of
// the ScaledObjects under k8s/, by where it stands.
func scalingQueries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, so := range loadK8s(t).scaledObjects {
		for i, tr := range so.Spec.Triggers {
			if tr.Type == "prometheus" {
				out[fmt.Sprintf("%s: ScaledObject %s trigger %d (%s)", k8sDir, so.Name, i, tr.Name)] = tr.Metadata["query"]
			}
		}
	}
	return out
}

// exported returns the names of every series a serving importd process
// registers, histograms with their _bucket, _sum and _count series.
func exported(t *testing.T) []string {
	t.Helper()
	m := metrics.New()
	rc := redis.NewClient(mustRedisOptions(t, dbtest.NewRedis(t)))
	t.Cleanup(func() { rc.Close() })
	m.WatchQueues(asynq.NewInspectorFromRedisClient(rc), "accounts")
	d := dbtest.New(t)
	m.WatchDatabase(d)
	m.WatchSuppliers(func(context.Context) ([]metrics.SupplierAccounts, error) { return nil, nil })

	ch := make(chan *prometheus.Desc)
	go func() {
		m.Registry().Describe(ch)
		close(ch)
	}()
	// A Desc prints its name as fqName: "..."; the client library exposes
	// it no other way.
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	var names []string
	for d := range ch {
		if s := fq.FindStringSubmatch(d.String()); s != nil {
			names = append(names, s[1], s[1]+"_bucket", s[1]+"_sum", s[1]+"_count")
		}
	}
	sort.Strings(names)
	return names
}

func mustRedisOptions(t *testing.T, url string) *redis.Options {
	t.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// Every series the dashboard and the alerting rules read is one importd
// exports: a renamed metric, or a panel written against a metric that
// does not exist, shows here instead of as an empty panel or an alert
// that can never fire.
func TestObservability_EveryMetricNamedIsOneImportdExports(t *testing.T) {
	t.Parallel()
	names := exported(t)
	exprs := expressions(t)
	if len(exprs) < 10 {
		t.Fatalf("found %d expressions in the rules and the dashboard; the files did not parse as expected", len(exprs))
	}
	for where, e := range exprs {
		found := metricName.FindAllString(e, -1)
		if len(found) == 0 {
			t.Errorf("%s: no importd metric in %q", where, e)
		}
		for _, n := range found {
			if _, ok := slices.BinarySearch(names, n); !ok {
				t.Errorf("%s: %s is not a metric importd exports", where, n)
			}
		}
	}
}

// The worker's ScaledObject reads the accounts queue as importd exports it:
// Prometheus's own engine (promtool's rule tests) evaluates each query over
// the series that two importd processes (an API and a worker: every process
// reports the queues) gave while a real Redis held 7 pending and 9 scheduled
// accounts tasks and 2 pending e-mail tasks. The depth is 7, counted once
// and not once per process, and the age is the oldest pending task's.
func TestScaledObject_QueriesReadTheAccountsQueueAsImportdExportsIt(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	rc := redis.NewClient(mustRedisOptions(t, dbtest.NewRedis(t)))
	t.Cleanup(func() { rc.Close() })
	client := asynq.NewClientFromRedisClient(rc)
	enqueue := func(n int, opts ...asynq.Option) {
		for range n {
			if _, err := client.Enqueue(asynq.NewTask("account:process", nil), opts...); err != nil {
				t.Fatal(err)
			}
		}
	}
	enqueue(7, asynq.Queue("accounts"))
	enqueue(9, asynq.Queue("accounts"), asynq.ProcessIn(time.Hour))
	enqueue(2, asynq.Queue("emails"))

	// One registry per process, scraped as Prometheus would, with the pod
	// label that tells their series apart.
	var series []string
	oldest := 0.0
	for _, pod := range []string{"importd-api-0", "importd-worker-0"} {
		m := metrics.New()
		m.WatchQueues(asynq.NewInspectorFromRedisClient(rc), "accounts", "vendors", "emails")
		fams, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if !strings.HasPrefix(f.GetName(), "importd_queue_") {
				continue
			}
			for _, s := range f.GetMetric() {
				ls := []string{`pod="` + pod + `"`}
				for _, l := range s.GetLabel() {
					ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				v := s.GetGauge().GetValue()
				if f.GetName() == "importd_queue_latency_seconds" && slices.Contains(ls, `queue="accounts"`) {
					oldest = max(oldest, v)
				}
				// The same sample at every scrape of the test's minute.
				series = append(series, fmt.Sprintf("      - series: '%s{%s}'\n        values: '%s'",
					f.GetName(), strings.Join(ls, ","), strings.TrimSpace(strings.Repeat(strconv.FormatFloat(v, 'g', -1, 64)+" ", 5))))
			}
		}
	}
	if oldest <= 0 {
		t.Fatalf("the accounts queue's oldest pending task has age %v", oldest)
	}

	want := map[string]float64{"importd_queue_tasks": 7, "importd_queue_latency_seconds": oldest}
	var tests []string
	queries := scalingQueries(t)
	for where, q := range queries {
		found := metricName.FindAllString(q, -1)
		if len(found) != 1 {
			t.Errorf("%s: query %q reads %q, want one importd series", where, q, found)
			continue
		}
		v, ok := want[found[0]]
		if !ok {
			t.Errorf("%s: query %q reads %s, which this test does not know", where, q, found[0])
			continue
		}
		tests = append(tests, fmt.Sprintf("      - expr: '%s'\n        eval_time: 1m\n        exp_samples:\n          - labels: '{}'\n            value: %s",
			q, strconv.FormatFloat(v, 'g', -1, 64)))
	}
	if len(queries) < 2 {
		t.Fatalf("found %d queries in the ScaledObjects, want the accounts queue's depth and age", len(queries))
	}
	file := filepath.Join(t.TempDir(), "scaling_test.yml")
	body := "rule_files: []\nevaluation_interval: 15s\ntests:\n  - interval: 15s\n    input_series:\n" +
		strings.Join(series, "\n") + "\n    promql_expr_test:\n" + strings.Join(tests, "\n") + "\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "test", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s\n%s", err, out, body)
	}
}

// The example Prometheus configuration passes `promtool check config` (which
// also checks the alerting rules it loads), and docs/monitoring.md shows it
// as it is.
func TestPrometheusConfig_PassesPromtoolAndIsTheOneTheDocsShow(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	cmd := exec.Command(bin, "check", "config", "prometheus.yml")
	cmd.Dir = "prometheus"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check config prometheus.yml: %v\n%s", err, out)
	}
	conf, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/monitoring.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```yaml\n"+string(conf)+"```\n") {
		t.Error("docs/monitoring.md does not show deploy/prometheus/prometheus.yml as it is (a ```yaml block)")
	}
}
