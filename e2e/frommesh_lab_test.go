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
	"github.com/mesh-verify/mesh-verify/lab"
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
	l, f := fromMeshLab(t, "kuma-canary", fromMeshScenario)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rvOf := regexp.MustCompile(`TrafficRoute test-server in cluster c1 \(resourceVersion (\d+)\)`)
	run := func(wantWeights string) string {
		t.Helper()
		return runFromMesh(t, ctx, f, l.Kubeconfig, rvOf, wantWeights)
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

// runFromMesh runs the scenario f, wants every expectation to PASS and
// the first one's model explanation to name the object (rvOf, its
// resourceVersion the first group) and want, as the run printed it too;
// it returns the resourceVersion.
func runFromMesh(t *testing.T, ctx context.Context, f, kubeconfig string, rvOf *regexp.Regexp, want string) string {
	t.Helper()
	r := runBinary(t, ctx, "run", f, "--kubeconfig", kubeconfig)
	rep := r.Report()
	if rep == nil {
		t.Fatalf("no report (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	e := rep.Expectation[0]
	if rep.Verdict != assert.Pass {
		t.Fatalf("verdict %s (%s: %s %s), want PASS\n%s\n%s", rep.Verdict, e.Name, e.Verdict, e.Reason, r.Stdout, r.Stderr)
	}
	if e.Model == nil {
		t.Fatalf("no model in the report: %+v", e)
	}
	expl := strings.Join(e.Model.Explanation, "\n")
	m := rvOf.FindStringSubmatch(expl)
	if m == nil || !strings.Contains(expl, want) {
		t.Fatalf("the report's model does not name the object's resourceVersion and %q:\n%s", want, expl)
	}
	// The run printed what it read, with the same resourceVersion.
	if !strings.Contains(r.Stdout+r.Stderr, m[0]) {
		t.Errorf("the run did not print the source %q:\n%s\n%s", m[0], r.Stdout, r.Stderr)
	}
	t.Logf("%s: %s; shares %v", m[0], strings.TrimSpace(want), e.Model.Shares)
	return m[1]
}

// fromMeshMirrorScenario is the catalog's istio-mirror scenario with the
// mirror's percentage read from the VirtualService (mirror.fromMesh).
const fromMeshMirrorScenario = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: istio-mirror-from-mesh}
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
target:
  portForward: {cluster: c1, namespace: default, resource: svc/caller-service, port: "8080"}
  path: /caller/ping
attack: {concurrency: 4, repetitions: 475, keepAlive: false}
attribution: {preset: tutorial}
observe:
  - name: callme-v2
    selector: app=callme-service,version=v2
    clusters: [c2]
    logs: {preset: spring-callme}
expect:
  - name: mirrored to callme v2 as the VirtualService says
    mirror:
      to: callme-v2
      fromMesh: {virtualService: default/callme-service-route}
      margin: 5%
      shadow: false
`

// TestFromMeshMirrorFollowsThePatchedVirtualService: a mirror whose
// percentage comes from the running lab's VirtualService PASSes at 50%
// and, the scenario unchanged, at 10% after kubectl patch; the report
// names the new percentage and resourceVersion.
func TestFromMeshMirrorFollowsThePatchedVirtualService(t *testing.T) {
	t.Parallel()
	l, f := fromMeshLab(t, "istio-mirror", fromMeshMirrorScenario)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rvOf := regexp.MustCompile(`VirtualService default/callme-service-route in cluster c1 \(resourceVersion (\d+)\)`)
	before := runFromMesh(t, ctx, f, l.Kubeconfig, rvOf, "mirror 50% to v2")
	patched := time.Now()
	e2etest.Kubectl(t, l, "c1", "patch", "virtualservice", "callme-service-route", "--type", "json", "-p",
		`[{"op":"replace","path":"/spec/http/0/mirrorPercentage/value","value":10}]`)
	waitPolicy(t, l, "mirror 10% to version v2", patched)
	if after := runFromMesh(t, ctx, f, l.Kubeconfig, rvOf, "mirror 10% to v2"); after == before {
		t.Errorf("resourceVersion %s before and after the patch", before)
	}
}

// fromMeshLab starts the topology's lab and writes the scenario to a file.
func fromMeshLab(t *testing.T, topology, scenario string) (*lab.Lab, string) {
	t.Helper()
	l := mv.Lab(t, e2etest.LabSpec{Topology: topology})
	f := filepath.Join(t.TempDir(), topology+"-from-mesh.yaml")
	if err := os.WriteFile(f, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	return l, f
}

// fromMeshSkupperScenario is the catalog's skupper-1 with its split read
// from the Skupper network's objects (split.fromMesh), one connection at
// a time.
const fromMeshSkupperScenario = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: skupper-1-from-mesh}
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
  - {name: c3, context: kind-c3}
target:
  portForward: {cluster: c1, namespace: interconnect, resource: svc/sample-spring-kotlin-microservice, port: "8080"}
  path: /persons/1
attack: {concurrency: 1, repetitions: 60, keepAlive: false}
observe:
  - name: sample-app
    namespace: interconnect
    selector: app=sample-spring-kotlin-microservice
    logs: {preset: spring-persons}
expect:
  - name: the exposed sites serve
    split:
      by: cluster
      source: logs
      fromMesh:
        skupper: interconnect/sample-spring-kotlin-microservice
        selector: app=sample-spring-kotlin-microservice
      margin: 5%
`

// TestFromMeshSkupperCountsOnlyExposedSites: in the skupper-1 lab, c2's
// skupper-services ConfigMap deleted (skupper unexpose) takes c2 out of
// the lab's router and out of the product's expectation alike: the
// fromMesh split is c3 only, its explanation says why c2 gets nothing,
// and the run PASSes. On main before this change the product still
// expected c2 (link cost 1, equal to c3's) to take traffic.
func TestFromMeshSkupperCountsOnlyExposedSites(t *testing.T) {
	t.Parallel()
	l, f := fromMeshLab(t, "skupper-1", fromMeshSkupperScenario)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	deleted := time.Now()
	e2etest.Kubectl(t, l, "c2", "-n", "interconnect", "delete", "configmap", "skupper-services")
	waitPolicy(t, l, "costs c3=1 per-connection", deleted)
	rvOf := regexp.MustCompile(`ConfigMap interconnect/skupper-services in cluster c3 \(resourceVersion (\d+)\)`)
	runFromMesh(t, ctx, f, l.Kubeconfig, rvOf, "cluster c2: address sample-spring-kotlin-microservice is not exposed there, so no share: no ConfigMap interconnect/skupper-services")
}
