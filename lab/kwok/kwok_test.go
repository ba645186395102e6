package kwok_test

import (
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// Two real clusters side by side: contexts renamed like kind's, a node and
// a pod in each, and nothing left running afterwards (checked by labtest).
func TestTwoClustersSideBySide(t *testing.T) {
	l := labtest.Clusters(t, "c1", "c2")
	for _, c := range []string{"c1", "c2"} {
		l.Apply(t, c, labtest.Node("node-"+c))
		l.Apply(t, c, `apiVersion: v1
kind: Pod
metadata: {name: p-`+c+`, namespace: default}
spec:
  nodeName: node-`+c+`
  containers: [{name: app, image: fake}]
`)
	}
	for _, c := range []string{"c1", "c2"} {
		out := l.Kubectl(t, c, "get", "pods", "-o", "name")
		if strings.TrimSpace(out) != "pod/p-"+c {
			t.Errorf("cluster %s pods: %q", c, out)
		}
	}
	ctxs := l.Kubectl(t, "c1", "config", "get-contexts", "-o", "name")
	if !strings.Contains(ctxs, "kind-c1") || !strings.Contains(ctxs, "kind-c2") || strings.Contains(ctxs, "kwok-") {
		t.Errorf("contexts: %q", ctxs)
	}
}
