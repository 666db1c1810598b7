package deploy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

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
