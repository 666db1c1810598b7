package deploy

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// k8sDir holds the Kubernetes manifests, relative to this package.
const k8sDir = "k8s"

// k8sTypes maps "apiVersion kind" to a constructor of the typed object that
// the manifest is strictly decoded into. A kind missing here fails the test:
// add it here, with the checks it needs, when a manifest needs a new kind.
var k8sTypes = map[string]func() any{
	"apps/v1 Deployment":                     func() any { return new(appsv1.Deployment) },
	"v1 Service":                             func() any { return new(corev1.Service) },
	"v1 ConfigMap":                           func() any { return new(corev1.ConfigMap) },
	"v1 Secret":                              func() any { return new(corev1.Secret) },
	"batch/v1 Job":                           func() any { return new(batchv1.Job) },
	"policy/v1 PodDisruptionBudget":          func() any { return new(policyv1.PodDisruptionBudget) },
	"autoscaling/v2 HorizontalPodAutoscaler": func() any { return new(autoscalingv2.HorizontalPodAutoscaler) },
}

// importdSubcommands are the long-running importd subcommands, each of which
// serves /healthz and /readyz on HTTP_ADDR.
var importdSubcommands = []string{"serve", "api", "worker", "dashboard"}

// manifest is one YAML document of a file under k8s/.
type manifest struct {
	where string // file and document index, for messages
	kind  string
	obj   any // one of the pointer types in k8sTypes
}

// k8sObjects is what every test reads: all the manifests, decoded once.
type k8sObjects struct {
	all         []manifest
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	configMaps  []*corev1.ConfigMap
	secrets     []*corev1.Secret
	jobs        []*batchv1.Job
	pdbs        []*policyv1.PodDisruptionBudget
	hpas        []*autoscalingv2.HorizontalPodAutoscaler
	// scaledObjects are KEDA's, checked against its CRD (crdKinds).
	scaledObjects []*scaledObject
	// podMonitors are the Prometheus Operator's, checked against its CRD.
	podMonitors []*podMonitor
}

var loadK8sOnce = sync.OnceValues(loadK8sObjects)

func loadK8s(t *testing.T) *k8sObjects {
	t.Helper()
	objs, err := loadK8sOnce()
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// docSeparator is a YAML document separator line, with an optional comment.
var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// loadK8sObjects reads every *.yaml under k8s/, splits multi-document files
// and decodes each document strictly into its typed object (a custom
// resource after its CRD's schema passed it), so that a misspelt or
// misplaced field is an error instead of being ignored by the API server's
// lenient defaults.
func loadK8sObjects() (*k8sObjects, error) {
	var files []string
	err := filepath.WalkDir(k8sDir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", k8sDir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no manifests under %s", k8sDir)
	}
	objs := &k8sObjects{}
	var problems []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		for i, doc := range docSeparator.Split(string(data), -1) {
			where := fmt.Sprintf("%s (document %d)", file, i+1)
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				problems = append(problems, fmt.Sprintf("%s: not YAML: %v", where, err))
				continue
			}
			var obj any
			if newObj, ok := k8sTypes[tm.APIVersion+" "+tm.Kind]; ok {
				obj = newObj()
				err = yaml.UnmarshalStrict([]byte(doc), obj)
			} else if crd, ok := crdKinds[tm.APIVersion+" "+tm.Kind]; ok {
				obj, err = decodeCustom(crd, tm, []byte(doc))
			} else {
				problems = append(problems, fmt.Sprintf("%s: unknown kind %q with apiVersion %q (add it to k8sTypes or crdKinds if it is meant)", where, tm.Kind, tm.APIVersion))
				continue
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %s: %v", where, tm.Kind, err))
				continue
			}
			objs.all = append(objs.all, manifest{where: where, kind: tm.Kind, obj: obj})
			switch o := obj.(type) {
			case *appsv1.Deployment:
				objs.deployments = append(objs.deployments, o)
			case *corev1.Service:
				objs.services = append(objs.services, o)
			case *corev1.ConfigMap:
				objs.configMaps = append(objs.configMaps, o)
			case *corev1.Secret:
				objs.secrets = append(objs.secrets, o)
			case *batchv1.Job:
				objs.jobs = append(objs.jobs, o)
			case *policyv1.PodDisruptionBudget:
				objs.pdbs = append(objs.pdbs, o)
			case *autoscalingv2.HorizontalPodAutoscaler:
				objs.hpas = append(objs.hpas, o)
			case *scaledObject:
				objs.scaledObjects = append(objs.scaledObjects, o)
			case *podMonitor:
				objs.podMonitors = append(objs.podMonitors, o)
			}
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("manifests under %s do not decode:\n%s", k8sDir, strings.Join(problems, "\n"))
	}
	return objs, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for line := range strings.Lines(doc) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// podSpecs returns every pod template: Deployments' and Jobs'.
func (o *k8sObjects) podSpecs() map[string]*corev1.PodSpec {
	specs := map[string]*corev1.PodSpec{}
	for _, d := range o.deployments {
		specs["Deployment "+d.Name] = &d.Spec.Template.Spec
	}
	for _, j := range o.jobs {
		specs["Job "+j.Name] = &j.Spec.Template.Spec
	}
	return specs
}

func (o *k8sObjects) configMap(name string) *corev1.ConfigMap {
	for _, c := range o.configMaps {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (o *k8sObjects) secret(name string) *corev1.Secret {
	for _, s := range o.secrets {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (o *k8sObjects) deployment(name string) *appsv1.Deployment {
	for _, d := range o.deployments {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// env resolves the environment variables a container gets from its env and
// envFrom entries, as Kubernetes would, reporting references to ConfigMaps,
// Secrets or keys that the manifests do not define.
func (o *k8sObjects) env(c *corev1.Container) (vars map[string]string, problems []string) {
	vars = map[string]string{}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm := o.configMap(from.ConfigMapRef.Name)
			if cm == nil {
				problems = append(problems, fmt.Sprintf("envFrom names ConfigMap %q, which no manifest defines", from.ConfigMapRef.Name))
				continue
			}
			for k, v := range cm.Data {
				vars[from.Prefix+k] = v
			}
		case from.SecretRef != nil:
			s := o.secret(from.SecretRef.Name)
			if s == nil {
				problems = append(problems, fmt.Sprintf("envFrom names Secret %q, which no manifest defines", from.SecretRef.Name))
				continue
			}
			for k, v := range s.StringData {
				vars[from.Prefix+k] = v
			}
			for k, v := range s.Data {
				vars[from.Prefix+k] = string(v)
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s := o.secret(ref.Name)
			if s == nil {
				problems = append(problems, fmt.Sprintf("%s names Secret %q, which no manifest defines", e.Name, ref.Name))
				continue
			}
			v, ok := s.StringData[ref.Key]
			if !ok {
				b, inData := s.Data[ref.Key]
				v, ok = string(b), inData
			}
			if !ok {
				problems = append(problems, fmt.Sprintf("%s names key %q of Secret %q, which has no such key", e.Name, ref.Key, ref.Name))
				continue
			}
			vars[e.Name] = v
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm := o.configMap(ref.Name)
			if cm == nil {
				problems = append(problems, fmt.Sprintf("%s names ConfigMap %q, which no manifest defines", e.Name, ref.Name))
				continue
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s names key %q of ConfigMap %q, which has no such key", e.Name, ref.Key, ref.Name))
				continue
			}
			vars[e.Name] = v
		default:
			vars[e.Name] = "" // field or resource reference: present, value unknown here
		}
	}
	return vars, problems
}

func TestK8s_ManifestsDecodeStrictly(t *testing.T) {
	t.Parallel()
	objs := loadK8s(t)
	for _, m := range objs.all {
		meta, err := metaOf(m.obj)
		if err != nil {
			t.Errorf("%s: %v", m.where, err)
			continue
		}
		if meta.Name == "" {
			t.Errorf("%s: %s has no metadata.name", m.where, m.kind)
		}
		if meta.Namespace != "" {
			t.Errorf("%s: %s %q sets namespace %q; the manifests are namespace-less, the namespace is chosen at apply time", m.where, m.kind, meta.Name, meta.Namespace)
		}
	}
	want := map[string]int{"ConfigMap": 1, "Secret": 1, "Deployment": 2, "Service": 1, "Job": 1, "PodDisruptionBudget": 2, "ScaledObject": 1, "PodMonitor": 1}
	got := map[string]int{}
	for _, m := range objs.all {
		got[m.kind]++
	}
	for kind, n := range want {
		if got[kind] < n {
			t.Errorf("want at least %d %s under %s, found %d", n, kind, k8sDir, got[kind])
		}
	}
}

func metaOf(obj any) (*metav1.ObjectMeta, error) {
	type hasMeta interface{ GetObjectMeta() metav1.Object }
	m, ok := obj.(hasMeta)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	om, ok := m.GetObjectMeta().(*metav1.ObjectMeta)
	if !ok {
		return nil, fmt.Errorf("%T: unexpected metadata type", obj)
	}
	return om, nil
}

func TestK8s_DeploymentsProbeHealthAndReadiness(t *testing.T) {
	t.Parallel()
	objs := loadK8s(t)
	for _, d := range objs.deployments {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			if len(d.Spec.Template.Spec.Containers) == 0 {
				t.Fatalf("Deployment %q has no containers", d.Name)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				checkProbe(t, d.Name, &c, "readinessProbe", c.ReadinessProbe, "/readyz")
				checkProbe(t, d.Name, &c, "livenessProbe", c.LivenessProbe, "/healthz")
			}
		})
	}
}

func checkProbe(t *testing.T, owner string, c *corev1.Container, field string, p *corev1.Probe, wantPath string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("Deployment %q container %q: %s must be an httpGet on %s", owner, c.Name, field, wantPath)
		return
	}
	if p.HTTPGet.Path != wantPath {
		t.Errorf("Deployment %q container %q: %s path = %q, want %q", owner, c.Name, field, p.HTTPGet.Path, wantPath)
	}
	port := p.HTTPGet.Port.IntValue()
	if name := p.HTTPGet.Port.StrVal; name != "" {
		port = 0
		for _, cp := range c.Ports {
			if cp.Name == name {
				port = int(cp.ContainerPort)
			}
		}
		if port == 0 {
			t.Errorf("Deployment %q container %q: %s names port %q, which the container does not declare", owner, c.Name, field, name)
			return
		}
	}
	if port != 8080 {
		t.Errorf("Deployment %q container %q: %s probes port %d, want 8080 (HTTP_ADDR)", owner, c.Name, field, port)
	}
}

func TestK8s_EveryContainerHasRequestsAndLimits(t *testing.T) {
	t.Parallel()
	for owner, spec := range loadK8s(t).podSpecs() {
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, hasReq := c.Resources.Requests[res]
				lim, hasLim := c.Resources.Limits[res]
				if !hasReq || req.IsZero() {
					t.Errorf("%s container %q: no %s request", owner, c.Name, res)
				}
				if !hasLim || lim.IsZero() {
					t.Errorf("%s container %q: no %s limit", owner, c.Name, res)
				}
				if hasReq && hasLim && req.Cmp(lim) > 0 {
					t.Errorf("%s container %q: %s request %s exceeds its limit %s", owner, c.Name, res, req.String(), lim.String())
				}
			}
		}
	}
}

func TestK8s_ContainersRunAsNonRootOnAReadOnlyFilesystem(t *testing.T) {
	t.Parallel()
	for owner, spec := range loadK8s(t).podSpecs() {
		podNonRoot := spec.SecurityContext != nil && isTrue(spec.SecurityContext.RunAsNonRoot)
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			sc := c.SecurityContext
			if sc == nil {
				t.Errorf("%s container %q: no securityContext", owner, c.Name)
				continue
			}
			if !podNonRoot && !isTrue(sc.RunAsNonRoot) {
				t.Errorf("%s container %q: runAsNonRoot is not true (pod or container)", owner, c.Name)
			}
			if !isTrue(sc.ReadOnlyRootFilesystem) {
				t.Errorf("%s container %q: readOnlyRootFilesystem is not true", owner, c.Name)
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s container %q: allowPrivilegeEscalation must be false", owner, c.Name)
			}
		}
	}
}

func isTrue(b *bool) bool { return b != nil && *b }

func TestK8s_GracePeriodOutlastsShutdownTimeout(t *testing.T) {
	t.Parallel()
	objs := loadK8s(t)
	for owner, spec := range objs.podSpecs() {
		for _, c := range spec.Containers {
			vars, _ := objs.env(&c)
			raw, ok := vars["SHUTDOWN_TIMEOUT"]
			if !ok {
				t.Errorf("%s container %q: SHUTDOWN_TIMEOUT is not set (the ConfigMap should set it)", owner, c.Name)
				continue
			}
			shutdown, err := time.ParseDuration(raw)
			if err != nil {
				t.Errorf("%s container %q: SHUTDOWN_TIMEOUT %q: %v", owner, c.Name, raw, err)
				continue
			}
			// The kubelet runs the preStop hook first, inside the same grace
			// period, and only then sends SIGTERM.
			var preStop time.Duration
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
				preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
			}
			if spec.TerminationGracePeriodSeconds == nil {
				t.Errorf("%s: terminationGracePeriodSeconds is unset (default 30 s); want more than preStop %v + SHUTDOWN_TIMEOUT %v", owner, preStop, shutdown)
				continue
			}
			grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
			if grace <= preStop+shutdown {
				t.Errorf("%s: terminationGracePeriodSeconds %v must exceed preStop %v + SHUTDOWN_TIMEOUT %v, or the kubelet kills importd mid-drain", owner, grace, preStop, shutdown)
			}
		}
	}
}

func TestK8s_ContainersGetTheirEnvironment(t *testing.T) {
	t.Parallel()
	objs := loadK8s(t)
	for owner, spec := range objs.podSpecs() {
		for _, c := range spec.Containers {
			vars, problems := objs.env(&c)
			for _, p := range problems {
				t.Errorf("%s container %q: %s", owner, c.Name, p)
			}
			sub := ""
			if len(c.Args) > 0 {
				sub = c.Args[0]
			}
			// What each subcommand refuses to start without (its needs in
			// cmd/importd/config.go).
			want := map[string][]string{
				"serve":     {"DATABASE_URL", "REDIS_URL", "TOKEN_SECRET"},
				"api":       {"DATABASE_URL", "REDIS_URL", "TOKEN_SECRET"},
				"worker":    {"DATABASE_URL", "REDIS_URL"},
				"dashboard": {"REDIS_URL", "MONITORING_USER", "MONITORING_PASSWORD"},
				"migrate":   {"DATABASE_URL"},
			}[sub]
			if want == nil {
				t.Errorf("%s container %q: args %q name no importd subcommand", owner, c.Name, c.Args)
			}
			for _, k := range want {
				if _, ok := vars[k]; !ok {
					t.Errorf("%s container %q (importd %s): %s is not set", owner, c.Name, sub, k)
				}
			}
			_, user := vars["MONITORING_USER"]
			_, password := vars["MONITORING_PASSWORD"]
			if user != password {
				t.Errorf("%s container %q: importd refuses MONITORING_USER without MONITORING_PASSWORD and the other way round (user set: %v, password set: %v)", owner, c.Name, user, password)
			}
			if slices.Contains(importdSubcommands, sub) && vars["HTTP_ADDR"] != "0.0.0.0:8080" {
				t.Errorf("%s container %q: HTTP_ADDR = %q, want 0.0.0.0:8080: the probes cannot reach the loopback default", owner, c.Name, vars["HTTP_ADDR"])
			}
		}
	}
}

func TestK8s_ContainersRunAKnownSubcommand(t *testing.T) {
	t.Parallel()
	objs := loadK8s(t)
	for _, d := range objs.deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			if len(c.Args) == 0 || !slices.Contains(importdSubcommands, c.Args[0]) {
				t.Errorf("Deployment %q container %q: args %q, want one of the long-running subcommands %q", d.Name, c.Name, c.Args, importdSubcommands)
			}
		}
	}
	if len(objs.jobs) == 0 {
		t.Fatal("no Job runs the migrations")
	}
	for _, j := range objs.jobs {
		spec := j.Spec.Template.Spec
		if spec.RestartPolicy != corev1.RestartPolicyNever && spec.RestartPolicy != corev1.RestartPolicyOnFailure {
			t.Errorf("Job %q: restartPolicy %q; a Job needs Never or OnFailure", j.Name, spec.RestartPolicy)
		}
		for _, c := range spec.Containers {
			if !slices.Equal(c.Args, []string{"migrate"}) {
				t.Errorf("Job %q container %q: args %q, want [migrate]", j.Name, c.Name, c.Args)
			}
		}
	}
}

func TestK8s_SelectorsMatchPods(t *testing.T) {
	t.Parallel()
	objs := loadK8s(t)
	// Each Deployment's selector must select its own pods.
	for _, d := range objs.deployments {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() {
			t.Errorf("Deployment %q: bad or empty selector %v: %v", d.Name, d.Spec.Selector, err)
			continue
		}
		if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Deployment %q: selector %s does not match its pod labels %v", d.Name, sel, d.Spec.Template.Labels)
		}
	}
	matchesOneDeployment := func(sel labels.Selector) []string {
		var names []string
		for _, d := range objs.deployments {
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				names = append(names, d.Name)
			}
		}
		return names
	}
	for _, s := range objs.services {
		if names := matchesOneDeployment(labels.SelectorFromSet(s.Spec.Selector)); len(names) != 1 {
			t.Errorf("Service %q: selector %v matches the pods of Deployments %q, want exactly one", s.Name, s.Spec.Selector, names)
		}
		for _, p := range s.Spec.Ports {
			if p.TargetPort.StrVal != "" && p.TargetPort.StrVal != "http" {
				t.Errorf("Service %q: targetPort %q; the containers name their port \"http\"", s.Name, p.TargetPort.StrVal)
			}
		}
	}
	for _, p := range objs.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil {
			t.Errorf("PodDisruptionBudget %q: bad selector: %v", p.Name, err)
			continue
		}
		if names := matchesOneDeployment(sel); len(names) != 1 {
			t.Errorf("PodDisruptionBudget %q: selector %s matches the pods of Deployments %q, want exactly one", p.Name, sel, names)
		}
	}
	for _, name := range []string{"importd-api", "importd-worker"} {
		if objs.deployment(name) == nil {
			t.Errorf("Deployment %q is missing", name)
		}
	}
}

// Each Deployment that is scaled has one autoscaler, an HPA or a KEDA
// ScaledObject (KEDA makes an HPA of its own, and two would fight over the
// count), that targets a Deployment the manifests define, with a sane
// replica range, while the Deployment sets no replicas of its own.
func TestK8s_ScaledDeploymentsHaveOneAutoscalerEach(t *testing.T) {
	t.Parallel()
	objs := loadK8s(t)
	scalers := map[string][]string{} // Deployment -> its autoscalers
	target := func(owner, apiVersion, kind, name string, minReplicas *int32, maxReplicas int32) {
		if kind != "Deployment" || apiVersion != "apps/v1" {
			t.Errorf("%s: targets %s %s, want an apps/v1 Deployment", owner, apiVersion, kind)
			return
		}
		d := objs.deployment(name)
		if d == nil {
			t.Errorf("%s: targets Deployment %q, which no manifest defines", owner, name)
			return
		}
		scalers[name] = append(scalers[name], owner)
		if d.Spec.Replicas != nil {
			t.Errorf("Deployment %q: sets replicas %d although %s scales it; every apply would reset the count", d.Name, *d.Spec.Replicas, owner)
		}
		if minReplicas == nil || *minReplicas < 1 || maxReplicas < *minReplicas {
			t.Errorf("%s: minReplicas %v, maxReplicas %d", owner, minReplicas, maxReplicas)
		}
	}
	for _, h := range objs.hpas {
		ref := h.Spec.ScaleTargetRef
		target("HorizontalPodAutoscaler "+h.Name, ref.APIVersion, ref.Kind, ref.Name, h.Spec.MinReplicas, h.Spec.MaxReplicas)
	}
	for _, so := range objs.scaledObjects {
		ref := so.Spec.ScaleTargetRef
		// KEDA's defaults: apps/v1 Deployment, 0 to 100 replicas.
		apiVersion, kind, maxReplicas := cmp.Or(ref.APIVersion, "apps/v1"), cmp.Or(ref.Kind, "Deployment"), int32(100)
		if so.Spec.MaxReplicaCount != nil {
			maxReplicas = *so.Spec.MaxReplicaCount
		}
		target("ScaledObject "+so.Name, apiVersion, kind, ref.Name, so.Spec.MinReplicaCount, maxReplicas)
	}
	for d, owners := range scalers {
		if len(owners) > 1 {
			t.Errorf("Deployment %q is scaled by %q; keep one autoscaler", d, owners)
		}
	}
	if scalers["importd-worker"] == nil {
		t.Errorf("nothing scales Deployment importd-worker (scaled: %v)", scalers)
	}
}

// prometheusTriggerKeys are the metadata keys of KEDA's prometheus scaler
// (pkg/scalers/prometheus_scaler.go, v2.21) that the manifests may use; KEDA
// reads no other, so a misspelt one would be ignored, or refused only once
// the ScaledObject runs.
var prometheusTriggerKeys = []string{"serverAddress", "query", "threshold", "activationThreshold",
	"ignoreNullValues", "queryParameters", "namespace", "customHeaders", "unsafeSsl", "timeout"}

// The workers scale on the accounts queue: on its depth per worker
// (AverageValue over the pending tasks) and on its oldest pending task's age
// (Value, below PROCESS_WAIT_TIMEOUT, after which an E5 caller gives up);
// and, as before, on CPU, which is the load of the other queues.
func TestK8s_WorkerAutoscalesOnTheAccountsQueueAndCPU(t *testing.T) {
	t.Parallel()
	objs := loadK8s(t)
	var so *scaledObject
	for _, o := range objs.scaledObjects {
		if o.Spec.ScaleTargetRef.Name == "importd-worker" {
			so = o
		}
	}
	if so == nil {
		t.Fatal("no ScaledObject scales Deployment importd-worker")
	}
	worker := objs.deployment("importd-worker")
	if worker == nil {
		t.Fatal("no Deployment importd-worker")
	}
	api := objs.deployment("importd-api")
	if api == nil || len(api.Spec.Template.Spec.Containers) == 0 {
		t.Fatal("no Deployment importd-api with a container")
	}
	apiEnv, _ := objs.env(&api.Spec.Template.Spec.Containers[0])
	waitTimeout, err := time.ParseDuration(apiEnv["PROCESS_WAIT_TIMEOUT"])
	if err != nil {
		t.Fatalf("PROCESS_WAIT_TIMEOUT of the API: %v", err)
	}

	names := map[string]bool{}
	var onCPU, onDepth, onAge bool
	for i, tr := range so.Spec.Triggers {
		where := fmt.Sprintf("ScaledObject %q trigger %d (%s %q)", so.Name, i, tr.Type, tr.Name)
		if tr.Name != "" {
			if names[tr.Name] {
				t.Errorf("%s: the name is used twice; KEDA refuses that", where)
			}
			names[tr.Name] = true
		}
		switch tr.Type {
		case "cpu":
			onCPU = true
			if tr.MetricType != autoscalingv2.UtilizationMetricType {
				t.Errorf("%s: metricType %q, want Utilization of the CPU request", where, tr.MetricType)
			}
			if v, err := strconv.Atoi(tr.Metadata["value"]); err != nil || v < 1 || v > 100 {
				t.Errorf("%s: value %q, want a percentage of the request", where, tr.Metadata["value"])
			}
			// KEDA refuses a cpu trigger on a Deployment whose containers
			// have no CPU request.
			for _, c := range worker.Spec.Template.Spec.Containers {
				if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
					t.Errorf("%s: container %q has no CPU request", where, c.Name)
				}
			}
		case "prometheus":
			for k := range tr.Metadata {
				if !slices.Contains(prometheusTriggerKeys, k) {
					t.Errorf("%s: metadata key %q is not one of the prometheus scaler's %q", where, k, prometheusTriggerKeys)
				}
			}
			if u, err := url.Parse(tr.Metadata["serverAddress"]); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				t.Errorf("%s: serverAddress %q is not Prometheus's http(s) address", where, tr.Metadata["serverAddress"])
			}
			threshold, err := strconv.ParseFloat(tr.Metadata["threshold"], 64)
			if err != nil || threshold <= 0 {
				t.Errorf("%s: threshold %q, want a positive number", where, tr.Metadata["threshold"])
			}
			if v, ok := tr.Metadata["ignoreNullValues"]; ok && v != "false" {
				t.Errorf("%s: ignoreNullValues %q; an empty answer (Prometheus does not scrape importd) must be an error, not an idle queue", where, v)
			}
			q := tr.Metadata["query"]
			if !strings.Contains(q, `queue="accounts"`) {
				continue
			}
			switch found := metricName.FindAllString(q, -1); {
			case slices.Equal(found, []string{"importd_queue_tasks"}) && strings.Contains(q, `state="pending"`):
				onDepth = true
				if tr.MetricType != autoscalingv2.AverageValueMetricType {
					t.Errorf("%s: the queue's depth is scaled on %q, want AverageValue (pending tasks per worker)", where, tr.MetricType)
				}
			case slices.Equal(found, []string{"importd_queue_latency_seconds"}):
				onAge = true
				if tr.MetricType != autoscalingv2.ValueMetricType {
					t.Errorf("%s: the oldest task's age is scaled on %q, want Value (an age is not shared out between workers)", where, tr.MetricType)
				}
				if age := time.Duration(threshold * float64(time.Second)); age >= waitTimeout {
					t.Errorf("%s: scales on an age of %v, not before PROCESS_WAIT_TIMEOUT %v, when E5 callers have already given up", where, age, waitTimeout)
				}
			}
		}
	}
	if !onCPU || !onDepth || !onAge {
		t.Errorf("ScaledObject %q: scales on CPU %v, on the accounts queue's pending tasks %v, on its oldest task's age %v; want all three", so.Name, onCPU, onDepth, onAge)
	}
	if so.Spec.Fallback != nil {
		t.Errorf("ScaledObject %q: a fallback sets the count itself when Prometheus fails, overriding CPU; leave the HPA to scale up on CPU alone", so.Name)
	}
}

// /metrics was public through the API's Service. The API and the worker now
// serve it on METRICS_ADDR, a container port of its own that no Service
// targets, so that only in-cluster scrapers reach it.
func TestK8s_MetricsAreOnAPortNoServiceExposes(t *testing.T) {
	t.Parallel()
	objs := loadK8s(t)
	exposed := map[string]bool{}
	for _, svc := range objs.services {
		for _, p := range svc.Spec.Ports {
			exposed[p.TargetPort.String()] = true
		}
	}
	for _, name := range []string{"importd-api", "importd-worker"} {
		d := objs.deployment(name)
		if d == nil {
			t.Errorf("no deployment %s", name)
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			vars, _ := objs.env(&c)
			_, port, err := net.SplitHostPort(vars["METRICS_ADDR"])
			if err != nil {
				t.Errorf("%s container %q: METRICS_ADDR = %q, want a host:port apart from HTTP_ADDR", name, c.Name, vars["METRICS_ADDR"])
				continue
			}
			if _, httpPort, _ := net.SplitHostPort(vars["HTTP_ADDR"]); port == httpPort {
				t.Errorf("%s container %q: METRICS_ADDR shares HTTP_ADDR's port %s", name, c.Name, port)
			}
			for _, p := range c.Ports {
				if fmt.Sprint(p.ContainerPort) == port && (exposed[p.Name] || exposed[port]) {
					t.Errorf("%s container %q: a Service exposes the metrics port %s (%s)", name, c.Name, port, p.Name)
				}
			}
			if exposed[port] {
				t.Errorf("%s container %q: a Service targets the metrics port %s", name, c.Name, port)
			}
		}
	}
}

// Behind the ingress every connection comes from the ingress controller's
// pod. Without TRUSTED_PROXIES the failed-authentication limit counts all
// clients as that one address, so one client's wrong keys lock every client
// out. Each container that serves logins (the API and the dashboard) must
// trust the pod network, and only private addresses: a trusted address can
// claim to be any client.
func TestK8s_LoginServersTrustOnlyThePrivateProxyNetwork(t *testing.T) {
	t.Parallel()
	objs := loadK8s(t)
	seen := 0
	for owner, spec := range objs.podSpecs() {
		for _, c := range spec.Containers {
			if len(c.Args) == 0 || !slices.Contains([]string{"serve", "api", "dashboard"}, c.Args[0]) {
				continue
			}
			seen++
			vars, _ := objs.env(&c)
			raw := vars["TRUSTED_PROXIES"]
			if strings.TrimSpace(raw) == "" {
				t.Errorf("%s container %q (importd %s): TRUSTED_PROXIES is not set; every client would count as the ingress's address", owner, c.Name, c.Args[0])
				continue
			}
			for entry := range strings.SplitSeq(raw, ",") {
				entry = strings.TrimSpace(entry)
				p, err := netip.ParsePrefix(entry)
				if err != nil {
					a, aerr := netip.ParseAddr(entry)
					if aerr != nil {
						t.Errorf("%s container %q: TRUSTED_PROXIES entry %q is neither an address nor a CIDR", owner, c.Name, entry)
						continue
					}
					p = netip.PrefixFrom(a, a.BitLen())
				}
				if first, last := p.Masked().Addr(), lastAddr(p); !first.IsPrivate() || !last.IsPrivate() {
					t.Errorf("%s container %q: TRUSTED_PROXIES entry %q reaches beyond private addresses (%s to %s)", owner, c.Name, entry, first, last)
				}
			}
		}
	}
	if seen == 0 {
		t.Error("no container runs importd api, serve or dashboard")
	}
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// importd had no memory limit of its own: near its container's limit it
// was killed rather than collect more often. Every importd container now
// has a memory limit and passes it, through the downward API, as
// MEMORY_LIMIT, from which importd sets its Go memory limit.
func TestK8s_ContainersKnowTheirMemoryLimit(t *testing.T) {
	t.Parallel()
	for owner, spec := range loadK8s(t).podSpecs() {
		for _, c := range spec.Containers {
			if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
				t.Errorf("%s container %q: no memory limit", owner, c.Name)
			}
			found := false
			for _, e := range c.Env {
				if e.Name != "MEMORY_LIMIT" {
					continue
				}
				ref := (*corev1.ResourceFieldSelector)(nil)
				if e.ValueFrom != nil {
					ref = e.ValueFrom.ResourceFieldRef
				}
				found = ref != nil && ref.Resource == "limits.memory" && ref.ContainerName == c.Name && ref.Divisor.IsZero()
			}
			if !found {
				t.Errorf("%s container %q: MEMORY_LIMIT is not its own limits.memory in bytes (resourceFieldRef)", owner, c.Name)
			}
		}
	}
}
