package runner

import (
	"math"
	"testing"

	"github.com/mesh-verify/mesh-verify/scenarios"
)

// By pod, a per-pod model spreads each cluster's share over the ready pods
// the inventory names: Skupper scenario 2 (costs 1/1, pods 1/2) expects the
// c2 pod at 50% and each c3 pod at 25% — worked out by hand from the
// balanced model's 50/50 cluster split.
func TestModelByPodFromInventory(t *testing.T) {
	sc, err := scenarios.Parse("t.yaml", []byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: t}
clusters:
  - {name: c1, context: kind-c1, cost: 0}
  - {name: c2, context: kind-c2, cost: 1}
  - {name: c3, context: kind-c3, cost: 1}
target:
  portForward: {cluster: c1, namespace: demo, resource: svc/entry, port: "8080"}
attack: {concurrency: 6, repetitions: 10, keepAlive: false}
observe:
  - {name: app, namespace: demo, selector: app=x, clusters: [c2, c3], logs: {match: 'id=(?P<request_id>\S+)'}}
expect:
  - split: {by: pod, model: link-cost-balanced, buckets: [c2, c3]}
  - split: {by: pod, model: equal-per-pod, buckets: [c2, c3]}
  - split: {by: pod, model: equal}
`))
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string][]string{"c2": {"app-c2-a"}, "c3": {"app-c3-a", "app-c3-b"}}
	j := newJudge(sc, attackOptions(sc, "", ""))
	cases := []map[string]float64{
		{"app-c2-a": 0.5, "app-c3-a": 0.25, "app-c3-b": 0.25},
		{"app-c2-a": 1.0 / 3, "app-c3-a": 1.0 / 3, "app-c3-b": 1.0 / 3},
		{"app-c2-a": 1.0 / 3, "app-c3-a": 1.0 / 3, "app-c3-b": 1.0 / 3},
	}
	for i, want := range cases {
		got, err := j.model(sc.Expect[i].Split, ready)
		if err != nil {
			t.Fatalf("expect[%d]: %v", i, err)
		}
		if len(got.Shares) != len(want) {
			t.Fatalf("expect[%d]: shares %v, want %v", i, got.Shares, want)
		}
		for pod, w := range want {
			if math.Abs(got.Shares[pod]-w) > 1e-12 {
				t.Errorf("expect[%d]: pod %s share %v, want %v", i, pod, got.Shares[pod], w)
			}
		}
	}
	if _, err := j.model(sc.Expect[0].Split, nil); err == nil {
		t.Error("a split by pod without an inventory was accepted")
	}
}
