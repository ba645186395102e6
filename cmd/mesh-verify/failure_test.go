package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// The report of a run that judged nothing names the kind, phase, error
// and cause, redacted, and its JUnit is one error case.
func TestFailedRunReport(t *testing.T) {
	t.Parallel()
	sc := &scenarios.Scenario{}
	sc.Metadata.Name = "down"
	sc.Target.URL = "http://u:pw0rdX@h/?token=t0kX"
	for _, tc := range []struct {
		name        string
		err         *exitcode.Error
		kind, cause string
		setupError  bool
	}{
		{"input", &exitcode.Error{Code: exitcode.InvalidInput, Err: fmt.Errorf("target.tls.ca: %w", fs.ErrNotExist)}, reports.FailureInput, "file does not exist", false},
		{"setup", &exitcode.Error{Code: exitcode.Setup, Err: fmt.Errorf(`cannot reach target: Get "http://u:pw0rdX@h/?token=t0kX": %w`, errors.Join(errors.New("connection refused"), errors.New("second")))}, reports.FailureSetup, "connection refused", true},
		{"interrupted", &exitcode.Error{Code: exitcode.Interrupted, Err: errors.New("interrupted before the attack")}, reports.FailureInterrupted, "interrupted before the attack", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := failedRun{sc: sc, runID: "r", err: tc.err, phase: reports.PhasePrepare}.report()
			f := rep.Failure
			if f == nil || f.Kind != tc.kind || f.Cause != tc.cause || f.Phase != reports.PhasePrepare || f.ExitCode != tc.err.Code ||
				rep.ExitCode != tc.err.Code || rep.Gate != assert.Inconclusive || (rep.SetupError != "") != tc.setupError {
				t.Fatalf("report: exit %d, gate %s, setupError %q, failure %+v", rep.ExitCode, rep.Gate, rep.SetupError, f)
			}
			var b bytes.Buffer
			if err := reports.WriteJSON(&b, rep); err != nil {
				t.Fatal(err)
			}
			if err := reports.JUnit(&b, rep); err != nil {
				t.Fatal(err)
			}
			if out := b.String(); strings.Contains(out, "pw0rdX") || strings.Contains(out, "t0kX") {
				t.Errorf("a credential reached the report:\n%s", out)
			}
			if !strings.Contains(b.String(), `<testcase name="`+tc.kind+`"`) || !strings.Contains(b.String(), `errors="1"`) {
				t.Errorf("junit.xml has no %s error case:\n%s", tc.kind, b.String())
			}
		})
	}
}

// A --metrics-listen address already taken is a setup error found after
// the run directory exists: the run writes its report naming it.
func TestMetricsListenTakenWritesTheReport(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	dir := t.TempDir()
	out := filepath.Join(dir, "runs")
	var stdout, stderr bytes.Buffer
	code := execute([]string{"run", convergeScenario(t, dir, "http://"+ln.Addr().String()+"/"), "--out", out, "--quiet", "-o", "json",
		"--metrics-listen", ln.Addr().String()}, &stdout, &stderr)
	if code != exitcode.Setup {
		t.Fatalf("exit %d, want 3\n%s", code, stderr.String())
	}
	var rep reports.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || rep.Failure == nil || !strings.Contains(rep.Failure.Error, "--metrics-listen") {
		t.Fatalf("stdout is not a report naming --metrics-listen (%v):\n%s", err, stdout.String())
	}
	for _, name := range []string{"report.json", "junit.xml", "summary.md"} {
		if m, _ := filepath.Glob(filepath.Join(out, "*", name)); len(m) != 1 {
			t.Errorf("%s not written: %v", name, m)
		}
	}
}

// Issue 22, done when: a run whose target cannot be reached leaves
// report.json, junit.xml and summary.md that name the cause, -o json (and
// the deprecated --json, whose notice goes to stderr) prints the report
// alone on stdout, so `run --json 2>/dev/null | jq .` parses, and no
// results.bin is left empty.
func TestUnreachableTargetWritesOutputs(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a port nothing listens on: connection refused
	for _, flags := range [][]string{{"-o", "json"}, {"--json"}} {
		t.Run(flags[len(flags)-1], func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			out := filepath.Join(dir, "runs")
			var stdout, stderr bytes.Buffer
			args := append([]string{"run", convergeScenario(t, dir, "http://"+addr+"/"), "--out", out}, flags...)
			if code := execute(args, &stdout, &stderr); code != exitcode.Setup {
				t.Fatalf("exit %d, want %d\n%s", code, exitcode.Setup, stderr.String())
			}
			dec := json.NewDecoder(&stdout)
			var rep reports.Report
			if err := dec.Decode(&rep); err != nil || dec.More() {
				t.Fatalf("stdout is not one JSON document (%v, more %v); stderr:\n%s", err, dec.More(), stderr.String())
			}
			if rep.Failure == nil || rep.Failure.Kind != reports.FailureSetup || !strings.Contains(rep.Failure.Cause, "connection refused") {
				t.Fatalf("stdout's report has failure %+v, want a setup error caused by connection refused", rep.Failure)
			}
			for _, name := range []string{"report.json", "junit.xml", "summary.md"} {
				m, _ := filepath.Glob(filepath.Join(out, "*", name))
				if len(m) != 1 {
					t.Fatalf("%s not written: %v", name, m)
				}
				b, err := os.ReadFile(m[0])
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(b), "connection refused") || !strings.Contains(string(b), addr) {
					t.Errorf("%s does not name the cause and the target:\n%s", name, b)
				}
			}
			if m, _ := filepath.Glob(filepath.Join(out, "*", "results.bin")); len(m) != 0 {
				t.Errorf("a run that measured nothing left %v", m)
			}
		})
	}
}
