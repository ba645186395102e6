package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/lab/topologies"
	"github.com/mesh-verify/mesh-verify/reports"
)

// The lab with Debian's nginx as the mesh's data plane instead of our
// simulator (`lab up --data-plane nginx`), playing the routes the meshes'
// objects give: the split is made by split_clients (a 90/10 canary and a
// half-and-half split by zone, random per request) and by the mirror
// module (50% copied, random per request).
// What mesh-verify reports, through the lab's API servers, is compared
// with what nginx itself logged and with the apps' own logs — ground
// truth that does not come from our routing code.
func TestNginxDataPlaneInTheLab(t *testing.T) {
	t.Parallel()   // labs of its own: runs beside the seed experiments
	nginxBinary(t) // skips, or fails in CI, without nginx
	catalog := func(name string) string { return filepath.Join("..", "scenarios", "catalog", name+".yaml") }

	t.Run("kuma-canary split_clients 90/10", func(t *testing.T) {
		t.Parallel()
		l := mv.Lab(t, e2etest.LabSpec{Topology: "kuma-canary", DataPlane: "nginx"})
		// Kuma's test-server names only its pod and logs nothing: the
		// split is read from the kuma sidecars' metrics and access logs,
		// which keep the request id nginx passes on.
		r := runIn(t, l, writeScenario(t, kumaSidecarScenario), assert.Pass)
		checkAgainstNginxLog(t, l, r)
	})

	t.Run("Kuma zone split under nginx (skupper-2's apps behind a TrafficRoute)", func(t *testing.T) {
		t.Parallel()
		// Not Skupper: its router balances by open connections + link
		// cost, which nginx cannot play (lab up refuses it). Half per
		// cluster, the split Skupper's scenario 2 expects, is what a Kuma
		// TrafficRoute splitting by zone says: skupper-2's apps behind a
		// Kuma gateway routed by one, which nginx plays with split_clients.
		// Each verdict is checked against nginx's own access log (the
		// upstream it logged per request id), not against the simulator.
		src, err := topologies.Source("skupper-2")
		if err != nil {
			t.Fatal(err)
		}
		topo := strings.Replace(string(src), "mesh: skupper", "mesh: kuma", 1)
		if topo == string(src) {
			t.Fatal("skupper-2's entry changed; update this test")
		}
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "c1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "lab.yaml"), []byte(topo), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "c1", "trafficroute.yaml"), []byte(zoneSplit), 0o644); err != nil {
			t.Fatal(err)
		}
		l := mv.Lab(t, e2etest.LabSpec{Topology: dir, DataPlane: "nginx"})
		checkAgainstNginxLog(t, l, runIn(t, l, catalog("skupper-2"), assert.Pass))
		// Equal per pod is not what half per cluster gives (50/25/25).
		checkAgainstNginxLog(t, l, runIn(t, l, catalog("skupper-2-per-pod"), assert.Fail))
		// A weight patched with kubectl reaches the running nginx (a new
		// configuration, reloaded): everything to zone c3, and the
		// scenario that expects half per cluster FAILs.
		patch := `[{"op": "replace", "path": "/spec/conf/split/0/weight", "value": 0},` +
			`{"op": "replace", "path": "/spec/conf/split/1/weight", "value": 100}]`
		patched := time.Now()
		e2etest.Kubectl(t, l, "c1", "patch", "trafficroute", "sample-spring-kotlin-microservice", "--type", "json", "-p", patch)
		// The status shows the policy once nginx's reloaded configuration answers.
		t.Logf("nginx plays the patched route %v after the patch", waitPolicy(t, l, "c2=0,c3=100", patched).Round(time.Millisecond))
		r := runIn(t, l, catalog("skupper-2"), assert.Fail)
		checkAgainstNginxLog(t, l, r)
		if served, total := nginxServed(t, l, r.Report().RunID); served["c3"] != total || total == 0 {
			t.Errorf("after the patch nginx sent %v of %d requests; want all to c3", served, total)
		}
	})

	t.Run("istio-mirror 50% with the mirror module", func(t *testing.T) {
		t.Parallel()
		l := mv.Lab(t, e2etest.LabSpec{Topology: "istio-mirror", DataPlane: "nginx"})
		// nginx mirrors at random per request (split_clients), like
		// Envoy's runtime_fraction; the catalog's 1900 requests are
		// planned to pass a correct 50% at 99% power.
		r := runIn(t, l, catalog("istio-mirror"), assert.Pass)
		// Every primary went to v1 (nginx's log), and the mirrored count
		// in the report is what v2's own log file shows in the run.
		// The caller does not pass mesh-verify's request id on, so nginx
		// (the caller's outbound sidecar here) logs an id of its own: the
		// run's requests are the lines of the attack window.
		from := r.Report().Attack.Started.Add(-2 * time.Second)
		to := r.Report().Attack.Ended.Add(3 * time.Second)
		// nginx answers the daemon's check of its configuration itself
		// (upstream "-"): those lines are no request of the run.
		byCluster, total := nginxLogged(t, l, func(fs []string) bool {
			ts, err := time.Parse(time.RFC3339, fs[0])
			return err == nil && len(fs) > 2 && fs[2] != "-" && !ts.Before(from.Truncate(time.Second)) && !ts.After(to)
		})
		if byCluster["c1"] != total || total != r.Report().Metrics.Successes {
			t.Errorf("nginx sent %v of %d primaries of the run, want all %d to c1", byCluster, total, r.Report().Metrics.Successes)
		}
		copies := labLines(t, l, "c2", "callme-service-v2", callmeV2, r.Report())
		if mirrored := mirroredCount(r.Report()); mirrored != copies || copies == 0 {
			t.Errorf("report counts %d mirrored requests, v2's log has %d copies in the run", mirrored, copies)
		}
		t.Logf("mirrored %d of %d (%.1f%%)", copies, total, 100*float64(copies)/float64(total))
	})
}

// zoneSplit is a Kuma TrafficRoute that sends half of skupper-2's
// requests to zone c2 and half to zone c3.
const zoneSplit = `apiVersion: kuma.io/v1alpha1
kind: TrafficRoute
mesh: default
metadata:
  name: sample-spring-kotlin-microservice
spec:
  sources:
    - match:
        kuma.io/service: "*"
  destinations:
    - match:
        kuma.io/service: sample-spring-kotlin-microservice_interconnect_svc_8080
  conf:
    split:
      - weight: 50
        destination:
          kuma.io/service: sample-spring-kotlin-microservice_interconnect_svc_8080
          kuma.io/zone: c2
      - weight: 50
        destination:
          kuma.io/service: sample-spring-kotlin-microservice_interconnect_svc_8080
          kuma.io/zone: c3
`

// runIn runs a scenario against the lab and checks its verdict and that
// an nginx entry served it.
func runIn(t *testing.T, l *lab.Lab, scenario string, want assert.Verdict) e2etest.Result {
	t.Helper()
	var entries int
	for _, p := range l.Status.Pods {
		if p.DataPlane != "" {
			entries++
			if p.DataPlane != "nginx" || p.DataPlaneLog == "" {
				t.Fatalf("pod %s/%s: data plane %q (log %q), want nginx", p.Cluster, p.Name, p.DataPlane, p.DataPlaneLog)
			}
		}
	}
	if entries == 0 {
		t.Fatal("no entry pod in the lab status")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := runBinary(t, ctx, "run", scenario, "--kubeconfig", l.Kubeconfig)
	if r.Report() == nil {
		t.Fatalf("%s: no report (exit %d)\n%s\n%s", scenario, r.Code, r.Stdout, r.Stderr)
	}
	if r.Report().Verdict != want {
		t.Fatalf("%s: verdict %s, want %s (exit %d)\n%s\n%s", scenario, r.Report().Verdict, want, r.Code, r.Stdout, r.Stderr)
	}
	return r
}

// checkAgainstNginxLog compares the report's per-cluster counts with the upstreams nginx logged for the run's ids.
func checkAgainstNginxLog(t *testing.T, l *lab.Lab, r e2etest.Result) {
	t.Helper()
	served, total := nginxServed(t, l, r.Report().RunID)
	// The cluster as the scenario attributes it: from response bodies
	// (kuma's echo names it), else from the pods' logs (Skupper's sample
	// app does not).
	var body map[string]int64
	for _, src := range []string{"body", "logs"} {
		for _, d := range r.Report().Dimensions {
			if body == nil && d.Source == src && d.Name == "cluster" && d.Attributed > 0 {
				body = bucketCounts(d)
			}
		}
	}
	if total == 0 || total != r.Report().Metrics.Successes {
		t.Errorf("nginx logged %d requests of run %s, the attack got %d answers", total, r.Report().RunID, r.Report().Metrics.Successes)
	}
	for _, m := range []map[string]int64{served, body} {
		for c := range m {
			if body[c] != served[c] {
				t.Errorf("cluster %s: report %d, nginx sent %d (report %v, nginx %v)", c, body[c], served[c], body, served)
			}
		}
	}
	t.Logf("run %s: nginx sent %v, report %v", r.Report().RunID, served, body)
}

func bucketCounts(d reports.Dimension) map[string]int64 {
	out := map[string]int64{}
	for _, b := range d.Buckets {
		out[b.Name] = b.Count
	}
	return out
}

// nginxServed reads every nginx access log of the lab (time, request id,
// upstream address, status) and counts the run's requests by the cluster
// of the app pod listening on the upstream address.
func nginxServed(t *testing.T, l *lab.Lab, runID string) (map[string]int64, int64) {
	t.Helper()
	return nginxLogged(t, l, func(fs []string) bool { return strings.HasPrefix(fs[1], runID+"-") })
}

// nginxLogged counts the lines of the lab's nginx access logs that keep
// accepts (time, request id, upstream, status) by the cluster of the app
// pod listening on the upstream address.
func nginxLogged(t *testing.T, l *lab.Lab, keep func(fields []string) bool) (map[string]int64, int64) {
	t.Helper()
	st := l.Status
	clusterOf := map[string]string{}
	var logs []string
	for _, p := range st.Pods {
		if p.Role == daemon.RoleApp {
			// Mesh traffic enters a pod with a sidecar through the sidecar.
			clusterOf[p.Addr] = p.Cluster
			if p.SidecarInbound != "" {
				clusterOf[p.SidecarInbound] = p.Cluster
			}
		}
		if p.DataPlaneLog != "" {
			logs = append(logs, p.DataPlaneLog)
		}
	}
	out := map[string]int64{}
	var total int64
	for _, f := range logs {
		forLines(t, f, func(line string) {
			fs := strings.Fields(line)
			if len(fs) < 2 || !keep(fs) {
				return
			}
			if len(fs) != 4 {
				// "a, b" upstreams would be a retry, which the lab's
				// configuration forbids: the split would not be nginx's.
				t.Errorf("nginx log line %q: want time, request id, one upstream, status", line)
				return
			}
			total++
			c, ok := clusterOf[fs[2]]
			if !ok {
				t.Errorf("nginx sent request %s to %s, which is no app pod of the lab", fs[1], fs[2])
			}
			out[c]++
		})
	}
	return out, total
}

func forLines(t *testing.T, file string, f func(string)) {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		f(sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
