package reports

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
)

// The report of a run that judged nothing names the kind, phase, error
// and cause, redacted, and its JUnit is one error case.
func TestFailedRunReport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		err         *exitcode.Error
		kind, cause string
		setupError  bool
	}{
		{"input", &exitcode.Error{Code: exitcode.InvalidInput, Err: fmt.Errorf("target.tls.ca: %w", fs.ErrNotExist)}, FailureInput, "file does not exist", false},
		{"setup", &exitcode.Error{Code: exitcode.Setup, Err: fmt.Errorf(`cannot reach target: Get "http://u:pw0rdX@h/?token=t0kX": %w`, errors.Join(errors.New("connection refused"), errors.New("second")))}, FailureSetup, "connection refused", true},
		{"interrupted", &exitcode.Error{Code: exitcode.Interrupted, Err: errors.New("interrupted before the attack")}, FailureInterrupted, "interrupted before the attack", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := FailedRun{Scenario: ScenarioInfo{Name: "down"}, Target: "http://u:pw0rdX@h/?token=t0kX", RunID: "r", Err: tc.err, Phase: PhasePrepare}.Report()
			f := rep.Failure
			if f == nil || f.Kind != tc.kind || f.Cause != tc.cause || f.Phase != PhasePrepare || f.ExitCode != tc.err.Code ||
				rep.ExitCode != tc.err.Code || rep.Gate != assert.Inconclusive || (rep.SetupError != "") != tc.setupError {
				t.Fatalf("report: exit %d, gate %s, setupError %q, failure %+v", rep.ExitCode, rep.Gate, rep.SetupError, f)
			}
			var b bytes.Buffer
			if err := WriteJSON(&b, rep); err != nil {
				t.Fatal(err)
			}
			if err := JUnit(&b, rep); err != nil {
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
