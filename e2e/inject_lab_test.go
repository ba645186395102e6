package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/envoylog"
)

// catalogWorkersFrom is the cluster each catalog scenario that attacks
// from worker pods runs them in: a test applies what `mesh-verify rbac`
// prints for it there first, as a user would.
var catalogWorkersFrom = map[string]string{
	"istio-helloworld":  "c1",
	"cilium-rebel-base": "c1",
}

// injectedScenario is Istio's multicluster check from three worker pods
// in namespace sample of c1, where istio-injection=enabled gives each an
// istio-proxy (played by the lab daemon, lab/README.md "Worker pods in
// the lab's mesh"), as the tutorial's sleep pod has one.
const injectedScenario = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: istio-helloworld-injected-workers}
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
target:
  url: http://helloworld.sample:5000/hello
attack:
  concurrency: 3
  repetitions: 160
  keepAlive: false
  workers: 3
  from: c1
  pod: {sidecar: istio}
attribution:
  preset: istio-helloworld
observe:
  - name: helloworld
    namespace: sample
    selector: app=helloworld
statistics: {margin: 10%, power: 0.99}
expect:
  - name: about half by cluster
    split: {buckets: [c1, c2]}
  - successRate: {atLeast: 99%}
`

// `run --workers 3` with sidecar injection on in the istio-helloworld lab:
// each worker waits for its injected proxy, its requests go through that
// proxy's data plane (routed by Istio's objects, logged in the pod's
// istio-proxy log), it asks the proxy to quit and its pod completes. The
// counts by cluster and by version equal what helloworld's own sidecars
// logged answering the run's ids, each worker's proxy logged exactly its
// requests, and the Job and pods are gone afterwards. Then a VirtualService
// that routes everything to v1, applied with kubectl, turns the catalog
// scenario (also from injected workers) from PASS to FAIL.
func TestWorkersWithInjectedSidecars(t *testing.T) {
	t.Parallel()
	l := mv.Lab(t, e2etest.LabSpec{Topology: "istio-helloworld"})
	f := writeScenario(t, injectedScenario)
	applyRBAC(t, l, f, []string{"c1"})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	r := runBinary(t, ctx, "run", f, "--kubeconfig", l.Kubeconfig)
	rep := r.Report()
	if rep == nil || r.Code != 0 || rep.Verdict != assert.Pass {
		t.Fatalf("distributed run with injected sidecars: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	rows := rowsOf(t, rep, 3)
	for _, row := range rows {
		if !row.Final || row.Error != "" || row.Requests != 160 {
			t.Errorf("worker %d: %+v, want 160 requests and a final record", row.Index, row)
		}
	}
	// What the backends served, from helloworld's own istio-proxy logs.
	byCluster, byVersion, byWorker := appSidecarCounts(t, l, rep.RunID, envoylog.Istio)
	for dim, served := range map[string]map[string]int64{"cluster": byCluster, "version": byVersion} {
		got := dimension(rep, "body", dim)
		if len(got) != 2 {
			t.Errorf("by %s: the report counts %v, want 2 buckets", dim, got)
		}
		for k, n := range got {
			if served[k] != n || n == 0 {
				t.Errorf("%s %s: the report counts %d, the backends' sidecars logged %d of the run", dim, k, n, served[k])
			}
		}
	}
	// What each worker's own istio-proxy logged: its requests, then the quit.
	proxied := workerProxyCounts(t, l, rep.RunID, 3)
	for _, row := range rows {
		if proxied[row.Index] != row.Requests || byWorker[row.Index] != row.Requests {
			t.Errorf("worker %d: its record counts %d requests, its istio-proxy logged %d, the backends %d", row.Index, row.Requests, proxied[row.Index], byWorker[row.Index])
		}
	}
	noWorkersIn(t, l, rep.RunID, "sample", "c1")
	t.Logf("run %s: by cluster %v, by version %v, per worker proxy %v", rep.RunID, byCluster, byVersion, proxied)

	// The catalog scenario, then everything routed to v1 by Istio's own objects.
	catalog := filepath.Join("..", "scenarios", "catalog", "istio-helloworld.yaml")
	if got := runBinary(t, ctx, "run", catalog, "--kubeconfig", l.Kubeconfig); got.Report() == nil || got.Report().Verdict != assert.Pass {
		t.Fatalf("catalog istio-helloworld from injected workers: exit %d, want PASS\n%s\n%s", got.Code, got.Stdout, got.Stderr)
	}
	patched := time.Now()
	if out, err := e2etest.KubectlErr(t, l, []byte(allToV1), "c1", "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the VirtualService: %v\n%s", err, out)
	}
	took := waitPolicy(t, l, "weights by version v1=1", patched)
	t.Logf("the workers entry routes by the VirtualService %v after kubectl apply", took.Round(time.Millisecond))
	bad := runBinary(t, ctx, "run", catalog, "--kubeconfig", l.Kubeconfig)
	if bad.Report() == nil || bad.Report().Verdict != assert.Fail || bad.Code != 1 {
		t.Fatalf("catalog istio-helloworld with every request routed to v1: exit %d, want FAIL\n%s\n%s", bad.Code, bad.Stdout, bad.Stderr)
	}
	if v := dimension(bad.Report(), "body", "version"); v["v2"] != 0 || v["v1"] == 0 {
		t.Errorf("routed to v1 by the VirtualService, the report counts %v by version", v)
	}
}

// allToV1 routes every request for helloworld to subset v1 (Istio's own
// objects, as the tutorial's traffic-management tasks write them).
const allToV1 = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: helloworld, namespace: sample}
spec:
  host: helloworld.sample.svc.cluster.local
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: helloworld, namespace: sample}
spec:
  hosts: [helloworld.sample.svc.cluster.local]
  http:
  - route:
    - destination: {host: helloworld.sample.svc.cluster.local, subset: v1}
`

// workerProxyCounts reads the istio-proxy logs of the run's worker pods
// (the lab keeps a pod's log files after it is gone): the access lines
// with the run's ids per worker index. Each log must end with the proxy
// asked to quit.
func workerProxyCounts(t *testing.T, l *lab.Lab, runID string, workers int) map[int]int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(l.Dir, "logs", "c1", "sample_mv-"+strings.ToLower(runID)+"-*_istio-proxy.log"))
	if err != nil || len(files) != workers {
		t.Fatalf("istio-proxy logs of the run's worker pods: %v (%v), want %d", files, err, workers)
	}
	out := map[int]int64{}
	for _, file := range files {
		quit := false
		forLines(t, file, func(line string) {
			parts := strings.SplitN(line, " ", 4)
			if len(parts) < 4 {
				return
			}
			if strings.HasPrefix(parts[3], "quitquitquit") {
				quit = true
				return
			}
			e, err := envoylog.Parse(envoylog.Istio, parts[3])
			if err != nil {
				return
			}
			i, ok := workerOf(t, runID, e.RequestID)
			if !ok || e.Code != 200 || e.Authority != "helloworld.sample:5000" {
				t.Errorf("%s: %q, want the run's requests to helloworld.sample:5000 answered 200", filepath.Base(file), parts[3])
				return
			}
			out[i]++
		})
		if !quit {
			t.Errorf("%s: the worker never asked its istio-proxy to quit", filepath.Base(file))
		}
	}
	if len(out) != workers {
		t.Errorf("the workers' proxies logged requests of workers %v, want %d workers", out, workers)
	}
	return out
}
