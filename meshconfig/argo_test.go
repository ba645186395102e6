package meshconfig

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// argoRollout is a Rollout whose status.canary.weights says canary w to
// ReplicaSet c9 and 100-w to s1, as Argo records them after setting the
// router's weights (rollout/trafficrouting.go calculateWeightStatus).
func argoRollout(w int) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: callme-service, namespace: callme, resourceVersion: "41"}
status:
  canary:
    weights:
      canary: {weight: %d, podTemplateHash: c9, serviceName: callme-service-canary}
      stable: {weight: %d, podTemplateHash: s1, serviceName: callme-service-stable}
`, w, 100-w)
}

// argoPods are the two ReplicaSets' ready pods: stable v1 (two), canary v2.
var argoPods = pod("callme", "s-a", "{app: callme-service, version: v1, rollouts-pod-template-hash: s1}") + "---\n" +
	pod("callme", "s-b", "{app: callme-service, version: v1, rollouts-pod-template-hash: s1}") + "---\n" +
	pod("callme", "c-a", "{app: callme-service, version: v2, rollouts-pod-template-hash: c9}")

func rolloutRef() Ref { return Ref{Kind: KindRollout, Namespace: "callme", Name: "callme-service"} }

func TestResolveRollout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		objs   string
		by     string
		shares map[string]float64
		err    string
	}{
		{name: "the step's weights per version", objs: argoRollout(25) + "---\n" + argoPods, shares: map[string]float64{"v1": 0.75, "v2": 0.25}},
		{name: "step 0: a canary without pods takes nothing", objs: argoRollout(0) + "---\n" + pod("callme", "s-a", "{version: v1, rollouts-pod-template-hash: s1}"),
			shares: map[string]float64{"v1": 1}},
		{name: "a weighted canary without pods", objs: argoRollout(25) + "---\n" + pod("callme", "s-a", "{version: v1, rollouts-pod-template-hash: s1}"),
			err: "Rollout callme/callme-service in cluster c1, field status.canary.weights.canary: weight 25 but no ready pod in namespace callme of cluster c1 has rollouts-pod-template-hash=c9"},
		{name: "no weights recorded (no trafficRouting)", objs: "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: callme-service, namespace: callme}\nstatus: {phase: Healthy}\n",
			err: "status.canary.weights: not set"},
		{name: "a weight that is no number", objs: strings.Replace(argoRollout(25), "weight: 25", "weight: high", 1) + "---\n" + argoPods,
			err: "status.canary.weights.canary.weight: want a number"},
		{name: "a negative weight", objs: strings.Replace(argoRollout(25), "weight: 25", "weight: -25", 1) + "---\n" + argoPods,
			err: "status.canary.weights.canary.weight: -25: want a whole number >= 0"},
		{name: "no hash", objs: strings.Replace(argoRollout(25), "podTemplateHash: c9, ", "", 1) + "---\n" + argoPods,
			err: "status.canary.weights.canary.podTemplateHash: empty"},
		{name: "a ReplicaSet of two versions", objs: argoRollout(25) + "---\n" + argoPods + "---\n" + pod("callme", "c-b", "{version: v3, rollouts-pod-template-hash: c9}"),
			err: `status.canary.weights.canary: the ready pods with rollouts-pod-template-hash=c9 carry versions ["v2" "v3"]`},
		{name: "by cluster", objs: argoRollout(25) + "---\n" + argoPods, by: ByCluster, err: `split by "cluster" cannot be read from a Rollout`},
		{name: "no such Rollout", objs: argoPods, err: "Rollout callme/callme-service in cluster c1: not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			by := c.by
			if by == "" {
				by = ByVersion
			}
			e, err := Resolve(Query{Ref: rolloutRef(), By: by, Clusters: []string{"c1"}}, objects(t, map[string]string{"c1": c.objs}))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Resolve = %v, want an error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(e.Shares) != len(c.shares) {
				t.Fatalf("shares %v, want %v", e.Shares, c.shares)
			}
			for b, s := range c.shares {
				if !near(e.Shares[b], s) {
					t.Errorf("share of %s = %v, want %v", b, e.Shares[b], s)
				}
			}
			if p := strings.Join(e.Provenance(), "\n"); !strings.Contains(p, "Rollout callme/callme-service in cluster c1 (resourceVersion 41), fields status.canary.weights.canary.weight") {
				t.Errorf("provenance names no Rollout and field:\n%s", p)
			}
		})
	}
}

// FuzzResolveRollout feeds arbitrary Rollout statuses (Argo's as seeds)
// with two ReplicaSets' pods: Resolve never panics, an error names the
// Rollout, and shares are in [0, 1] and add up to 1.
func FuzzResolveRollout(f *testing.F) {
	f.Add(argoRollout(25))
	f.Add(argoRollout(0))
	f.Add("status: {canary: {weights: {canary: {weight: 1}, stable: {weight: 2, podTemplateHash: s1}, additional: [{weight: 3, podTemplateHash: c9}]}}}\n")
	f.Add("status: {canary: {weights: []}}\n")
	f.Fuzz(func(t *testing.T, ro string) {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(ro), &m); err != nil || m == nil {
			return
		}
		m["kind"], m["apiVersion"] = KindRollout, "argoproj.io/v1alpha1"
		m["metadata"] = map[string]any{"name": "callme-service", "namespace": "callme"}
		objs := objects(t, map[string]string{"c1": argoPods})
		objs["c1"] = append(objs["c1"], &unstructured.Unstructured{Object: m})
		e, err := Resolve(Query{Ref: rolloutRef(), By: ByVersion, Clusters: []string{"c1"}}, objs)
		checkResolved(t, e, err, "Rollout callme/callme-service")
	})
}
