package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kedaCRD is KEDA's CustomResourceDefinition of the ScaledObject, unchanged
// from github.com/kedacore/keda/v2@v2.21.0 (config/crd/bases; fetched with
// `go mod download -json github.com/kedacore/keda/v2@v2.21.0`, Apache-2.0).
// The API server checks a ScaledObject against its openAPIV3Schema, so the
// test does too.
const kedaCRD = "testdata/keda.sh_scaledobjects.yaml"

// crdKinds are the kinds of custom resources under k8s/: "apiVersion kind"
// to the CRD whose schema the manifest must pass.
var crdKinds = map[string]string{
	"keda.sh/v1alpha1 ScaledObject":       kedaCRD,
	"monitoring.coreos.com/v1 PodMonitor": podMonitorCRD,
}

// scaledObject holds the fields of KEDA's ScaledObject (its
// apis/keda/v1alpha1 types) that the tests read. It is decoded only after
// the document passed the CRD's schema, which refuses unknown fields.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		Fallback        *struct {
			Replicas int32 `json:"replicas"`
		} `json:"fallback"`
		Advanced *struct {
			HorizontalPodAutoscalerConfig *struct {
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior"`
			} `json:"horizontalPodAutoscalerConfig"`
		} `json:"advanced"`
		Triggers []kedaTrigger `json:"triggers"`
	} `json:"spec"`
}

type kedaTrigger struct {
	Type       string                         `json:"type"`
	Name       string                         `json:"name"`
	MetricType autoscalingv2.MetricTargetType `json:"metricType"`
	Metadata   map[string]string              `json:"metadata"`
}

// crdSchemas caches each CRD's schema, made strict.
var crdSchemas sync.Map // CRD file -> func() (*openapi3.Schema, error)

// crdSchema returns the openAPIV3Schema of the version of the CRD in file
// that serves apiVersion, with unknown fields refused wherever the schema
// does not preserve them: the API server prunes such a field silently, and
// kubectl's server-side field validation refuses it, so a misspelt field is
// an error here as it is for the built-in kinds.
func crdSchema(file, apiVersion string) (*openapi3.Schema, error) {
	load, _ := crdSchemas.LoadOrStore(file+" "+apiVersion, sync.OnceValues(func() (*openapi3.Schema, error) {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var crd struct {
			Spec struct {
				Group    string `json:"group"`
				Versions []struct {
					Name   string          `json:"name"`
					Served bool            `json:"served"`
					Schema json.RawMessage `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		for _, v := range crd.Spec.Versions {
			if crd.Spec.Group+"/"+v.Name != apiVersion || !v.Served {
				continue
			}
			var s struct {
				OpenAPIV3Schema *openapi3.Schema `json:"openAPIV3Schema"`
			}
			if err := json.Unmarshal(v.Schema, &s); err != nil || s.OpenAPIV3Schema == nil {
				return nil, fmt.Errorf("%s: version %s: no openAPIV3Schema (%v)", file, v.Name, err)
			}
			refuseUnknownFields(s.OpenAPIV3Schema)
			return s.OpenAPIV3Schema, nil
		}
		return nil, fmt.Errorf("%s serves no version %s", file, apiVersion)
	}))
	return load.(func() (*openapi3.Schema, error))()
}

// refuseUnknownFields sets additionalProperties to false on every object
// schema that lists its properties and neither allows others nor has
// x-kubernetes-preserve-unknown-fields.
func refuseUnknownFields(s *openapi3.Schema) {
	if s == nil {
		return
	}
	preserve, _ := s.Extensions["x-kubernetes-preserve-unknown-fields"].(bool)
	if len(s.Properties) > 0 && !preserve && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
		no := false
		s.AdditionalProperties.Has = &no
	}
	for _, p := range s.Properties {
		refuseUnknownFields(p.Value)
	}
	for _, refs := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
		for _, r := range refs {
			refuseUnknownFields(r.Value)
		}
	}
	if s.Items != nil {
		refuseUnknownFields(s.Items.Value)
	}
	if s.AdditionalProperties.Schema != nil {
		refuseUnknownFields(s.AdditionalProperties.Schema.Value)
	}
}

// decodeCustom checks one YAML document of a custom resource against its
// CRD's schema, its metadata strictly as the API server's ObjectMeta, and
// decodes it into its test type.
func decodeCustom(crdFile string, tm metav1.TypeMeta, doc []byte) (any, error) {
	schema, err := crdSchema(crdFile, tm.APIVersion)
	if err != nil {
		return nil, err
	}
	raw, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	var value any
	if err := json.Unmarshal(raw, &value); err != nil {
		return nil, err
	}
	if err := schema.VisitJSON(value, openapi3.MultiErrors()); err != nil {
		return nil, fmt.Errorf("does not pass %s: %v", crdFile, err)
	}
	var meta struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            any               `json:"spec"`
		Status          any               `json:"status"`
	}
	if err := yaml.UnmarshalStrict(doc, &meta); err != nil {
		return nil, err
	}
	switch tm.Kind {
	case "ScaledObject":
		so := new(scaledObject)
		if err := json.Unmarshal(raw, so); err != nil {
			return nil, err
		}
		return so, nil
	case "PodMonitor":
		pm := new(podMonitor)
		if err := json.Unmarshal(raw, pm); err != nil {
			return nil, err
		}
		return pm, nil
	}
	return nil, fmt.Errorf("no test type for %s %s", tm.APIVersion, tm.Kind)
}

// The schema check refuses what KEDA's API would: a misspelt field, a
// threshold that is not a string, a ScaledObject without triggers, an
// unknown fallback behaviour; and passes a minimal one.
func TestK8s_KEDAsSchemaRefusesWhatKEDAWould(t *testing.T) {
	t.Parallel()
	const good = `apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: x
spec:
  scaleTargetRef:
    name: importd-worker
  triggers:
    - type: prometheus
      metadata:
        threshold: "3"
`
	tm := metav1.TypeMeta{APIVersion: "keda.sh/v1alpha1", Kind: "ScaledObject"}
	if _, err := decodeCustom(kedaCRD, tm, []byte(good)); err != nil {
		t.Fatalf("a minimal ScaledObject: %v", err)
	}
	for name, bad := range map[string]string{
		"misspelt spec field":        strings.Replace(good, "  triggers:", "  maxReplicas: 3\n  triggers:", 1),
		"misspelt trigger field":     strings.Replace(good, "    - type: prometheus", "    - type: prometheus\n      metricTyp: Value", 1),
		"threshold not a string":     strings.Replace(good, `threshold: "3"`, "threshold: 3", 1),
		"no triggers":                strings.Replace(good, "  triggers:\n    - type: prometheus\n      metadata:\n        threshold: \"3\"\n", "  triggers: []\n", 1),
		"unknown fallback behaviour": strings.Replace(good, "  triggers:", "  fallback:\n    failureThreshold: 3\n    replicas: 2\n    behavior: sometimes\n  triggers:", 1),
		"misspelt metadata field":    strings.Replace(good, "  name: x", "  name: x\n  label: {a: b}", 1),
	} {
		if bad == good {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		if _, err := decodeCustom(kedaCRD, tm, []byte(bad)); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}
