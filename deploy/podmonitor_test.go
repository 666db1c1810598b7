package deploy

import (
	"cmp"
	"net"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// podMonitorCRD is the Prometheus Operator's CustomResourceDefinition of the
// PodMonitor, unchanged from
// github.com/prometheus-operator/prometheus-operator@v0.85.0
// (example/prometheus-operator-crd; fetched with `go mod download -json
// github.com/prometheus-operator/prometheus-operator@v0.85.0`, Apache-2.0).
const podMonitorCRD = "testdata/monitoring.coreos.com_podmonitors.yaml"

// podMonitor holds the fields of the Prometheus Operator's PodMonitor (its
// pkg/apis/monitoring/v1 types) that the tests read. It is decoded only after
// the document passed the CRD's schema, which refuses unknown fields.
type podMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			Any        bool     `json:"any"`
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		PodMetricsEndpoints []podMetricsEndpoint `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

type podMetricsEndpoint struct {
	Port       *string             `json:"port"`
	PortNumber *int32              `json:"portNumber"`
	TargetPort *intstr.IntOrString `json:"targetPort"`
	Path       string              `json:"path"`
	Scheme     string              `json:"scheme"`
}

// Nothing in deploy/k8s had Prometheus scrape the pods, so the worker
// ScaledObject's queries had no series to read. A PodMonitor now selects the
// pods of importd-api and importd-worker, and only pods that have a container
// port of the name it scrapes (a pod without one would be dropped silently),
// on that port, which is the one METRICS_ADDR listens on, at /metrics over
// plain HTTP, in its own namespace.
func TestK8s_PodMonitorScrapesTheMetricsPortOfTheAPIAndWorkerPods(t *testing.T) {
	t.Parallel()
	objs := loadK8s(t)
	scraped := map[string]bool{} // Deployment -> a PodMonitor scrapes its metrics port
	for _, pm := range objs.podMonitors {
		sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
		if err != nil || sel.Empty() {
			t.Errorf("PodMonitor %q: bad or empty selector %v: %v", pm.Name, pm.Spec.Selector, err)
			continue
		}
		if ns := pm.Spec.NamespaceSelector; ns.Any || len(ns.MatchNames) > 0 {
			t.Errorf("PodMonitor %q: namespaceSelector %+v; the manifests are namespace-less, so the pods are in the PodMonitor's own namespace", pm.Name, ns)
		}
		if len(pm.Spec.PodMetricsEndpoints) == 0 {
			t.Errorf("PodMonitor %q: no podMetricsEndpoints", pm.Name)
		}
		var selected []string
		for _, d := range objs.deployments {
			if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				continue
			}
			selected = append(selected, d.Name)
			for i, ep := range pm.Spec.PodMetricsEndpoints {
				if scrapesMetricsPort(t, pm.Name, i, ep, objs, d.Name) {
					scraped[d.Name] = true
				}
			}
		}
		if len(selected) == 0 {
			t.Errorf("PodMonitor %q: selector %s matches the pods of no Deployment", pm.Name, sel)
		}
	}
	for _, name := range []string{"importd-api", "importd-worker"} {
		if !scraped[name] {
			t.Errorf("no PodMonitor scrapes the metrics port of Deployment %q's pods (scraped: %v)", name, scraped)
		}
	}
}

// scrapesMetricsPort reports whether endpoint i of PodMonitor pm scrapes
// /metrics on METRICS_ADDR's port of a container of Deployment name, and
// reports an error when it does not.
func scrapesMetricsPort(t *testing.T, pm string, i int, ep podMetricsEndpoint, objs *k8sObjects, name string) bool {
	t.Helper()
	where := "PodMonitor " + strconv.Quote(pm) + " endpoint " + strconv.Itoa(i)
	if ep.Port == nil || *ep.Port == "" || ep.PortNumber != nil || ep.TargetPort != nil {
		t.Errorf("%s: want the container port by name (port), and neither portNumber nor the deprecated targetPort", where)
		return false
	}
	if p := cmp.Or(ep.Path, "/metrics"); p != "/metrics" {
		t.Errorf("%s: path %q; importd serves /metrics", where, p)
		return false
	}
	if s := cmp.Or(ep.Scheme, "http"); s != "http" {
		t.Errorf("%s: scheme %q; METRICS_ADDR speaks plain HTTP", where, s)
		return false
	}
	d := objs.deployment(name)
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name != *ep.Port {
				continue
			}
			vars, _ := objs.env(&c)
			_, port, err := net.SplitHostPort(vars["METRICS_ADDR"])
			if err != nil || port != strconv.Itoa(int(p.ContainerPort)) {
				t.Errorf("%s: scrapes port %q (%d) of Deployment %q container %q, where METRICS_ADDR is %q", where, p.Name, p.ContainerPort, name, c.Name, vars["METRICS_ADDR"])
				return false
			}
			return true
		}
	}
	t.Errorf("%s: selects the pods of Deployment %q, which have no container port named %q", where, name, *ep.Port)
	return false
}

// The schema check refuses what the Prometheus Operator's API would: a
// misspelt endpoint field, an interval that is not a Prometheus duration, a
// scheme other than http or https, a PodMonitor without a selector, a
// misspelt metadata field; and passes a minimal one.
func TestK8s_PodMonitorSchemaRefusesWhatTheOperatorWould(t *testing.T) {
	t.Parallel()
	const good = `apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: x
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: importd
  podMetricsEndpoints:
    - port: metrics
      interval: 15s
`
	tm := metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1", Kind: "PodMonitor"}
	if _, err := decodeCustom(podMonitorCRD, tm, []byte(good)); err != nil {
		t.Fatalf("a minimal PodMonitor: %v", err)
	}
	for name, bad := range map[string]string{
		"misspelt endpoint field": strings.Replace(good, "    - port: metrics", "    - ports: metrics", 1),
		"misspelt spec field":     strings.Replace(good, "  podMetricsEndpoints:", "  podMetricEndpoints:", 1),
		"interval not a duration": strings.Replace(good, "interval: 15s", "interval: 15 seconds", 1),
		"scheme not http(s)":      strings.Replace(good, "interval: 15s", "interval: 15s\n      scheme: tcp", 1),
		"no selector":             strings.Replace(good, "  selector:\n    matchLabels:\n      app.kubernetes.io/name: importd\n", "", 1),
		"misspelt metadata field": strings.Replace(good, "  name: x", "  name: x\n  label: {a: b}", 1),
	} {
		if bad == good {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		if _, err := decodeCustom(podMonitorCRD, tm, []byte(bad)); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}
