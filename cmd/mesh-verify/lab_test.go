package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// The lab commands that need no cluster: listing, bad input, no lab.
func TestLabCommandsWithoutClusters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"lab", "list"}, exitPass, "skupper-4"},
		{[]string{"lab", "up", "--dir", dir, "--topology", "nope"}, exitInvalidInput, `no built-in topology "nope"`},
		{[]string{"lab", "up", "--dir", dir, "--topology", "missing.yaml"}, exitInvalidInput, "read topology"},
		{[]string{"lab", "env", "--dir", dir}, exitSetup, "no lab in " + dir},
		{[]string{"lab", "status", "--dir", dir}, exitSetup, "no lab in " + dir},
		{[]string{"lab", "down", "--dir", dir}, exitPass, "no lab in " + dir},
		{[]string{"lab", "serve"}, exitInvalidInput, "needs --dir"},
	} {
		var out, errb bytes.Buffer
		code := execute(c.args, &out, &errb)
		if code != c.code || !strings.Contains(out.String()+errb.String(), c.want) {
			t.Errorf("%v: exit %d, output %q %q; want exit %d and %q", c.args, code, out.String(), errb.String(), c.code, c.want)
		}
	}
}
