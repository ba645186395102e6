// Package gate_test drives the built mesh-verify binary's CI-gate flags
// (README.md "CI gate": --set, --wait-ready, --converge/--within) against
// one lab for the package: real kube-apiservers (kwok), the tutorial's
// callme-service v1 in c1 and v2 in c2, and Istio gateway entries routed
// by VirtualServices (testdata/gate-push), one of which a test patches
// with kubectl while its run repeats, as a configuration push reaching
// the data plane would. The simulator's choices stay seeded random draws;
// the apps' answers are what mesh-verify attributes.
package gate_test

import (
	"os"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
)

// gateTopology is the lab of the package (lab.yaml says what each
// gateway routes by): gate-a and gate-b send everything to v1 until a test
// patches their VirtualService; gate-c is 50/50 from the start.
const gateTopology = "testdata/gate-push"

// gateScenario expects half and half by version through gate-a; 200
// requests per attempt tell 100/0 (FAIL) from 50/50 (PASS) at once. Each
// request opens its own connection (keepAlive: false), so each is a draw
// however the lab's gateways balance: over 10 keep-alive connections the
// effective n estimated from the data could fall to 10 (docs/statistics.md
// §3.3), and an attempt on 100/0 would be INCONCLUSIVE, not FAIL.
const gateScenario = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata:
  name: gate-push
  description: "half of the requests to each version, once the push has propagated"
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
target:
  portForward: {cluster: c1, namespace: sample, resource: svc/gate-a, port: "8080"}
  path: /callme/ping
attack:
  rate: 100/s
  duration: 2s
  keepAlive: false
attribution:
  preset: tutorial
observe:
  - name: callme
    namespace: sample
    selector: app=callme-service
statistics:
  margin: 15%
expect:
  - name: half by version
    split:
      by: version
      weights: {v1: 1, v2: 1}
`

// mv is the binary under test, built by TestMain.
var mv = new(e2etest.Binary)

func TestMain(m *testing.M) { os.Exit(e2etest.Main(m, mv, nil)) }

// runGate runs gateScenario with args against the package's one lab
// (gate-a, gate-b and gate-c each serve one test: only
// TestConvergeAfterPush changes a route, gate-a's).
func runGate(t *testing.T, timeout time.Duration, args ...string) e2etest.Result {
	t.Helper()
	return runGateIn(t, gateLab(t), timeout, args...)
}

// gateLab is the package's one lab.
func gateLab(t *testing.T) *lab.Lab {
	t.Helper()
	return mv.SharedLab(t, e2etest.LabSpec{Topology: gateTopology})
}

func runGateIn(t *testing.T, l *lab.Lab, timeout time.Duration, args ...string) e2etest.Result {
	t.Helper()
	sc := e2etest.WriteFile(t, "scenario.yaml", gateScenario)
	return mv.Run(t, e2etest.Cmd{Timeout: timeout}, append([]string{"run", sc, "--kubeconfig", l.Kubeconfig}, args...)...)
}
