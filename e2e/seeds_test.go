package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// Every seed experiment of the tutorials, reproduced in the local lab (real
// kube-apiservers, tutorial apps, simulated mesh) and judged through the
// built binary's Kubernetes path: port-forward through the API server, pod
// logs from every cluster joined by request id, mirror attribution. The
// verdict each tutorial implies is asserted.
func TestSeedExperimentsInTheLab(t *testing.T) {
	bin := labtest.Binaries(t)
	seeds := []struct {
		topology  string
		scenarios map[string]assert.Verdict
	}{
		{"skupper-1", map[string]assert.Verdict{"skupper-1": assert.Pass}},
		// Skupper balances per cluster, not per pod: expecting equal per pod fails.
		{"skupper-2", map[string]assert.Verdict{"skupper-2": assert.Pass, "skupper-2-per-pod": assert.Fail}},
		{"skupper-3", map[string]assert.Verdict{"skupper-3": assert.Pass}},
		{"skupper-4", map[string]assert.Verdict{"skupper-4": assert.Pass}},
		{"istio-mirror", map[string]assert.Verdict{"istio-mirror": assert.Pass}},
		{"cilium-c2", map[string]assert.Verdict{"cilium-c2": assert.Pass}},
		{"cilium-both", map[string]assert.Verdict{"cilium-both": assert.Pass}},
		{"kuma-canary", map[string]assert.Verdict{"kuma-canary": assert.Pass}},
	}
	for _, seed := range seeds {
		t.Run(seed.topology, func(t *testing.T) {
			l := upLab(t, bin, seed.topology)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			for name, want := range seed.scenarios {
				f := filepath.Join("..", "scenarios", "catalog", name+".yaml")
				r := runBinary(t, ctx, "run", f, "--kubeconfig", l.Kubeconfig)
				if r.report == nil {
					t.Fatalf("%s: no report (exit %d)\n%s\n%s", name, r.code, r.stdout, r.stderr)
				}
				if r.report.Verdict != want {
					t.Errorf("%s: verdict %s, want %s (exit %d)\n%s\n%s", name, r.report.Verdict, want, r.code, r.stdout, r.stderr)
					continue
				}
				if r.report.Kubernetes == nil || len(r.report.Kubernetes.Clusters) == 0 {
					t.Errorf("%s: the report does not describe the clusters", name)
				}
				if strings.Contains(r.stdout, "SETUP ERROR") {
					t.Errorf("%s: setup error:\n%s", name, r.stdout)
				}
				t.Logf("%s: %s, %d requests", name, r.report.Verdict, r.report.Metrics.Requests)
			}
		})
	}
}

// upLab brings a lab up in a directory of its own for one test (a
// built-in topology name or a file) and takes it down when the test ends;
// dataPlane, when given, plays every entry with that data plane.
func upLab(t *testing.T, bin kwok.Binaries, topology string, dataPlane ...string) *lab.Lab {
	t.Helper()
	dir, err := os.MkdirTemp("", "mve2e-")
	if err != nil {
		t.Fatal(err)
	}
	opts := lab.Options{Dir: dir, Topology: topology, Bin: string(bin), RepoRoot: labtest.RepoRoot(), Daemon: daemonFromBinary}
	if len(dataPlane) > 0 {
		opts.DataPlane = dataPlane[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, opts)
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer dcancel()
		if _, err := lab.Down(dctx, opts); err != nil {
			t.Errorf("lab down: %v", err)
		}
		os.RemoveAll(dir)
	})
	if err != nil {
		t.Fatalf("lab up %s: %v", topology, err)
	}
	return l
}

// daemonFromBinary runs the lab daemon from the binary under test (the
// default, this executable, is the test binary here).
func daemonFromBinary(dir string) (*exec.Cmd, error) {
	return exec.Command(binary, "lab", "serve", "--dir", dir), nil
}
