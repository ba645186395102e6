package cliout

import (
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/exitcode"
)

// TestCheck: an allowed value passes; any other is bad input naming the
// flag, the value and every allowed value.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value   string
		allowed []string
		want    string // "" for no error
	}{
		{"json", []string{Table, JSON}, ""},
		{"xml", []string{JSON}, `--output "xml": want json`},
		{"xml", []string{Table, JSON}, `--output "xml": want table or json`},
		{"", []string{Table, JSON, YAML}, `--output "": want table, json or yaml`},
	} {
		t.Run(tc.value+"/"+strings.Join(tc.allowed, ","), func(t *testing.T) {
			t.Parallel()
			err := Check(tc.value, tc.allowed)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Check(%q) = %v, want nil", tc.value, err)
			case tc.want != "" && (err == nil || err.Error() != tc.want || exitcode.Of(err, -1) != exitcode.InvalidInput):
				t.Errorf("Check(%q) = %v (exit %d), want %q (exit %d)", tc.value, err, exitcode.Of(err, -1), tc.want, exitcode.InvalidInput)
			}
		})
	}
}
