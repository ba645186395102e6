package meshroute

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestKumaInboundLogging: a MeshAccessLog with from or rules logs the
// inbound side; with only to, the outbound side alone, as a legacy
// TrafficLog does; none, the lab's default (inbound).
func TestKumaInboundLogging(t *testing.T) {
	t.Parallel()
	mal := func(name string, spec map[string]any) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kuma.io/v1alpha1", "kind": "MeshAccessLog", "spec": spec}}
		o.SetName(name)
		o.SetNamespace("kuma-demo")
		return o
	}
	to := []any{map[string]any{"targetRef": map[string]any{"kind": "Mesh"}}}
	// A legacy TrafficLog (cluster-scoped) from every source to every
	// destination, as Kuma's docs write it.
	tl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kuma.io/v1alpha1", "kind": "TrafficLog", "mesh": "default", "spec": map[string]any{
		"sources":      []any{map[string]any{"match": map[string]any{"kuma.io/service": "*"}}},
		"destinations": []any{map[string]any{"match": map[string]any{"kuma.io/service": "*"}}},
	}}}
	tl.SetName("all-traffic")
	for _, c := range []struct {
		name    string
		objs    Objects
		inbound bool
		why     string
	}{
		{"none", Objects{}, true, "no MeshAccessLog"},
		{"only to", Objects{"c1": {mal("out", map[string]any{"to": to})}}, false, "MeshAccessLog kuma-demo/out"},
		{"from", Objects{"c1": {mal("out", map[string]any{"to": to}), mal("in", map[string]any{"from": to})}}, true, "spec.from"},
		{"rules", Objects{"c2": {mal("all", map[string]any{"rules": to})}}, true, "spec.rules"},
		{"a legacy TrafficLog", Objects{"c1": {tl}}, false, "TrafficLog all-traffic in cluster c1 log the outbound side only"},
		{"a TrafficLog beside an inbound MeshAccessLog", Objects{"c1": {tl, mal("in", map[string]any{"from": to})}}, true, "spec.from"},
	} {
		inbound, why := KumaInboundLogging(c.objs)
		if inbound != c.inbound || !strings.Contains(why, c.why) {
			t.Errorf("%s: KumaInboundLogging = %v, %q; want %v and %q", c.name, inbound, why, c.inbound, c.why)
		}
	}
}
