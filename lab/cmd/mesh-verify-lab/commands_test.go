package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/exitcode"
)

// The lab commands that need no cluster: listing, bad input, no lab.
func TestLabCommandsWithoutClusters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"list"}, exitcode.Pass, "skupper-4"},
		{[]string{"up", "--dir", dir, "--topology", "nope"}, exitcode.InvalidInput, `no built-in topology "nope"`},
		{[]string{"up", "--dir", dir, "--topology", "missing.yaml"}, exitcode.InvalidInput, "read topology"},
		{[]string{"env", "--dir", dir}, exitcode.Setup, "no lab in " + dir},
		{[]string{"status", "--dir", dir}, exitcode.Setup, "no lab in " + dir},
		{[]string{"down", "--dir", dir}, exitcode.Pass, "no lab in " + dir},
		{[]string{"serve"}, exitcode.InvalidInput, "needs --dir"},
		{[]string{"up", "--dir", dir, "--seed", "-3"}, exitcode.InvalidInput, `invalid argument "-3" for "--seed"`},
	} {
		var out, errb bytes.Buffer
		code := execute(c.args, &out, &errb)
		if code != c.code || !strings.Contains(out.String()+errb.String(), c.want) {
			t.Errorf("%v: exit %d, output %q %q; want exit %d and %q", c.args, code, out.String(), errb.String(), c.code, c.want)
		}
	}
}

// lab env exports the kubeconfig and kubectl's cache directory, both in
// the lab; --kubeconfig prints only the path.
func TestLabEnv(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my lab")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(filepath.Join(dir, "lab.json"), []byte(`{"kubeconfig": "`+kc+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := execute([]string{"env", "--dir", dir}, &out, &errb); code != exitcode.Pass {
		t.Fatalf("lab env: exit %d: %s", code, errb.String())
	}
	want := "export KUBECONFIG='" + kc + "'\nexport KUBECACHEDIR='" + filepath.Join(dir, "kubecache") + "'\n"
	if out.String() != want {
		t.Errorf("lab env printed %q, want %q", out.String(), want)
	}
	out.Reset()
	if code := execute([]string{"env", "--dir", dir, "--kubeconfig"}, &out, &errb); code != exitcode.Pass || out.String() != kc+"\n" {
		t.Errorf("lab env --kubeconfig: exit %d, %q; want %q", code, out.String(), kc)
	}
}
