package scenarios

import (
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/meshconfig"
)

func TestFromMesh(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, expect string
		want         string // error substring; "" means it loads
	}{
		{"virtualService by version", "  - split: {by: version, fromMesh: {virtualService: demo/reviews}}\n", ""},
		{"route and cluster", "  - split: {by: version, fromMesh: {virtualService: demo/reviews, route: canary, cluster: c2}}\n", ""},
		{"kuma by cluster", "  - split: {by: cluster, fromMesh: {meshHTTPRoute: kuma-demo/canary}}\n", ""},
		{"trafficRoute", "  - split: {by: cluster, fromMesh: {trafficRoute: test-server}}\n", ""},
		{"skupper", "  - split: {by: cluster, fromMesh: {skupper: hello/backend, selector: app=backend}}\n", ""},
		{"cilium", "  - split: {by: cluster, fromMesh: {ciliumService: rb/rebel-base}}\n", ""},
		{"weights and fromMesh", "  - split: {by: version, weights: {v1: 1}, fromMesh: {virtualService: demo/reviews}}\n", "expect[0].split.weights: weights and fromMesh"},
		{"model and fromMesh", "  - split: {by: version, model: equal, fromMesh: {virtualService: demo/reviews}}\n", "expect[0].split.model: model equal and fromMesh"},
		{"two objects", "  - split: {by: version, fromMesh: {virtualService: demo/reviews, meshHTTPRoute: demo/r}}\n", "virtualService and meshHTTPRoute: name one mesh object"},
		{"no object", "  - split: {by: version, fromMesh: {route: x}}\n", "name the mesh object: one of virtualService"},
		{"bad reference", "  - split: {by: version, fromMesh: {virtualService: reviews}}\n", "expect[0].split.fromMesh.virtualService: mesh object reference"},
		{"by the kind cannot tell", "  - split: {by: cluster, fromMesh: {virtualService: demo/reviews}}\n", "a VirtualService determines a split by version, not by cluster"},
		{"undeclared cluster", "  - split: {by: version, fromMesh: {virtualService: demo/reviews, cluster: c9}}\n", "expect[0].split.fromMesh.cluster"},
		{"skupper without selector", "  - split: {by: cluster, fromMesh: {skupper: hello/backend}}\n", "fromMesh.selector: required with skupper"},
		{"selector on another kind", "  - split: {by: version, fromMesh: {virtualService: demo/reviews, selector: app=x}}\n", "fromMesh.selector: applies to skupper only"},
		{"through an ingress gateway", "  - split: {by: version, fromMesh: {virtualService: demo/reviews, gateway: istio-system/ingress}}\n", ""},
		{"through the sidecars", "  - split: {by: version, fromMesh: {virtualService: demo/reviews, gateway: mesh}}\n", ""},
		{"gateway without its namespace", "  - split: {by: version, fromMesh: {virtualService: demo/reviews, gateway: ingress}}\n", `expect[0].split.fromMesh.gateway: "ingress": want NAMESPACE/NAME`},
		{"gateway not a name", "  - split: {by: version, fromMesh: {virtualService: demo/reviews, gateway: Demo/In_gress}}\n", "fromMesh.gateway"},
		{"gateway on another kind", "  - split: {by: cluster, fromMesh: {trafficRoute: test-server, gateway: a/b}}\n", "fromMesh.gateway: applies to virtualService only"},
		{"gateway on a mirror", "  - mirror: {fromMesh: {virtualService: demo/reviews, gateway: x}}\n", "expect[0].mirror.fromMesh.gateway"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse("m.yaml", []byte(minimal+"expect:\n"+c.expect))
			if c.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				sp := s.Expect[0].Split
				if sp.Model != ModelFromMesh {
					t.Errorf("model %q, want %q", sp.Model, ModelFromMesh)
				}
				if _, _, err := sp.FromMesh.Ref(); err != nil {
					t.Error(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got:\n%v\nwant: %s", err, c.want)
			}
		})
	}
}

func TestFromMeshRef(t *testing.T) {
	t.Parallel()
	m := &MeshSource{VirtualService: "demo/reviews", Route: "canary", Cluster: "c2"}
	ref, key, err := m.Ref()
	want := meshconfig.Ref{Kind: meshconfig.KindVirtualService, Namespace: "demo", Name: "reviews", Section: "canary", Cluster: "c2"}
	if err != nil || key != "virtualService" || ref != want {
		t.Errorf("Ref() = %+v, %q, %v; want %+v", ref, key, err, want)
	}
}
