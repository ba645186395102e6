package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/reports"
)

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
