package fleet

import (
	"testing"

	"github.com/mesh-verify/mesh-verify/scenarios"
)

// The workers run in the target Service's namespace, read from a url
// target's host as cluster DNS resolves it; any other host leaves the
// default namespace.
func TestNamespaceOfURLTarget(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ url, want string }{
		{"http://helloworld.sample:5000/hello", "sample"},
		{"http://helloworld.sample.svc:5000/", "sample"},
		{"http://helloworld.sample.svc.cluster.local:5000/", "sample"},
		{"http://helloworld.sample.svc.cluster.local.:5000/", "sample"},
		{"http://rebel-base/", "default"},
		{"http://10.0.0.7:8080/", "default"},
		{"http://[::1]:8080/", "default"},
		{"http://a.b.c/", "default"},
		{"http://web.demo.svc.other.domain/", "default"},
		{"http://web.Bad_NS/", "default"},
	} {
		sc := &scenarios.Scenario{Target: scenarios.Target{URL: c.url}}
		if got := Namespace(sc); got != c.want {
			t.Errorf("Namespace(url %s) = %q, want %q", c.url, got, c.want)
		}
	}
	fw := &scenarios.Scenario{Target: scenarios.Target{Forward: &scenarios.Forward{Namespace: "kuma-demo", Resource: "svc/x", Port: "80"}}}
	if got := Namespace(fw); got != "kuma-demo" {
		t.Errorf("port-forward target: %q, want kuma-demo", got)
	}
}
