package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/lab/envoylog"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/tally"
)

// kumaSidecarScenario attributes the kuma-canary lab's 90/10 split twice:
// from each test-server pod's kuma-sidecar metrics (Envoy's inbound
// cluster counter, scraped through a port-forward to kuma-dp's port 5670)
// and from the same containers' access logs (Kuma's default format,
// joined to the attack by the x-request-id the sidecar logs).
const kumaSidecarScenario = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: kuma-sidecar-metrics}
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
target:
  portForward: {cluster: c1, namespace: kuma-demo, resource: svc/edge-gateway, port: "8080"}
  path: /
# 2000 requests: the catalog's size for this split; enough for a verdict
# when the data plane splits at random (nginx's split_clients), where
# mesh-verify plan's 80%-power size (379) fails one run in five.
attack:
  rate: 200/s
  duration: 10s
observe:
  - name: test-server
    namespace: kuma-demo
    selector: app=test-server
    container: kuma-sidecar
    metrics:
      port: "5670"
      path: /metrics
      counter: envoy_cluster_upstream_rq_total
      labels: {envoy_cluster_name: localhost_80}
      via: portForward
    logs:
      match: '^\[[^\]]+\] default "GET / HTTP/1\.1" 200 - \d+ \d+ \d+ \S+ "[^"]*" "[^"]*" "[^"]*" "(?P<request_id>[^"]+)" "[^"]*" "unknown"'
expect:
  - name: 90/10 from the sidecars' metrics
    split: {by: cluster, model: weights, weights: {c1: 90, c2: 10}, source: metrics}
  - name: 90/10 from the sidecars' access logs
    split: {by: cluster, model: weights, weights: {c1: 90, c2: 10}, source: logs}
`

// Per-pod metrics through the lab's real API servers: the built binary
// attacks the kuma-canary lab (Kuma's test-server behind kuma sidecars),
// scrapes every test-server pod's sidecar through a port-forward before
// and after, and judges the split from the counter deltas — and, in the
// same run, from the sidecars' access logs. Both pass, the metrics deltas
// equal the run's access-log lines per pod exactly, and both equal the
// answers the attack got.
func TestMetricsAttributionThroughTheLabsAPIServers(t *testing.T) {
	// Counts only its own run's lines (by run id): the seed experiments'
	// kuma-canary lab serves it too.
	l := mv.SharedLab(t, e2etest.LabSpec{Topology: "kuma-canary"})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := runBinary(t, ctx, "run", writeScenario(t, kumaSidecarScenario), "--kubeconfig", l.Kubeconfig)
	if r.Report() == nil {
		t.Fatalf("no report (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if r.Report().Verdict != assert.Pass {
		t.Fatalf("verdict %s (exit %d), want PASS\n%s\n%s", r.Report().Verdict, r.Code, r.Stdout, r.Stderr)
	}
	for _, e := range r.Report().Expectation {
		if e.Verdict != assert.Pass {
			t.Errorf("expectation %q: %s", e.Name, e.Verdict)
		}
	}

	metricsByPod, metricsByCluster := dimension(r.Report(), "metrics", "pod"), dimension(r.Report(), "metrics", "cluster")
	logsByCluster := dimension(r.Report(), "logs", "cluster")
	if metricsByPod == nil || metricsByCluster == nil || logsByCluster == nil {
		t.Fatalf("the report lacks metrics or logs counts: %+v", r.Report().Dimensions)
	}

	// Ground truth: the run's lines in each sidecar's log file.
	linesByPod, linesByCluster := map[string]int64{}, map[string]int64{}
	var sidecars int
	for _, p := range l.Status.Pods {
		if p.Role != daemon.RoleApp {
			continue
		}
		if p.SidecarContainer != "kuma-sidecar" || p.SidecarLogFile == "" || filepath.Base(p.SidecarLogFile) != "kuma-demo_"+p.Name+"_kuma-sidecar.log" {
			t.Fatalf("pod %s: sidecar %q, log %q, want kuma-sidecar's", p.Name, p.SidecarContainer, p.SidecarLogFile)
		}
		sidecars++
		forLines(t, p.SidecarLogFile, func(line string) {
			msg := strings.SplitN(line, " ", 4)[3]
			e, err := envoylog.Parse(envoylog.Kuma, msg)
			if err != nil {
				t.Errorf("%s: %v", p.SidecarLogFile, err)
				return
			}
			if strings.HasPrefix(e.RequestID, r.Report().RunID+"-") && e.Code == 200 {
				linesByPod[tally.PodKey(p.Cluster, p.Name)]++ // the pod bucket: cluster/pod
				linesByCluster[p.Cluster]++
			}
		})
	}
	if sidecars != 2 {
		t.Fatalf("%d test-server pods with a sidecar, want 2", sidecars)
	}
	var total int64
	for pod, n := range linesByPod {
		if metricsByPod[pod] != n {
			t.Errorf("pod %s: the metrics delta counts %d requests, its sidecar logged %d of the run", pod, metricsByPod[pod], n)
		}
		total += n
	}
	for pod, n := range metricsByPod {
		if _, ok := linesByPod[pod]; !ok && n != 0 {
			t.Errorf("pod %s: the metrics count %d requests, its sidecar logged none of the run", pod, n)
		}
	}
	for c, n := range linesByCluster {
		if metricsByCluster[c] != n || logsByCluster[c] != n {
			t.Errorf("cluster %s: metrics %d, logs %d, sidecar lines %d", c, metricsByCluster[c], logsByCluster[c], n)
		}
	}
	if total == 0 || total != r.Report().Metrics.Successes || linesByCluster["c2"] == 0 {
		t.Errorf("sidecars logged %d requests of the run (%v), the attack got %d answers", total, linesByCluster, r.Report().Metrics.Successes)
	}
	t.Logf("run %s: %d answers; sidecar lines %v; metrics %v; logs %v", r.Report().RunID, r.Report().Metrics.Successes, linesByCluster, metricsByCluster, logsByCluster)
}

// dimension is the report's counts of one attribution source and dimension.
func dimension(r *reports.Report, source, name string) map[string]int64 {
	for _, d := range r.Dimensions {
		if d.Source == source && d.Name == name {
			return bucketCounts(d)
		}
	}
	return nil
}
