package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
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

// Every seed experiment of the tutorials, reproduced in the local lab (real
// kube-apiservers, tutorial apps, simulated mesh) and judged through the
// built binary's Kubernetes path: port-forward through the API server, the
// unmodified apps' log lines counted in the attack window, response bodies
// and sidecar access logs. The verdict each tutorial implies is asserted,
// and a mirror's count against the copies the lab's data plane sent.
func TestSeedExperimentsInTheLab(t *testing.T) {
	// Runs after the package's serial tests, its labs two at a time
	// beside the other parallel lab tests; by then the tests that shared
	// an istio-mirror or kuma-canary lab are done, and it takes them.
	t.Parallel()
	seeds := []struct {
		topology  string
		scenarios map[string]assert.Verdict
	}{
		{"skupper-1", map[string]assert.Verdict{"skupper-1": assert.Pass}},
		// Skupper balances per cluster, not per pod: expecting equal per pod fails.
		{"skupper-2", map[string]assert.Verdict{"skupper-2": assert.Pass, "skupper-2-per-pod": assert.Fail}},
		{"skupper-3", map[string]assert.Verdict{"skupper-3": assert.Pass}},
		{"skupper-4", map[string]assert.Verdict{"skupper-4": assert.Pass}},
		// The same from Skupper v2's Link objects.
		{"skupper-4-v2", map[string]assert.Verdict{"skupper-4": assert.Pass}},
		// The same mirroring from callme-v2's own lines and from the
		// istio-proxy access logs joined by the sidecars' x-request-id.
		{"istio-mirror", map[string]assert.Verdict{"istio-mirror": assert.Pass, "istio-mirror-sidecar": assert.Pass}},
		{"cilium-c2", map[string]assert.Verdict{"cilium-c2": assert.Pass}},
		{"cilium-both", map[string]assert.Verdict{"cilium-both": assert.Pass}},
		{"kuma-canary", map[string]assert.Verdict{"kuma-canary": assert.Pass}},
		// The same split from the next Kuma release's MeshHTTPRoute.
		{"kuma-canary-v3", map[string]assert.Verdict{"kuma-canary": assert.Pass}},
		{"istio-helloworld", map[string]assert.Verdict{"istio-helloworld": assert.Pass}},
		{"cilium-rebel-base", map[string]assert.Verdict{"cilium-rebel-base": assert.Pass}},
	}
	for _, seed := range seeds {
		t.Run(seed.topology, func(t *testing.T) {
			// Each lab is its own: two at a time (go test's -parallel is
			// GOMAXPROCS, 2 on CI's machine) overlap one lab's waits
			// (API servers starting, pods becoming ready, closed-loop
			// attacks through port-forwards) with the other's work.
			t.Parallel()
			// The experiments only run scenarios and read the lab: where
			// an earlier test shared a lab of the topology, they take it.
			l := mv.TakeLab(t, e2etest.LabSpec{Topology: seed.topology})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			for _, name := range slices.Sorted(maps.Keys(seed.scenarios)) {
				want := seed.scenarios[name]
				f := filepath.Join("..", "scenarios", "catalog", name+".yaml")
				var copiesBefore int64
				if strings.Contains(name, "mirror") {
					copiesBefore = labMirrored(t, l, time.Now())
				}
				if from := catalogWorkersFrom[name]; from != "" {
					applyRBAC(t, l, f, []string{from})
				}
				r := runBinary(t, ctx, "run", f, "--kubeconfig", l.Kubeconfig)
				if r.Report() == nil {
					t.Fatalf("%s: no report (exit %d)\n%s\n%s", name, r.Code, r.Stdout, r.Stderr)
				}
				if r.Report().Verdict != want {
					t.Errorf("%s: verdict %s, want %s (exit %d)\n%s\n%s", name, r.Report().Verdict, want, r.Code, r.Stdout, r.Stderr)
					continue
				}
				if r.Report().Kubernetes == nil || len(r.Report().Kubernetes.Clusters) == 0 {
					t.Errorf("%s: the report does not describe the clusters", name)
				}
				if strings.Contains(r.Stdout, "SETUP ERROR") {
					t.Errorf("%s: setup error:\n%s", name, r.Stdout)
				}
				if m := mirroredCount(r.Report()); m >= 0 {
					// The data plane's own record of the copies it sent.
					sent := labMirrored(t, l, time.Now()) - copiesBefore
					if m != sent || sent == 0 {
						t.Errorf("%s: the report counts %d mirrored requests, the lab's data plane sent %d copies", name, m, sent)
					}
				}
				if msg := logTimelineMismatch(r.Report()); msg != "" {
					t.Errorf("%s: %s", name, msg)
				}
				t.Logf("%s: %s, %d requests", name, r.Report().Verdict, r.Report().Metrics.Requests)
			}
		})
	}
}

// logTimelineMismatch compares the timeline's served lines per cluster
// from the logs with the logs' count per cluster, where the pods logged no
// background (the lab's apps log only the requests they serve): each
// served line must be in exactly one window of the timeline.
func logTimelineMismatch(rep *reports.Report) string {
	for _, rc := range rep.Reconciliation {
		if rc.Source != "logs" || rc.Background != 0 || rc.Status != reports.ReconcileOK {
			return ""
		}
	}
	var logs *reports.Dimension
	for i, d := range rep.Dimensions {
		if d.Source == "logs" && d.Name == "cluster" {
			logs = &rep.Dimensions[i]
		}
	}
	if logs == nil || logs.Attributed == 0 {
		return ""
	}
	inTimeline := map[string]int64{}
	for _, sl := range rep.Timeline.Slices {
		for c, n := range sl.Sources["logs"] {
			inTimeline[c] += n
		}
	}
	for _, b := range logs.Buckets {
		if inTimeline[b.Name] != b.Count {
			return fmt.Sprintf("cluster %s: the logs count %d served, the timeline's windows hold %d (%v)", b.Name, b.Count, inTimeline[b.Name], inTimeline)
		}
	}
	return ""
}

// labMirrored is the number of mirror copies the lab's simulators have
// sent so far, from the status the daemon writes every second: it waits
// for a status written after at (and a second more, so the last copies of
// a run are in it).
func labMirrored(t *testing.T, l *lab.Lab, at time.Time) int64 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := daemon.ReadStatus(l.Dir)
		if err == nil && st.Updated.After(at.Add(time.Second)) {
			var n int64
			for _, p := range st.Pods {
				if p.Routed != nil {
					for _, c := range p.Routed.Mirrored {
						n += c
					}
				}
			}
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("lab status not updated since %s: %v", at.Format(time.RFC3339Nano), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// mirroredCount is the report's count of mirrored requests, -1 without a
// mirror expectation.
func mirroredCount(rep *reports.Report) int64 {
	for _, e := range rep.Expectation {
		if e.Kind == "mirror" && e.Split != nil {
			for _, b := range e.Split.Buckets {
				if b.Bucket == assert.BucketMirrored {
					return b.Count
				}
			}
		}
	}
	return -1
}

// editedTopology writes the built-in topology with edits applied (pairs
// of old and new text, each replaced once in the first of its files that
// has it: lab.yaml, then a directory's manifests in path order) and
// returns the file or directory to bring up. It fails when an edit no
// longer applies (the topology changed; update the caller's edits).
func editedTopology(t *testing.T, name string, edits []string) string {
	t.Helper()
	src, err := topologies.Source(name)
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := topologies.Manifests(name)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"": string(src)}
	for p, b := range manifests {
		files[p] = string(b)
	}
	for i := 0; i+1 < len(edits); i += 2 {
		done := false
		for _, p := range slices.Sorted(maps.Keys(files)) {
			if strings.Contains(files[p], edits[i]) {
				files[p] = strings.Replace(files[p], edits[i], edits[i+1], 1)
				done = true
				break
			}
		}
		if !done {
			t.Fatalf("topology %s has no %q any more; update the test's edits", name, edits[i])
		}
	}
	if manifests == nil {
		f := filepath.Join(t.TempDir(), name+"-edited.yaml")
		if err := os.WriteFile(f, []byte(files[""]), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	dir := filepath.Join(t.TempDir(), name+"-edited")
	out := map[string][]byte{}
	for p, s := range files {
		if p != "" {
			out[p] = []byte(s)
		}
	}
	if err := topologies.WriteDir(dir, []byte(files[""]), out); err != nil {
		t.Fatal(err)
	}
	return dir
}
