package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/reports"
)

// ingressScenario sends its requests, with mesh-verify's request ids,
// through istio-ingress's edge gateway and counts helloworld's requests
// from its istio-proxy logs.
const ingressScenario = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: istio-ingress}
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
target:
  portForward: {cluster: c1, namespace: sample, resource: svc/istio-ingressgateway, port: "8080"}
  path: /hello
attack:
  concurrency: 2
  repetitions: 100
attribution:
  preset: istio-helloworld
observe:
  - name: helloworld
    namespace: sample
    selector: app=helloworld
    logs:
      preset: istio-proxy
expect:
  - successRate:
      atLeast: 99%
`

// TestEdgeRegeneratesRequestIDs: behind istio-ingress's edge gateway
// (edge: true, Istio 1.25+) no sidecar line carries one of the run's
// request ids. The run says why it could not join by id and counts the
// lines in the attack window instead: every answered request, once.
func TestEdgeRegeneratesRequestIDs(t *testing.T) {
	t.Parallel()
	l := mv.Lab(t, e2etest.LabSpec{Topology: "istio-ingress"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, out := runInlineScenario(t, ctx, l, ingressScenario)
	if w := strings.Join(rep.Warnings, "\n"); !strings.Contains(w, "the ids were made up on the way") {
		t.Errorf("no warning that the ids were regenerated; warnings:\n%s", w)
	}
	rc := logsReconciliation(t, rep, out)
	t.Logf("logs: counted %v of %d answered (%d failed), status %s", rc.Counted, rc.Answered, rc.Failed, rc.Status)
	for _, p := range rc.Pods {
		if p.Mode != "window" {
			t.Errorf("pod %s/%s counted by %q, want window (no line has a run's id)", p.Cluster, p.Pod, p.Mode)
		}
	}
	if rc.Counted != float64(rc.Answered+rc.Failed) || rc.Status != "ok" {
		t.Errorf("logs counted %v, the run had %d requests answered and %d failed: %s %s", rc.Counted, rc.Answered, rc.Failed, rc.Status, rc.Reason)
	}
}

// runInlineScenario runs scenario src (YAML) against lab l and returns its
// report and stdout; no report fails the test.
func runInlineScenario(t *testing.T, ctx context.Context, l *lab.Lab, src string) (*reports.Report, string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "scenario.yaml")
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runBinary(t, ctx, "run", f, "--kubeconfig", l.Kubeconfig)
	rep := r.Report()
	if rep == nil {
		t.Fatalf("no report (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	return rep, r.Stdout
}

// logsReconciliation is the report's reconciliation of the logs source.
func logsReconciliation(t *testing.T, rep *reports.Report, stdout string) reports.Reconciliation {
	t.Helper()
	for _, rc := range rep.Reconciliation {
		if rc.Source == "logs" {
			return rc
		}
	}
	t.Fatalf("no logs reconciliation\n%s", stdout)
	return reports.Reconciliation{}
}
