package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// schema prints the embedded schemas byte for byte; an unknown or missing
// name is invalid input.
func TestSchemaCommand(t *testing.T) {
	for name, want := range map[string][]byte{"report": reports.JSONSchema(), "scenario": scenarios.JSONSchema()} {
		var out, errb bytes.Buffer
		if code := execute([]string{"schema", name}, &out, &errb); code != exitcode.Pass {
			t.Fatalf("schema %s: exit %d: %s", name, code, errb.String())
		}
		if !bytes.Equal(out.Bytes(), want) || !json.Valid(out.Bytes()) {
			t.Errorf("schema %s printed %d bytes, want the %d of the embedded schema", name, out.Len(), len(want))
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"schema", "reports"}, `no schema "reports": want report or scenario`},
		{[]string{"schema"}, "accepts 1 arg(s), received 0"},
	} {
		var out, errb bytes.Buffer
		code := execute(c.args, &out, &errb)
		if code != exitcode.InvalidInput || !strings.Contains(errb.String(), c.want) || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out.String(), errb.String(), exitcode.InvalidInput, c.want)
		}
	}
}
