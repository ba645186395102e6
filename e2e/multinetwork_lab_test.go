package e2e

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
)

// TestMultiNetworkGatewayUpstream runs the catalog's istio-multinetwork
// scenario in a lab of two Istio networks: the caller's outbound
// istio-proxy log names callme v1's pod IP for requests served in c1 and
// c2's east-west gateway (ClusterIP:15443) for those served in c2, and the
// two clusters' pod IPs overlap. The sidecar-log attribution must count
// each cluster exactly what the caller's data plane sent it (the lab's
// ground truth, status.json's routed counts), never a gateway line for the
// caller's own cluster.
func TestMultiNetworkGatewayUpstream(t *testing.T) {
	t.Parallel()
	l := mv.Lab(t, e2etest.LabSpec{Topology: "istio-multinetwork"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Overlapping pod CIDRs: some pod of c2 has the IP of a pod of c1, so
	// an IP alone does not say the cluster.
	ips := func(cluster string) []string {
		return strings.Fields(e2etest.Kubectl(t, l, cluster, "get", "pods", "-A", "-o", "jsonpath={.items[*].status.podIP}"))
	}
	c1IPs, c2IPs := ips("c1"), ips("c2")
	overlap := false
	for _, ip := range c2IPs {
		overlap = overlap || strings.Contains(" "+strings.Join(c1IPs, " ")+" ", " "+ip+" ")
	}
	if !overlap {
		t.Fatalf("pod IPs do not overlap: c1 %v, c2 %v", c1IPs, c2IPs)
	}
	gwIP := strings.TrimSpace(e2etest.Kubectl(t, l, "c2", "get", "services", "-n", "istio-system",
		"-l", "istio=eastwestgateway,topology.istio.io/network=network2", "-o", "jsonpath={.items[*].spec.clusterIP}"))
	if gwIP == "" || strings.Contains(gwIP, " ") {
		t.Fatalf("c2's east-west gateway Services labelled with network2 have ClusterIPs %q, want one", gwIP)
	}

	before := routed(t, l)
	r := runBinary(t, ctx, "run", filepath.Join("..", "scenarios", "catalog", "istio-multinetwork.yaml"), "--kubeconfig", l.Kubeconfig)
	rep := r.Report()
	if rep == nil {
		t.Fatalf("no report (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if rep.Verdict != assert.Pass {
		t.Errorf("verdict %s, want PASS\n%s", rep.Verdict, r.Stdout)
	}
	after := routed(t, l)
	sent := map[string]int64{}
	for c, n := range after {
		if d := n - before[c]; d != 0 {
			sent[c] = d
		}
	}
	counted := map[string]int64{}
	for _, rc := range rep.Reconciliation {
		if rc.Source != "logs" {
			continue
		}
		for _, p := range rc.Pods {
			if p.Workload == "caller-outbound" {
				counted[p.Cluster] += p.Lines
			}
		}
	}
	t.Logf("caller's sidecar sent %v; its outbound log counted %v", sent, counted)
	if sent["c1"] == 0 || sent["c2"] == 0 || !maps.Equal(sent, counted) {
		t.Errorf("the caller's outbound log counted %v, the data plane sent %v\n%s", counted, sent, r.Stdout)
	}

	// The log itself: gateway lines for c2, pod lines for c1.
	var gwLines, all int
	for _, line := range sidecarLines(t, l, "caller-service", "outbound|") {
		all++
		if strings.Contains(line, `"`+gwIP+`:15443"`) {
			gwLines++
		}
	}
	if int64(gwLines) != sent["c2"] || int64(all-gwLines) != sent["c1"] {
		t.Errorf("caller's istio-proxy log: %d of %d outbound lines name %s:15443, want %d of %d", gwLines, all, gwIP, sent["c2"], sent["c1"]+sent["c2"])
	}
}

// routed is what the lab's entries have routed so far, per cluster.
func routed(t *testing.T, l *lab.Lab) map[string]int64 {
	t.Helper()
	st, err := daemon.ReadStatus(l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, p := range st.Pods {
		if p.Routed != nil {
			for c, n := range p.Routed.ByCluster {
				out[c] += n
			}
		}
	}
	return out
}

// sidecarLines are the lines containing marker ("inbound|", "outbound|")
// of the istio-proxy logs of app's pods, as the lab's status names them.
func sidecarLines(t *testing.T, l *lab.Lab, app, marker string) []string {
	t.Helper()
	st, err := daemon.ReadStatus(l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range st.Pods {
		if p.App != app || p.SidecarLogFile == "" {
			continue
		}
		b, err := os.ReadFile(p.SidecarLogFile)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, marker) {
				out = append(out, line)
			}
		}
	}
	return out
}
