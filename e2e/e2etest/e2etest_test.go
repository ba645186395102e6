package e2etest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/reports"
)

// Exec runs real processes: the exit code, both streams, the environment
// and the working directory are what the command saw and did.
func TestExec(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name           string
		cmd            Cmd
		script         string
		code           int
		stdout, stderr string
	}{
		{"exit code and streams", Cmd{}, "echo out; echo err >&2; exit 3", 3, "out\n", "err\n"},
		{"added environment", Cmd{Env: []string{"E2E_X=1"}}, `echo "$E2E_X"`, 0, "1\n", ""},
		{"clean environment", Cmd{CleanEnv: true, Env: []string{"E2E_Y=2"}}, `echo "${HOME:-none} $E2E_Y"`, 0, "none 2\n", ""},
		{"working directory and stdin", Cmd{Dir: dir, Stdin: []byte("in")}, `cat; pwd`, 0, "in" + dir + "\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.cmd.Exec(t, "/bin/sh", "-c", c.script)
			if r.Code != c.code || r.Stdout != c.stdout || r.Stderr != c.stderr {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", r.Code, r.Stdout, r.Stderr, c.code, c.stdout, c.stderr)
			}
		})
	}
	t.Run("deadline", func(t *testing.T) {
		began := time.Now()
		r := Cmd{Timeout: 5 * time.Second}.Exec(t, "/bin/sh", "-c", "sleep 0.2; exit 0")
		if r.Code != 0 || r.Took < 200*time.Millisecond || time.Since(began) > 5*time.Second {
			t.Errorf("exit %d after %s", r.Code, r.Took)
		}
	})
}

// Report is the only report, or with --converge the last attempt's (the
// one listing the most attempts); Dir is its run directory.
func TestResultReport(t *testing.T) {
	out := t.TempDir()
	one := &reports.Report{RunID: "a"}
	two := &reports.Report{RunID: "b", Converge: &reports.Converge{Attempts: make([]reports.Attempt, 1)}}
	three := &reports.Report{RunID: "c", Converge: &reports.Converge{Attempts: make([]reports.Attempt, 2)}}
	for _, c := range []struct {
		name string
		reps map[string]*reports.Report
		want *reports.Report
	}{
		{"none", nil, nil},
		{"one", map[string]*reports.Report{"a": one}, one},
		{"converge", map[string]*reports.Report{"b": two, "c": three}, three},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Result{Out: out, Reports: c.reps}
			if got := r.Report(); got != c.want {
				t.Fatalf("report %+v, want %+v", got, c.want)
			}
			wantDir := ""
			if c.want != nil {
				wantDir = filepath.Join(out, c.want.RunID)
			}
			if got := r.Dir(); got != wantDir {
				t.Errorf("dir %q, want %q", got, wantDir)
			}
		})
	}
}

// ReadReports reads report.json one directory down and nothing else.
func TestReadReports(t *testing.T) {
	out := t.TempDir()
	if err := os.MkdirAll(filepath.Join(out, "run-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "run-1", "notes.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := ReadReports(t, out); len(got) != 0 {
		t.Fatalf("read %d reports from a directory without report.json", len(got))
	}
	if p := WriteFile(t, "s.yaml", "a: 1\n"); !strings.HasSuffix(p, "s.yaml") {
		t.Errorf("WriteFile wrote %s", p)
	} else if b, err := os.ReadFile(p); err != nil || string(b) != "a: 1\n" {
		t.Errorf("WriteFile: %q, %v", b, err)
	}
}
