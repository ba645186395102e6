package crds

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// crd is the part of an apiextensions.k8s.io/v1 CRD this test reads; the
// API servers of the lab test (lab_test.go) check the whole document.
type crd struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind   string `json:"kind"`
			Plural string `json:"plural"`
		} `json:"names"`
		Versions []struct {
			Name    string `json:"name"`
			Served  bool   `json:"served"`
			Storage bool   `json:"storage"`
		} `json:"versions"`
	} `json:"spec"`
}

// TestFilesAreTheCRDsTheLabRoutesBy checks that the kinds the lab's mesh
// simulator reads are all there, each file with a header naming its
// upstream source, each CRD named <plural>.<group> with one storage
// version.
func TestFilesAreTheCRDsTheLabRoutesBy(t *testing.T) {
	t.Parallel()
	kinds := map[string]bool{}
	for _, f := range Files() {
		b, err := YAML(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b[:min(len(b), 2000)], []byte("https://github.com/")) {
			t.Errorf("%s: the header names no upstream source", f)
		}
		for i, doc := range bytes.Split(b, []byte("\n---\n")) {
			if !bytes.Contains(doc, []byte("kind: CustomResourceDefinition")) {
				continue
			}
			var c crd
			if err := yaml.Unmarshal(doc, &c); err != nil {
				t.Errorf("%s, document %d: %v", f, i, err)
				continue
			}
			kinds[c.Spec.Names.Kind+"."+c.Spec.Group] = true
			if c.APIVersion != "apiextensions.k8s.io/v1" || c.Metadata.Name != c.Spec.Names.Plural+"."+c.Spec.Group {
				t.Errorf("%s: CRD %s (%s) is not <plural>.<group> of apiextensions.k8s.io/v1", f, c.Metadata.Name, c.APIVersion)
			}
			storage := 0
			for _, v := range c.Spec.Versions {
				if v.Storage {
					storage++
				}
			}
			if storage != 1 {
				t.Errorf("%s: CRD %s has %d storage versions, want 1", f, c.Metadata.Name, storage)
			}
		}
	}
	for _, want := range []string{
		"VirtualService.networking.istio.io", "DestinationRule.networking.istio.io", "Gateway.networking.istio.io",
		"MeshHTTPRoute.kuma.io", "TrafficRoute.kuma.io", "MeshAccessLog.kuma.io", "TrafficLog.kuma.io", "Link.skupper.io",
		"Connector.skupper.io", "Listener.skupper.io",
	} {
		if !kinds[want] {
			t.Errorf("no CRD for %s (have %v)", want, kinds)
		}
	}
	want := []string{"connectors.skupper.io", "destinationrules.networking.istio.io", "gateways.networking.istio.io", "links.skupper.io",
		"listeners.skupper.io", "meshaccesslogs.kuma.io", "meshhttproutes.kuma.io", "trafficlogs.kuma.io", "trafficroutes.kuma.io", "virtualservices.networking.istio.io"}
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	if _, err := YAML("nope.yaml"); err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("YAML(nope.yaml) = %v, want an error naming the file", err)
	}
}
