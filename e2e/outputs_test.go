package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/runlog"
)

// A run that cannot reach its target (exit 3, before the attack) still
// writes report.json, junit.xml, summary.md and the step summary naming
// the cause, prints the report with -o json, keeps notices off stdout
// and leaves no empty results.bin.
func TestSetupErrorWritesEveryOutput(t *testing.T) {
	t.Parallel()
	port := freePort(t) // nothing listens there any more
	f := writeScenario(t, scenario(fmt.Sprintf("http://127.0.0.1:%d", port), "  rate: 10/s\n  duration: 30s", "  - reached: {buckets: [c1]}"))
	for _, tc := range []struct {
		name   string
		args   []string
		stdout func(t *testing.T, stdout string)
	}{
		{"json", []string{"-o", "json"}, jsonNamesCause},
		// The deprecated flag's notice goes to stderr: stdout still parses.
		{"deprecated --json", []string{"--json"}, jsonNamesCause},
		{"md", []string{"-o", "md"}, func(t *testing.T, stdout string) {
			if !strings.Contains(stdout, "SETUP ERROR") || !strings.Contains(stdout, "connection refused") {
				t.Errorf("-o md does not name the cause:\n%s", stdout)
			}
		}},
		{"table", nil, func(t *testing.T, stdout string) {
			if !strings.Contains(stdout, "wrote ") {
				t.Errorf("stdout does not list the files written:\n%s", stdout)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			summary := filepath.Join(t.TempDir(), "step-summary.md")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r := mv.Run(t, e2etest.Cmd{Context: ctx, Env: []string{"GITHUB_STEP_SUMMARY=" + summary}}, append([]string{"run", f}, tc.args...)...)
			if r.Code != 3 {
				t.Fatalf("exit %d, want 3\n%s", r.Code, r.Stderr)
			}
			if !strings.Contains(r.Stderr, "connection refused") {
				t.Errorf("stderr does not name the cause: %s", r.Stderr)
			}
			tc.stdout(t, r.Stdout)
			rep, dir := r.Report(), r.Dir()
			if rep == nil {
				t.Fatal("no report.json")
			}
			fl := rep.Failure
			if fl == nil || fl.Kind != reports.FailureSetup || fl.Phase != reports.PhasePrepare || fl.ExitCode != 3 ||
				!strings.Contains(fl.Cause, "connection refused") || rep.ExitCode != 3 || rep.Gate == assert.Pass {
				t.Errorf("report.json: exit %d, gate %s, failure %+v", rep.ExitCode, rep.Gate, fl)
			}
			junit := readFileString(t, filepath.Join(dir, "junit.xml"))
			if !strings.Contains(junit, `errors="1"`) || !strings.Contains(junit, `<error message="cannot reach target`) {
				t.Errorf("junit.xml has no error case naming the cause:\n%s", junit)
			}
			for _, p := range []string{filepath.Join(dir, "summary.md"), summary} {
				if md := readFileString(t, p); !strings.Contains(md, "connection refused") || !strings.Contains(md, "exit code 3") {
					t.Errorf("%s does not name the cause and exit code:\n%s", p, md)
				}
			}
			for _, name := range []string{runlog.ResultsFile, runlog.AttributionFile} {
				if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
					t.Errorf("%s left behind by a run that sent nothing (stat: %v)", name, err)
				}
			}
		})
	}
}

func jsonNamesCause(t *testing.T, stdout string) {
	t.Helper()
	var rep reports.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, stdout)
	}
	if rep.Failure == nil || !strings.Contains(rep.Failure.Cause, "connection refused") {
		t.Errorf("stdout's report does not name the cause: %+v", rep.Failure)
	}
}

// A step summary that cannot be written is a warning: a FAIL stays exit 1;
// every file of the run has the same mode.
func TestUnwritableStepSummaryKeepsTheVerdict(t *testing.T) {
	t.Parallel()
	p := startPod(t, "callme-c1-0", "c1", "v1")
	f := writeScenario(t, scenario("http://"+p.addr, "  concurrency: 2\n  repetitions: 20", "  - only: {buckets: [c2]}"))
	unwritable := filepath.Join(t.TempDir(), "no-such-dir", "summary.md")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := mv.Run(t, e2etest.Cmd{Context: ctx, Env: []string{"GITHUB_STEP_SUMMARY=" + unwritable}}, "run", f)
	if r.Code != 1 {
		t.Fatalf("exit %d, want 1 (FAIL)\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "warning") || !strings.Contains(r.Stderr, "GITHUB_STEP_SUMMARY") {
		t.Errorf("stderr does not warn of the step summary: %s", r.Stderr)
	}
	// Every run file has results.bin's mode: the umask, not a private 0600.
	dir := r.Dir()
	want, err := os.Stat(filepath.Join(dir, runlog.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != want.Mode().Perm() {
			t.Errorf("%s is %v, results.bin %v", e.Name(), info.Mode().Perm(), want.Mode().Perm())
		}
	}
}
