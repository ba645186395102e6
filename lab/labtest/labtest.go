// Package labtest gives tests real Kubernetes API servers: kwok clusters
// of the local lab, created for the test and deleted by it, with a check
// that no process is left behind.
package labtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/lab/kwok"
)

// Lab is a running set of clusters for one test.
type Lab struct {
	*kwok.Lab
	Bin string
}

// RepoRoot finds the repository root from this source file, so tests in
// any package can find tools/lab/build.sh.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Binaries finds (building on first use) the lab binaries, or skips the
// test when they cannot be had outside CI. In CI (CI set) it fails instead:
// .ci/run builds them, so a missing binary there is a real error.
func Binaries(t testing.TB) kwok.Binaries {
	t.Helper()
	if testing.Short() {
		t.Skip("lab clusters are not started in -short mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if _, err := exec.LookPath("go"); err != nil && os.Getenv("MESH_VERIFY_LAB_BIN") == "" {
		t.Skip("no go toolchain to build the lab binaries")
	}
	b, err := kwok.FindBinaries(ctx, RepoRoot())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("lab binaries: %v", err)
		}
		t.Skipf("lab binaries unavailable: %v", err)
	}
	return b
}

// Clusters creates the named clusters (contexts kind-<name>) in one
// kubeconfig and deletes them when the test ends.
func Clusters(t testing.TB, names ...string) *Lab {
	t.Helper()
	b := Binaries(t)
	// A short directory: kwokctl puts unix sockets and long pki paths in it.
	dir, err := os.MkdirTemp("", "mvlab-")
	if err != nil {
		t.Fatal(err)
	}
	l, err := kwok.New(b, dir)
	if err != nil {
		t.Fatal(err)
	}
	lab := &Lab{Lab: l, Bin: string(b)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := l.DeleteAll(ctx); err != nil {
			t.Errorf("delete lab clusters: %v", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for left := l.Leftovers(); len(left) > 0; left = l.Leftovers() {
			if time.Now().After(deadline) {
				t.Errorf("processes left behind by the lab: %v", left)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		os.RemoveAll(dir)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, n := range names {
		if err := l.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	return lab
}

// Kubectl runs kubectl against one cluster and fails the test on error.
func (l *Lab) Kubectl(t testing.TB, cluster string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := l.Lab.Kubectl(ctx, cluster, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Apply applies YAML to one cluster and fails the test on error.
func (l *Lab) Apply(t testing.TB, cluster, yaml string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := l.Lab.Kubectl(ctx, cluster, []byte(yaml), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// Node is the YAML of a simulated node kwok manages.
func Node(name string) string {
	return `apiVersion: v1
kind: Node
metadata:
  name: ` + name + `
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok, kubernetes.io/hostname: ` + name + `}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
`
}

// OneCluster is the smallest lab topology: one cluster, one echo pod
// behind a gateway entry, for tests of the lab's own lifecycle. The entry
// is a Kuma gateway with no route object (no manifest): per pod over its
// Service's endpoints, no retry, a route nginx plays too (`--data-plane
// nginx`).
const OneCluster = `apiVersion: lab.mesh-verify.io/v1alpha1
kind: Topology
metadata: {name: one, seed: "one cluster, one echo pod"}
clusters: [c1]
apps:
  - name: echo
    kind: echo
    service: echo
    replicas: {c1: 1}
services:
  - name: echo
    namespace: default
    port: 8080
entries:
  - name: gateway
    cluster: c1
    service: gateway
    to: echo
    mesh: kuma
`

// Connect is cluster of the lab as the product connects to it: its
// kubeconfig and context through kube.LoadConfig and Config.Connect.
func (l *Lab) Connect(t testing.TB, cluster string) *kube.Cluster {
	t.Helper()
	cfg, err := kube.LoadConfig(kube.Options{Kubeconfig: []string{l.Kubeconfig}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.Connect(context.Background(), kube.ClusterRef{Name: cluster, Context: l.Context(cluster)})
	if err != nil {
		t.Fatalf("connect to lab cluster %s: %v", cluster, err)
	}
	return c
}
