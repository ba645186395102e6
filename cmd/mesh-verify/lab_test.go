package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/exitcode"
)

// `mesh-verify lab ARGS` is mesh-verify-lab ARGS: its output and exit
// code, whether this process is replaced (the binary) or runs it as a
// child (in-process, with other streams than its own).
func TestLabRunsTheLabProgram(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"lab", "list"}, exitcode.Pass, "skupper-4"},
		{[]string{"lab", "--help"}, exitcode.Pass, "mesh-verify-lab [command]"},
		{[]string{"lab", "up", "--dir", dir, "--topology", "nope"}, exitcode.InvalidInput, `no built-in topology "nope"`},
		{[]string{"lab", "status", "--dir", dir}, exitcode.Setup, "no lab in " + dir},
		{[]string{"lab", "down", "--dir", dir}, exitcode.Pass, "no lab in " + dir},
		{[]string{"lab", "nope"}, exitcode.InvalidInput, `unknown command "nope"`},
	} {
		var out, errb bytes.Buffer
		code := execute(c.args, &out, &errb)
		if code != c.code || !strings.Contains(out.String()+errb.String(), c.want) {
			t.Errorf("in process %v: exit %d, output %q %q; want exit %d and %q", c.args, code, out.String(), errb.String(), c.code, c.want)
		}
		cmd := exec.Command(binary, c.args...)
		got, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%v: %v", c.args, err)
		}
		if code := cmd.ProcessState.ExitCode(); code != c.code || !strings.Contains(string(got), c.want) {
			t.Errorf("mesh-verify %v: exit %d, output %q; want exit %d and %q", c.args, code, got, c.code, c.want)
		}
	}
}

// Without mesh-verify-lab beside it or on PATH, `mesh-verify lab` says
// what to build, and ends as a setup error.
func TestLabWithoutTheLabProgram(t *testing.T) {
	alone := filepath.Join(t.TempDir(), "mesh-verify")
	if err := os.Link(binary, alone); err != nil {
		t.Skipf("hard link of the binary: %v", err)
	}
	cmd := exec.Command(alone, "lab", "list")
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
	out, _ := cmd.CombinedOutput()
	want := "find mesh-verify-lab: none in " + filepath.Dir(alone) + " nor on PATH (make build builds it into bin/"
	if code := cmd.ProcessState.ExitCode(); code != exitcode.Setup || !strings.Contains(string(out), want) {
		t.Errorf("mesh-verify lab list without the lab: exit %d, %q; want exit %d and %q", code, out, exitcode.Setup, want)
	}
}
