package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
)

// fromMeshScenario is the catalog's kuma-canary scenario judging the
// split by zone against the TrafficRoute itself (split.fromMesh) instead
// of weights copied from it.
const fromMeshScenario = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: kuma-canary-from-mesh}
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
target:
  portForward: {cluster: c1, namespace: kuma-demo, resource: svc/edge-gateway, port: "8080"}
  path: /
attack: {rate: 400/s, requests: 2000}
attribution: {preset: kuma-test-server}
observe:
  - {name: test-server, namespace: kuma-demo, selector: app=test-server}
expect:
  - name: test-server follows its TrafficRoute
    split:
      by: cluster
      fromMesh: {trafficRoute: test-server}
      margin: 6%
`

// TestFromMeshFollowsThePatchedTrafficRoute runs a scenario whose split
// comes from the running lab's TrafficRoute: PASS at 90/10 by zone; then
// the route is patched to 50/50, the data plane routes by it, and the
// same scenario, unchanged, still PASSes, its report naming the new
// weights and the object's new resourceVersion. plan and validate with
// --kubeconfig show the derived expectation.
func TestFromMeshFollowsThePatchedTrafficRoute(t *testing.T) {
	t.Parallel()
	l := mv.Lab(t, e2etest.LabSpec{Topology: "kuma-canary"})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	f := filepath.Join(t.TempDir(), "kuma-canary-from-mesh.yaml")
	if err := os.WriteFile(f, []byte(fromMeshScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	rvOf := regexp.MustCompile(`TrafficRoute test-server in cluster c1 \(resourceVersion (\d+)\)`)
	run := func(wantWeights string) (rv string) {
		t.Helper()
		r := runBinary(t, ctx, "run", f, "--kubeconfig", l.Kubeconfig)
		rep := r.Report()
		if rep == nil {
			t.Fatalf("no report (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
		}
		e := rep.Expectation[0]
		if rep.Verdict != assert.Pass || e.Verdict != assert.Pass {
			t.Fatalf("verdict %s (%s: %s), want PASS\n%s\n%s", rep.Verdict, e.Name, e.Reason, r.Stdout, r.Stderr)
		}
		if e.Model == nil {
			t.Fatalf("no model in the report: %+v", e)
		}
		expl := strings.Join(e.Model.Explanation, "\n")
		m := rvOf.FindStringSubmatch(expl)
		if m == nil || !strings.Contains(expl, wantWeights) {
			t.Fatalf("the report's model does not name the VirtualService's resourceVersion and weights %q:\n%s", wantWeights, expl)
		}
		// The run printed what it read, with the same resourceVersion.
		if !strings.Contains(r.Stdout+r.Stderr, m[0]) {
			t.Errorf("the run did not print the source %q:\n%s\n%s", m[0], r.Stdout, r.Stderr)
		}
		t.Logf("%s: %s; shares %v", m[0], strings.TrimSpace(wantWeights), e.Model.Shares)
		return m[1]
	}
	before := run("weights c1=90, c2=10\n")

	// plan and validate read the same object with --kubeconfig.
	for _, args := range [][]string{{"plan", f, "--kubeconfig", l.Kubeconfig}, {"validate", f, "--kubeconfig", l.Kubeconfig}} {
		r := runBinary(t, ctx, args...)
		if r.Code != 0 || !strings.Contains(r.Stdout, "resourceVersion "+before) || !strings.Contains(r.Stdout, "weights c1=90, c2=10\n") {
			t.Errorf("%s --kubeconfig: exit %d, want the derived expectation (resourceVersion %s, weights c1=90, c2=10)\n%s\n%s", args[0], r.Code, before, r.Stdout, r.Stderr)
		}
	}

	patched := time.Now()
	e2etest.Kubectl(t, l, "c1", "patch", "trafficroute", "test-server", "--type", "json", "-p",
		`[{"op":"replace","path":"/spec/conf/split/0/weight","value":50},{"op":"replace","path":"/spec/conf/split/1/weight","value":50}]`)
	waitPolicy(t, l, "weights by cluster c1=50,c2=50", patched)
	after := run("weights c1=50, c2=50\n")
	if after == before {
		t.Errorf("resourceVersion %s before and after the patch", before)
	}
}
