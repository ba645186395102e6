// Package examples_test checks what examples/ and the container image
// promise (README.md, "Container image"; examples/README.md): the image
// layout `make image` writes is a valid OCI image of the static binary;
// every manifest in examples/ is accepted by a real API server (server-side
// dry run, with Flagger's and Argo Rollouts' published CRDs installed);
// the Flagger webhook and Argo analysis gate commands, taken from the
// manifests, are run for real against a lab of the mesh they gate and
// pass or fail as the verdict says (Argo's verdict metric queried back
// from a real Prometheus); the GitHub Actions workflow only uses
// commands, flags and names this build has.
//
// Every test runs the binary `make image` put into the image, so the
// gates run exactly what the container would.
package examples_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// imageVersion is the version `make image` stamps in TestMain: the
// binary's `version` and the image's label must both say it.
const imageVersion = "v0.0.0-e2e-examples"

var (
	// binary is the static mesh-verify `make image` built (IMAGE_BIN).
	binary = new(e2etest.Binary)
	// ociDir is the OCI image layout `make image` wrote (OCI), beside the binary.
	ociDir string
)

func TestMain(m *testing.M) { os.Exit(e2etest.Main(m, binary, makeImage)) }

// makeImage is the Makefile's target as users run it: the static build
// (its Go build cache is reused from run to run) and tools/image's layout
// next to the binary.
func makeImage(ctx context.Context, path string) error {
	ociDir = filepath.Join(filepath.Dir(path), "oci")
	mk := exec.CommandContext(ctx, "make", "-C", labtest.RepoRoot(), "image", "VERSION="+imageVersion, "OCI="+ociDir, "IMAGE_BIN="+path)
	mk.Stdout, mk.Stderr = os.Stderr, os.Stderr
	if err := mk.Run(); err != nil {
		return fmt.Errorf("make image: %w", err)
	}
	return nil
}

// labTopology is the mesh the examples gate: a Flagger canary of
// callme-service across two Kuma zones (testdata/callme-zones/: Flagger's objects at a 10% step).
const labTopology = "testdata/callme-zones"

// zonesLab is the package's Kuma lab (the first test that needs it pays
// ~20 s), shared by the gates' tests; argoLab is the Istio one.
func zonesLab(t *testing.T) *lab.Lab { t.Helper(); return sharedLab(t, labTopology) }

// sharedLab is the lab of a topology directory of the package, brought
// up by the first test that asks and shared by the others.
func sharedLab(t *testing.T, dir string) *lab.Lab {
	t.Helper()
	topo, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return binary.SharedLab(t, e2etest.LabSpec{Topology: topo})
}

// run is one finished process.
type run = e2etest.Result

// runCmd runs a command with a deadline and returns its exit code; a
// process that could not start or was killed fails the test.
func runCmd(t *testing.T, env []string, name string, args ...string) run {
	t.Helper()
	return runCmdIn(t, "", env, name, args...)
}

// runCmdIn is runCmd in a working directory.
func runCmdIn(t *testing.T, dir string, env []string, name string, args ...string) run {
	t.Helper()
	return e2etest.Cmd{Timeout: 6 * time.Minute, Env: env, Dir: dir}.Exec(t, name, args...)
}

// examplesDir is the repository's examples/ directory.
func examplesDir() string { return filepath.Join(labtest.RepoRoot(), "examples") }
