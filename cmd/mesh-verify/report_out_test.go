package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/runlog"
)

// check --file prints bucket names from a counts file, and a weight name
// from --weights, escaped: no raw ESC or BEL reaches the terminal.
func TestCheckEscapesBucketNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	counts := writeFile(t, dir, "counts.json", `{"c2\u001b]0;owned\u0007": 480, "c3\u001b[2J": 520}`)
	var stdout, stderr bytes.Buffer
	code := execute([]string{"check", "--file", counts, "--weights", "c2\x1b]0;owned\x07=1,c3\x1b[2J=1"}, &stdout, &stderr)
	if code == exitcode.InvalidInput {
		t.Fatalf("exit 4: %s", stderr.String())
	}
	for name, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("%s carries a raw control byte: %q", name, out)
		}
	}
	if !strings.Contains(stdout.String(), `c2\u001b]0;owned\u0007`) {
		t.Errorf("the bucket name is not shown escaped:\n%s", stdout.String())
	}
}

// report --format plot of a run whose results.bin is cut short prints
// nothing and exits 4 naming the file; alone or with other formats.
func TestReportPlotOfTruncatedResults(t *testing.T) {
	t.Parallel()
	run := runScenarioTo(t, splitServer(t, 5, 10), t.TempDir())
	results := filepath.Join(run, runlog.ResultsFile)
	st, err := os.Stat(results)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(results, st.Size()-7); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"report", run, "--format", "plot"},
		{"report", run, "--format", "plot,json", "--out", t.TempDir()},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(args, &stdout, &stderr)
		if code != exitcode.InvalidInput || !strings.Contains(stderr.String(), runlog.ResultsFile) || !strings.Contains(stderr.String(), "cut") {
			t.Errorf("%q: exit %d, want 4 naming results.bin\n%s", args, code, stderr.String())
		}
		if args[3] == "plot" && stdout.Len() > 0 {
			t.Errorf("%q printed %d bytes before the error", args, stdout.Len())
		}
	}
}
