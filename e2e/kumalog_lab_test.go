package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
)

// outboundOnlyMAL is a MeshAccessLog with only spec.to, as Kuma's docs
// show for logging a mesh's outgoing traffic to a file.
const outboundOnlyMAL = `apiVersion: kuma.io/v1alpha1
kind: MeshAccessLog
metadata:
  name: outbound-only
  namespace: kuma-demo
spec:
  targetRef: {kind: Mesh}
  to:
    - targetRef: {kind: Mesh}
      default:
        backends:
          - type: File
            file: {path: /dev/stdout}
`

// legacyTrafficLog is Kuma 2.x's legacy TrafficLog from every service to
// every service, as Kuma's docs write it (the mesh's default backend);
// Kuma places it on the source proxies' outbound listeners.
const legacyTrafficLog = `apiVersion: kuma.io/v1alpha1
kind: TrafficLog
mesh: default
metadata:
  name: all-traffic
spec:
  sources:
    - match:
        kuma.io/service: '*'
  destinations:
    - match:
        kuma.io/service: '*'
`

// TestKumaOutboundOnlyLogging: the Kuma sidecars of kuma-canary log the
// requests they receive until a MeshAccessLog with only spec.to or a
// legacy TrafficLog is applied; then their logs stay silent through a
// whole run while the mesh gateway's (outbound) log grows by every
// request, as Kuma logs the outbound side alone.
func TestKumaOutboundOnlyLogging(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, policy string }{
		{"MeshAccessLog with only to", outboundOnlyMAL},
		{"legacy TrafficLog", legacyTrafficLog},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			kumaOutboundOnly(t, c.policy)
		})
	}
}

// kumaOutboundOnly runs kuma-canary's scenario before and after applying
// policy, counting the sidecars' and the gateway's lines.
func kumaOutboundOnly(t *testing.T, policy string) {
	l := mv.Lab(t, e2etest.LabSpec{Topology: "kuma-canary"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sidecarLinesNow := func() int {
		return len(sidecarLines(t, l, "test-server-primary", "")) + len(sidecarLines(t, l, "test-server-canary", ""))
	}
	gatewayLines := func() int {
		files, _ := filepath.Glob(filepath.Join(l.Dir, "logs", "c1", "kuma-demo_edge-gateway-*.log"))
		n := 0
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			n += strings.Count(string(b), "\n")
		}
		return n
	}
	run := func() int {
		t.Helper()
		r := runBinary(t, ctx, "run", filepath.Join("..", "scenarios", "catalog", "kuma-canary.yaml"), "--kubeconfig", l.Kubeconfig)
		if r.Report() == nil {
			t.Fatalf("no report (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
		}
		return int(r.Report().Metrics.Requests)
	}
	s0, g0 := sidecarLinesNow(), gatewayLines()
	n := run()
	s1, g1 := sidecarLinesNow(), gatewayLines()
	if s1-s0 < n || g1-g0 < n {
		t.Fatalf("without a MeshAccessLog: %d requests, sidecars logged %d lines, the gateway %d", n, s1-s0, g1-g0)
	}
	if out, err := e2etest.KubectlErr(t, l, []byte(policy), "c1", "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the policy: %v\n%s", err, out)
	}
	applied := time.Now()
	for !strings.Contains(readFileString(t, filepath.Join(l.Dir, "daemon.log")), "inbound access log") {
		if time.Since(applied) > routeTimeout {
			t.Fatalf("the daemon did not act on the policy within %v", routeTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	n = run()
	s2, g2 := sidecarLinesNow(), gatewayLines()
	t.Logf("with an outbound-only policy: %d requests, sidecars logged %d lines, the gateway %d", n, s2-s1, g2-g1)
	if s2 != s1 || g2-g1 < n {
		t.Errorf("with an outbound-only policy: %d requests, sidecars logged %d lines (want 0), the gateway %d", n, s2-s1, g2-g1)
	}
}
