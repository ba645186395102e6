package runner

import (
	"slices"
	"testing"

	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

func TestNeedsFollowWhatARunCalls(t *testing.T) {
	sc, err := scenarios.Parse("needs.yaml", []byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: needs}
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
  - {name: c3, context: kind-c3}
target:
  portForward: {cluster: c1, namespace: edge, resource: deploy/gateway, port: "8080"}
  path: /
attack: {rate: 10/s, duration: 1s}
observe:
  - name: app
    namespace: apps
    selector: app=x
    clusters: [c2]
    logs: {match: 'served'}
  - name: sidecar
    namespace: mesh
    selector: app=y
    clusters: [c2]
    metrics: {port: "15090", counter: requests_total, via: portForward}
  - name: proxied
    namespace: mesh
    selector: app=z
    clusters: [c2]
    metrics: {port: "15090", counter: requests_total}
expect:
  - successRate: {atLeast: 90%}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := Needs(sc)
	want := []kube.Need{
		{Cluster: "c1", Namespace: "edge", Feature: kube.FeatureTunnel, TargetKind: kube.KindDeployment},
		{Cluster: "c2", Namespace: "apps", Feature: kube.FeatureNamespaceCheck},
		{Cluster: "c2", Namespace: "apps", Feature: kube.FeatureInventory},
		{Cluster: "c2", Namespace: "apps", Feature: kube.FeatureLogs},
		{Cluster: "c2", Namespace: "mesh", Feature: kube.FeatureNamespaceCheck},
		{Cluster: "c2", Namespace: "mesh", Feature: kube.FeatureInventory},
		{Cluster: "c2", Namespace: "mesh", Feature: kube.FeatureMetricsPortForward},
		{Cluster: "c2", Namespace: "mesh", Feature: kube.FeatureMetricsProxy},
		{Cluster: "c1", Feature: kube.FeatureConnect},
		{Cluster: "c2", Feature: kube.FeatureConnect},
	}
	if !slices.Equal(got, want) {
		t.Errorf("needs:\n got %v\nwant %v", got, want)
	}
	sc.Target.Forward, sc.Target.URL, sc.Observe = nil, "http://127.0.0.1:1/", nil
	if n := Needs(sc); len(n) != 0 {
		t.Errorf("a plain URL target with nothing observed needs nothing, got %v", n)
	}
}
