// Package examples_test checks what examples/ and the container image
// promise (README.md, "Container image"; examples/README.md): the image
// layout `make image` writes is a valid OCI image of the static binary;
// every manifest in examples/ is accepted by a real API server (server-side
// dry run, with Flagger's and Argo Rollouts' published CRDs installed);
// the Flagger webhook and Argo analysis gate commands, taken from the
// manifests, are run for real against a lab of the mesh they gate and
// pass or fail as the verdict says; the GitHub Actions workflow only uses
// commands, flags and names this build has.
//
// Every test runs the binary `make image` put into the image, so the
// gates run exactly what the container would.
package examples_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// imageVersion is the version `make image` stamps in TestMain: the
// binary's `version` and the image's label must both say it.
const imageVersion = "v0.0.0-e2e-examples"

var (
	// binary is the static mesh-verify `make image` built (IMAGE_BIN).
	binary string
	// ociDir is the OCI image layout `make image` wrote (OCI).
	ociDir string
	// shared is the package's one full lab (sharedLab), taken down by TestMain.
	shared sharedState
)

type sharedState struct {
	once sync.Once
	lab  *lab.Lab
	opts lab.Options
	err  error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mesh-verify-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "mesh-verify")
	ociDir = filepath.Join(dir, "oci")
	// The Makefile's target as users run it: the static build (its Go
	// build cache is reused from run to run) and tools/image's layout.
	mk := exec.Command("make", "-C", labtest.RepoRoot(), "image", "VERSION="+imageVersion, "OCI="+ociDir, "IMAGE_BIN="+binary)
	mk.Stdout, mk.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	if err := mk.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "make image:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "make image: %s\n", time.Since(start).Round(time.Millisecond))
	code := m.Run()
	if shared.lab != nil || shared.opts.Dir != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if _, err := lab.Down(ctx, shared.opts); err != nil {
			fmt.Fprintln(os.Stderr, "lab down:", err)
			code = 1
		}
		cancel()
		os.RemoveAll(shared.opts.Dir)
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// labTopology is the mesh the examples gate: a Flagger canary of
// callme-service across two Kuma zones (testdata/callme-zones.yaml).
const labTopology = "testdata/callme-zones.yaml"

// sharedLab brings the package's lab up once (the first test that needs
// it pays ~20 s); TestMain takes it down.
func sharedLab(t *testing.T) *lab.Lab {
	t.Helper()
	bin := labtest.Binaries(t)
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "mvex-")
		if err != nil {
			shared.err = err
			return
		}
		seed := uint64(1) // recorded: `mesh-verify lab up --seed 1` replays the routing
		topo, err := filepath.Abs(labTopology)
		if err != nil {
			shared.err = err
			return
		}
		shared.opts = lab.Options{Dir: dir, Topology: topo, Bin: string(bin), RepoRoot: labtest.RepoRoot(), Seed: &seed,
			Daemon: func(dir string) (*exec.Cmd, error) { return exec.Command(binary, "lab", "serve", "--dir", dir), nil }}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		shared.lab, shared.err = lab.Up(ctx, shared.opts)
	})
	if shared.err != nil {
		t.Fatalf("lab up %s: %v", labTopology, shared.err)
	}
	return shared.lab
}

// run is one finished process.
type run struct {
	code           int
	stdout, stderr string
}

// runCmd runs a command with a deadline and returns its exit code; a
// process that could not start or was killed fails the test.
func runCmd(t *testing.T, env []string, name string, args ...string) run {
	t.Helper()
	return runCmdIn(t, "", env, name, args...)
}

// runCmdIn is runCmd in a working directory.
func runCmdIn(t *testing.T, dir string, env []string, name string, args ...string) run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := run{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, r.stderr)
	}
	return r
}

// examplesDir is the repository's examples/ directory.
func examplesDir() string { return filepath.Join(labtest.RepoRoot(), "examples") }
