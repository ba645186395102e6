package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
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

// TestIngressGatewayRoutesOnlyWhatIsBound: istio-ingress's gateway routes
// by the tutorial's helloworld-gateway.yaml, as a real ingress gateway
// does: /hello is served, /other gets the gateway's own 404 (access-log
// flag NR) and reaches no helloworld pod. A VirtualService whose
// spec.gateways names a Gateway that does not exist, then no
// VirtualService at all, leave the gateway with no route: every request
// 404, and the lab's status says why, naming the object and the field.
// Real parts: the lab's API servers, kubectl, the daemon's gateway on
// loopback (requests go to the address kwok's port-forward reaches).
func TestIngressGatewayRoutesOnlyWhatIsBound(t *testing.T) {
	t.Parallel()
	l := mv.Lab(t, e2etest.LabSpec{Topology: "istio-ingress"})
	const entry = "istio-ingressgateway"
	var gw daemon.Pod
	e2etest.Poll(t, time.Minute, "the gateway's pod routed in the lab status", func() error {
		st, err := daemon.ReadStatus(l.Dir)
		if err != nil {
			return err
		}
		for _, p := range st.Pods {
			if p.Role == daemon.RoleEntry && p.App == entry && p.Ready && p.Policy != "" && len(p.Backends) == 2 {
				gw = p
				return nil
			}
		}
		return fmt.Errorf("no ready pod of entry %s with a policy and both helloworld backends", entry)
	})
	if !strings.Contains(gw.Policy, `uri exact "/hello"`) {
		t.Errorf("gateway policy %q: want the VirtualService's uri exact /hello", gw.Policy)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := c.Get("http://" + gw.Addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/hello"); code != http.StatusOK || !strings.Contains(body, "Hello version: v") {
		t.Errorf("GET /hello through the gateway: %d %q, want helloworld's answer", code, body)
	}
	if code, body := get("/other"); code != http.StatusNotFound || body != "" {
		t.Errorf("GET /other through the gateway: %d %q, want Envoy's 404 with no body", code, body)
	}
	e2etest.Poll(t, 30*time.Second, "the gateway's 404 counted in the lab status", func() error {
		st, err := daemon.ReadStatus(l.Dir)
		if err != nil {
			return err
		}
		for _, p := range st.Pods {
			if p.Key() == gw.Key() && p.Routed != nil && p.Routed.NoRoute == 1 && p.Routed.Requests == 2 {
				return nil
			}
		}
		return fmt.Errorf("pod %s: routed counts not 2 requests, 1 without a route", gw.Key())
	})
	e2etest.Poll(t, 30*time.Second, "the gateway's access line for /other", func() error {
		b, err := os.ReadFile(gw.LogFile)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), `"GET /other HTTP/1.1" 404 NR route_not_found`) {
			return fmt.Errorf("no 404 NR route_not_found line for /other in %s", gw.LogFile)
		}
		return nil
	})

	noRoute := func(step, want string) {
		t.Helper()
		e2etest.Poll(t, 30*time.Second, step+": the gateway has no route", func() error {
			st, err := daemon.ReadStatus(l.Dir)
			if err != nil {
				return err
			}
			for _, p := range st.Pods {
				if p.Role == daemon.RoleEntry && p.App == entry && strings.Contains(p.Policy, want) {
					return nil
				}
			}
			return fmt.Errorf("no pod of entry %s with a policy saying %q", entry, want)
		})
		if code, body := get("/hello"); code != http.StatusNotFound || body != "" {
			t.Errorf("%s: GET /hello through the gateway: %d %q, want 404", step, code, body)
		}
	}
	e2etest.Kubectl(t, l, "c1", "-n", "sample", "patch", "virtualservice", "helloworld", "--type=json",
		"-p", `[{"op": "replace", "path": "/spec/gateways/0", "value": "helloworld-gatway"}]`)
	noRoute("a misspelt Gateway", "VirtualService sample/helloworld: spec.gateways[0] names Gateway sample/helloworld-gatway, which does not exist in cluster c1")
	e2etest.Kubectl(t, l, "c1", "-n", "sample", "delete", "virtualservice", "helloworld")
	noRoute("no VirtualService", "no VirtualService bound to a Gateway selecting istio-ingressgateway (pod labels app=istio-ingressgateway,istio=ingressgateway,lab.mesh-verify.io/entry=istio-ingressgateway); Gateways selecting it: sample/helloworld-gateway")
}
