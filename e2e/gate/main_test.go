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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/internal/schematest"
	"github.com/mesh-verify/mesh-verify/reports"
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
// requests per attempt tell 100/0 (FAIL) from 50/50 (PASS) at once.
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

var (
	binary     string
	kubeconfig string
	scenario   string
	topo       string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mesh-verify-gate-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "mesh-verify")
	build := exec.Command("go", "build", "-o", binary, "../../cmd/mesh-verify")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build mesh-verify:", err)
		return 1
	}
	topo, scenario = filepath.Join(dir, "gate-push.yaml"), filepath.Join(dir, "scenario.yaml")
	for f, body := range map[string]string{topo: gateTopology, scenario: gateScenario} {
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	labDir := filepath.Join(dir, "lab")
	kubeconfig = filepath.Join(labDir, "kubeconfig")
	// The lab's own down stops its daemon and clusters by pid, whatever
	// happened to the tests.
	defer func() {
		down := exec.Command(binary, "lab", "down", "--dir", labDir)
		down.Stdout, down.Stderr = os.Stderr, os.Stderr
		if err := down.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "lab down:", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	up := exec.CommandContext(ctx, binary, "lab", "up", "--topology", topo, "--dir", labDir, "--seed", "1")
	var out bytes.Buffer
	up.Stdout, up.Stderr = &out, &out
	began := time.Now()
	if err := up.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "lab up: %v\n%s", err, out.String())
		return 1
	}
	fmt.Fprintf(os.Stderr, "lab up in %s\n", time.Since(began).Round(time.Second))
	return m.Run()
}

// result is one run of the binary with every report it wrote.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
	// reports by run directory name (the run id).
	reports map[string]*reports.Report
}

func runBinary(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	out := t.TempDir()
	full := append(append([]string{}, args...), "--out", out, "--progress", "plain", "--kubeconfig", kubeconfig)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, full...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	began := time.Now()
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String(), took: time.Since(began), reports: map[string]*reports.Report{}}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	s, err := schematest.Compile("report.schema.json", reports.JSONSchema())
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		p := filepath.Join(out, e.Name(), "report.json")
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if err := schematest.Validate(s, b); err != nil {
			t.Errorf("%s does not match report.schema.json: %v", p, err)
		}
		var rep reports.Report
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		r.reports[e.Name()] = &rep
	}
	return r
}

// final is the report with the most attempts: the last attempt's.
func (r result) final() *reports.Report {
	var best *reports.Report
	for _, rep := range r.reports {
		if best == nil || rep.Converge != nil && (best.Converge == nil || len(rep.Converge.Attempts) > len(best.Converge.Attempts)) {
			best = rep
		}
	}
	return best
}
