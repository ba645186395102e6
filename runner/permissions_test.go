package runner

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mesh-verify/mesh-verify/kube/access"
	"github.com/mesh-verify/mesh-verify/kube/portforward"
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
	want := []access.Need{
		{Cluster: "c1", Namespace: "edge", Feature: access.FeatureTunnel, TargetKind: portforward.KindDeployment},
		{Cluster: "c2", Namespace: "apps", Feature: access.FeatureNamespaceCheck},
		{Cluster: "c2", Namespace: "apps", Feature: access.FeatureInventory},
		{Cluster: "c2", Namespace: "apps", Feature: access.FeatureLogs},
		{Cluster: "c2", Namespace: "mesh", Feature: access.FeatureNamespaceCheck},
		{Cluster: "c2", Namespace: "mesh", Feature: access.FeatureInventory},
		{Cluster: "c2", Namespace: "mesh", Feature: access.FeatureMetricsPortForward},
		{Cluster: "c2", Namespace: "mesh", Feature: access.FeatureMetricsProxy},
		{Cluster: "c1", Feature: access.FeatureConnect},
		{Cluster: "c2", Feature: access.FeatureConnect},
	}
	if !slices.Equal(got, want) {
		t.Errorf("needs:\n got %v\nwant %v", got, want)
	}
	// Distributed: the workers' Job, ConfigMap and pod logs in cluster
	// attack.from and the target Service's namespace, and no tunnel.
	dist := *sc
	dist.Target.Forward = &scenarios.Forward{Cluster: "c1", Namespace: "edge", Resource: "svc/gateway", Port: "8080"}
	dist.Attack.Workers, dist.Attack.From = 3, "c3"
	got = Needs(&dist)
	want = append([]access.Need{{Cluster: "c3", Namespace: "edge", Feature: access.FeatureWorkers}}, want[1:len(want)-2]...)
	want = append(want, access.Need{Cluster: "c2", Feature: access.FeatureConnect}, access.Need{Cluster: "c3", Feature: access.FeatureConnect})
	if !slices.Equal(got, want) {
		t.Errorf("distributed needs:\n got %v\nwant %v", got, want)
	}
	// A rule that reads an outbound log's upstream address also lists the
	// clusters' network gateways (cluster-wide: they live in the mesh's
	// namespace, not the scenario's).
	out := *sc
	out.Observe = slices.Clone(sc.Observe)
	out.Observe[0].Logs = &scenarios.LogSource{Match: `"(?P<upstream>[^"]*)" outbound`}
	if got := Needs(&out); !slices.Contains(got, access.Need{Cluster: "c2", Feature: access.FeatureGateways}) ||
		slices.Contains(Needs(sc), access.Need{Cluster: "c2", Feature: access.FeatureGateways}) {
		t.Errorf("gateways are listed when, and only when, a rule captures upstream: %v", got)
	}
	sc.Target.Forward, sc.Target.URL, sc.Observe = nil, "http://127.0.0.1:1/", nil
	if n := Needs(sc); len(n) != 0 {
		t.Errorf("a plain URL target with nothing observed needs nothing, got %v", n)
	}
}

// A call denied during the run (a log stream, the last scrape) ends it as
// a setup error; other failures stay warnings.
func TestNoteDeniedKeepsOnlyDenials(t *testing.T) {
	kp := &kubePath{}
	kp.noteDenied(errors.New("read: connection reset by peer"))
	kp.noteDenied(nil)
	if err := kp.denied(); err != nil {
		t.Fatalf("no denial noted, yet denied() = %v", err)
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods/log"}, "p", errors.New(`User "u" cannot get resource "pods/log"`))
	kp.noteDenied(fmt.Errorf("log of pod c1/default/p: %w", forbidden))
	if err := kp.denied(); err == nil || !strings.Contains(err.Error(), `cannot get resource "pods/log"`) {
		t.Errorf("denied() = %v, want the forbidden log", err)
	}
	var none *kubePath
	if err := none.denied(); err != nil {
		t.Errorf("a run without Kubernetes: denied() = %v", err)
	}
}
