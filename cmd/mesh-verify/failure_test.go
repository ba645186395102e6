package main

import (
	"bytes"
	"encoding/json"
	"net"
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
