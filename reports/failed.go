package reports

import (
	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/redact"
)

// FailedRun is what a run that measured nothing knows about itself: the
// report it writes in place of a verdict, so that report.json, junit.xml,
// summary.md, the step summary and `-o json` all name the cause
// (README.md "Exit codes").
type FailedRun struct {
	Scenario ScenarioInfo
	// Target is the scenario's target URL as written: Report redacts it.
	Target  string
	RunID   string
	Tool    Tool
	Command []string
	Err     *exitcode.Error
	Phase   string
}

// Report is the failed run's report: verdict and gate INCONCLUSIVE (the
// mesh was not judged), its exit code the run's, every message redacted.
func (f FailedRun) Report() *Report {
	kind := FailureInput
	switch f.Err.Code {
	case exitcode.Setup:
		kind = FailureSetup
	case exitcode.Interrupted:
		kind = FailureInterrupted
	}
	msg := redact.Message(f.Err.Error())
	rep := &Report{
		Schema:      Schema,
		RunID:       f.RunID,
		Tool:        f.Tool,
		Command:     redact.Args(f.Command),
		Scenario:    f.Scenario,
		Target:      redact.URL(f.Target),
		Dimensions:  []Dimension{},
		Expectation: []Expectation{},
		Verdict:     assert.Inconclusive,
		Gate:        assert.Inconclusive,
		ExitCode:    f.Err.Code,
		Failure: &Failure{Kind: kind, ExitCode: f.Err.Code, Phase: f.Phase,
			Error: msg, Cause: redact.Message(RootCause(f.Err.Err))},
	}
	if kind == FailureSetup {
		rep.SetupError = msg
	}
	return rep
}

// FailureOf is the Failure of a report the runner returned with a setup
// error (nothing was answered, access to logs refused): the attack ran.
func FailureOf(rep *Report, err error) *Failure {
	if rep.SetupError == "" || rep.Failure != nil {
		return rep.Failure
	}
	return &Failure{Kind: FailureSetup, ExitCode: rep.ExitCode, Phase: PhaseAttack,
		Error: redact.Message(rep.SetupError), Cause: redact.Message(RootCause(err))}
}

// RootCause is the innermost error of err's chain (the first branch of a
// joined error): what a CI log shows as the cause.
func RootCause(err error) string {
	if err == nil {
		return ""
	}
	for {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			if es := u.Unwrap(); len(es) > 0 {
				next = es[0]
			}
		}
		if next == nil {
			return err.Error()
		}
		err = next
	}
}
