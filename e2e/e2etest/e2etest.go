// Package e2etest is what every end-to-end test package shares: the
// mesh-verify binary (and mesh-verify-lab beside it) built once per
// package in TestMain, labs brought up
// and taken down by pid (the lab's own Up and Down), the binary run with a
// deadline (exit code, stdout, stderr, every report.json it wrote checked
// against the schema), and kubectl against a lab cluster.
//
// A test package holds one *Binary, set by Main:
//
//	var mv = new(e2etest.Binary)
//
//	func TestMain(m *testing.M) { os.Exit(e2etest.Main(m, mv, nil)) }
package e2etest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/internal/schematest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
	"github.com/mesh-verify/mesh-verify/reports"
)

// Build writes the mesh-verify binary to path.
type Build func(ctx context.Context, path string) error

// GoBuild is `go build ./cmd/mesh-verify` of this repository.
func GoBuild(ctx context.Context, path string) error {
	return goBuild(ctx, path, "./cmd/mesh-verify")
}

func goBuild(ctx context.Context, path, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, pkg)
	cmd.Dir = labtest.RepoRoot()
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build -o %s %s: %w", path, pkg, err)
	}
	return nil
}

// Binary is the built mesh-verify of a test package and the labs its
// tests share.
type Binary struct {
	// Path is the executable, set by Main before the tests run.
	Path string
	// LabPath is mesh-verify-lab, built by Main beside Path, where
	// `mesh-verify lab` finds it; it runs the labs' daemons.
	LabPath string
	shared  labs
}

// Main builds the binary (GoBuild when build is nil) and mesh-verify-lab
// beside it into a temporary directory, runs the package's tests, takes
// down every lab they shared and removes the directory. TestMain passes
// its result to os.Exit.
func Main(m *testing.M, b *Binary, build Build) int {
	if build == nil {
		build = GoBuild
	}
	dir, err := os.MkdirTemp("", "mesh-verify-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	b.Path = filepath.Join(dir, "mesh-verify")
	b.LabPath = filepath.Join(dir, "mesh-verify-lab")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	began := time.Now()
	err = build(ctx, b.Path)
	if err == nil {
		err = goBuild(ctx, b.LabPath, "./lab/cmd/mesh-verify-lab")
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "build mesh-verify:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "built mesh-verify and mesh-verify-lab in %s\n", time.Since(began).Round(time.Millisecond))
	code := m.Run()
	if err := b.shared.downAll(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	return code
}

// Result is one finished run of a command.
type Result struct {
	Code           int
	Stdout, Stderr string
	Took           time.Duration
	// Out is the --out directory of a `run` (empty for other commands).
	Out string
	// Reports are the report.json files under Out by run directory name
	// (the run id), each checked against report.schema.json.
	Reports map[string]*reports.Report
}

// Report is the run's only report, or the one with the most attempts
// when --converge wrote several (the last attempt's); nil when none.
func (r Result) Report() *reports.Report {
	var best *reports.Report
	for _, rep := range r.Reports {
		if best == nil || rep.Converge != nil && (best.Converge == nil || len(rep.Converge.Attempts) > len(best.Converge.Attempts)) {
			best = rep
		}
	}
	return best
}

// Dir is the run directory of the run's report (Report), empty when none.
func (r Result) Dir() string {
	rep := r.Report()
	for id, x := range r.Reports {
		if x == rep {
			return filepath.Join(r.Out, id)
		}
	}
	return ""
}

// Cmd is how a command is run; the zero value runs it in the test's
// environment with a 5 minute deadline.
type Cmd struct {
	// Context, when set, bounds the command too.
	Context context.Context
	// Timeout bounds the command (default 5 minutes); past it the
	// process is killed and the test fails.
	Timeout time.Duration
	// Env replaces the environment when CleanEnv, else is added to it.
	Env      []string
	CleanEnv bool
	Dir      string
	Stdin    []byte
	// WaitDelay bounds the wait for output pipes after the process
	// exited (a child it started may hold them).
	WaitDelay time.Duration
}

// Run runs the binary. A `run` gets --out (a directory of the test's)
// and --progress plain unless args give them, and its reports are read.
func (b *Binary) Run(t testing.TB, c Cmd, args ...string) Result {
	t.Helper()
	full := append([]string{}, args...)
	out := ""
	if len(args) > 0 && args[0] == "run" {
		if i := indexOf(args, "--out"); i >= 0 && i+1 < len(args) {
			out = args[i+1]
		} else {
			out = t.TempDir()
			full = append(full, "--out", out)
		}
		if indexOf(args, "--progress") < 0 && indexOf(args, "-q") < 0 && indexOf(args, "--quiet") < 0 {
			full = append(full, "--progress", "plain")
		}
	}
	r := c.Exec(t, b.Path, full...)
	if out != "" {
		r.Out = out
		r.Reports = ReadReports(t, out)
	}
	return r
}

func indexOf(args []string, s string) int {
	for i, a := range args {
		if a == s {
			return i
		}
	}
	return -1
}

// Exec runs a command to its end. A command that cannot start, or is
// killed at its deadline, fails the test; any exit code is the caller's
// to judge.
func (c Cmd) Exec(t testing.TB, name string, args ...string) Result {
	t.Helper()
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	parent := c.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if c.CleanEnv {
		cmd.Env = append([]string{}, c.Env...)
	} else {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	cmd.Dir = c.Dir
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	cmd.WaitDelay = c.WaitDelay
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	began := time.Now()
	err := cmd.Run()
	r := Result{Stdout: so.String(), Stderr: se.String(), Took: time.Since(began)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		t.Fatalf("%s %s: killed after %s (%v): %v\n%s%s", name, strings.Join(args, " "), r.Took.Round(time.Millisecond), ctx.Err(), err, r.Stdout, r.Stderr)
	case errors.As(err, &ee) && ee.Exited():
		r.Code = ee.ExitCode()
	case errors.Is(err, exec.ErrWaitDelay):
		r.Code = cmd.ProcessState.ExitCode()
	default:
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, r.Stdout, r.Stderr)
	}
	return r
}

// ReadReports reads every report.json one directory below out, checking
// each against the schema the reports package embeds
// (docs/report-format.md).
func ReadReports(t testing.TB, out string) map[string]*reports.Report {
	t.Helper()
	s, err := schematest.Compile("report.schema.json", reports.JSONSchema())
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]*reports.Report{}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		p := filepath.Join(out, e.Name(), "report.json")
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if err := schematest.Validate(s, b); err != nil {
			t.Errorf("%s does not match report.schema.json: %v", p, err)
		}
		var rep reports.Report
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		found[e.Name()] = &rep
	}
	return found
}

// WriteFile writes text to name in a directory of the test's and returns
// its path.
func WriteFile(t testing.TB, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Kubectl runs the lab's kubectl against one cluster of a lab (its
// context, its kubeconfig, its cache in the lab: never ~/.kube) and
// fails the test on error.
func Kubectl(t testing.TB, l *lab.Lab, cluster string, args ...string) string {
	t.Helper()
	out, err := KubectlErr(t, l, nil, cluster, args...)
	if err != nil {
		t.Fatalf("kubectl %s (%s): %v\n%s", strings.Join(args, " "), cluster, err, out)
	}
	return out
}

// KubectlErr is Kubectl with stdin that returns the error to the caller.
func KubectlErr(t testing.TB, l *lab.Lab, stdin []byte, cluster string, args ...string) (string, error) {
	t.Helper()
	bin := labtest.Binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.Path("kubectl"), append([]string{"--kubeconfig", l.Kubeconfig, "--context", l.Context(cluster)}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(l.Dir, "kubecache"))
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Seed is the routing seed every e2e lab is brought up with:
// MESH_VERIFY_E2E_SEED, default 1. A failure replays with
// `mesh-verify lab up --seed N`; `make calibrate` is where verdicts are
// judged over many seeds (docs/calibration-lab.md).
func Seed(t testing.TB) uint64 {
	t.Helper()
	v := os.Getenv("MESH_VERIFY_E2E_SEED")
	if v == "" {
		return 1
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("MESH_VERIFY_E2E_SEED=%q: want a whole number: %v", v, err)
	}
	return n
}
