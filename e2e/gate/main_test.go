// Package gate_test drives the built mesh-verify binary's CI-gate flags
// (README.md "CI gate": --set, --wait-ready, --converge/--within) against
// one lab for the package: real kube-apiservers (kwok), the tutorial's
// callme-service v1 in c1 and v2 in c2, and gateway entries whose mesh simulator moves a
// route from 100/0 to 50/50 eight seconds after its first request, as a
// configuration push reaching the data plane would (lab/README.md,
// weightsAfter). The simulator's choices stay seeded random draws; the
// apps' answers are what mesh-verify attributes.
package gate_test

import (
	"os"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
)

// gateTopology: gate-a and gate-b switch from c1 only to half and half
// 8 s after their first request (gate-b serves the too-short deadline,
// whose clock must start fresh); gate-c is 50/50 from the start.
const gateTopology = `apiVersion: lab.mesh-verify.io/v1alpha1
kind: Topology
metadata:
  name: gate-push
  seed: "a route's weights pushed during a run: 100/0, then 50/50"
  description: "callme v1 (c1) and v2 (c2) behind gateways whose weights move 8 s after their first request"
clusters: [c1, c2]
apps:
  - name: callme-v1
    kind: callme
    service: callme-service
    version: v1
    namespace: sample
    replicas: {c1: 1}
  - name: callme-v2
    kind: callme
    service: callme-service
    version: v2
    namespace: sample
    replicas: {c2: 1}
services:
  - name: callme-service
    namespace: sample
    port: 8080
entries:
  - name: gate-a
    cluster: c1
    namespace: sample
    service: gate-a
    to: callme-service
    policy:
      mode: weighted
      weights: {c1: 100, c2: 0}
      weightsAfter: {after: 8s, weights: {c1: 50, c2: 50}}
  - name: gate-b
    cluster: c1
    namespace: sample
    service: gate-b
    to: callme-service
    policy:
      mode: weighted
      weights: {c1: 100, c2: 0}
      weightsAfter: {after: 8s, weights: {c1: 50, c2: 50}}
  - name: gate-c
    cluster: c1
    namespace: sample
    service: gate-c
    to: callme-service
    policy:
      mode: weighted
      weights: {c1: 50, c2: 50}
`

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
// (every test reads it: gate-a, gate-b and gate-c each serve one test, so
// each route's clock starts with that test's first request).
func runGate(t *testing.T, timeout time.Duration, args ...string) e2etest.Result {
	t.Helper()
	l := mv.SharedLab(t, e2etest.LabSpec{Source: gateTopology})
	sc := e2etest.WriteFile(t, "scenario.yaml", gateScenario)
	return mv.Run(t, e2etest.Cmd{Timeout: timeout}, append([]string{"run", sc, "--kubeconfig", l.Kubeconfig}, args...)...)
}
