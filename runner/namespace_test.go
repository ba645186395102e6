package runner

import (
	"testing"

	"github.com/mesh-verify/mesh-verify/scenarios"
)

// TestWithNamespace: -n replaces only the namespaces the scenario left
// unset, and leaves the caller's scenario as it was.
func TestWithNamespace(t *testing.T) {
	sc, err := scenarios.Parse("ns.yaml", []byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: ns}
clusters: [{name: c1, context: kind-c1}]
target:
  portForward: {cluster: c1, resource: svc/web, port: "80"}
attack: {rate: 10/s, duration: 1s}
observe:
  - {name: unset, selector: app=a, logs: {preset: nginx}}
  - {name: named, namespace: shop, selector: app=b, logs: {preset: nginx}}
  - {name: named-default, namespace: default, selector: app=c, logs: {preset: nginx}}
expect:
  - successRate: {atLeast: 90%}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ns      string
		forward string
		observe []string
	}{
		{"", "default", []string{"default", "shop", "default"}},
		{"demo", "demo", []string{"demo", "shop", "default"}},
	} {
		got := withNamespace(sc, tc.ns)
		if got.Target.Forward.Namespace != tc.forward {
			t.Errorf("-n %q: forward namespace %q, want %q", tc.ns, got.Target.Forward.Namespace, tc.forward)
		}
		for i, w := range got.Observe {
			if w.Namespace != tc.observe[i] {
				t.Errorf("-n %q: observe[%d] namespace %q, want %q", tc.ns, i, w.Namespace, tc.observe[i])
			}
		}
	}
	if sc.Target.Forward.Namespace != "default" || sc.Observe[0].Namespace != "default" {
		t.Errorf("withNamespace changed the caller's scenario")
	}
}
