package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// The report of a run that judged nothing names the kind, phase, error
// and cause, redacted, and its JUnit is one error case.
func TestFailedRunReport(t *testing.T) {
	t.Parallel()
	sc := &scenarios.Scenario{}
	sc.Metadata.Name = "down"
	sc.Target.URL = "http://u:pw0rdX@h/?token=t0kX"
	for _, tc := range []struct {
		name        string
		err         *codedError
		kind, cause string
		setupError  bool
	}{
		{"input", &codedError{code: exitInvalidInput, err: fmt.Errorf("target.tls.ca: %w", fs.ErrNotExist)}, reports.FailureInput, "file does not exist", false},
		{"setup", &codedError{code: exitSetup, err: fmt.Errorf(`cannot reach target: Get "http://u:pw0rdX@h/?token=t0kX": %w`, errors.Join(errors.New("connection refused"), errors.New("second")))}, reports.FailureSetup, "connection refused", true},
		{"interrupted", &codedError{code: exitInterrupted, err: errors.New("interrupted before the attack")}, reports.FailureInterrupted, "interrupted before the attack", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := failedRun{sc: sc, runID: "r", err: tc.err, phase: reports.PhasePrepare}.report()
			f := rep.Failure
			if f == nil || f.Kind != tc.kind || f.Cause != tc.cause || f.Phase != reports.PhasePrepare || f.ExitCode != tc.err.code ||
				rep.ExitCode != tc.err.code || rep.Gate != assert.Inconclusive || (rep.SetupError != "") != tc.setupError {
				t.Fatalf("report: exit %d, gate %s, setupError %q, failure %+v", rep.ExitCode, rep.Gate, rep.SetupError, f)
			}
			var b bytes.Buffer
			if err := reports.WriteJSON(&b, rep); err != nil {
				t.Fatal(err)
			}
			if err := reports.JUnit(&b, rep); err != nil {
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
