package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/redact"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/runlog"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// failedRun is what a run that measured nothing knows about itself: the
// report it writes in place of a verdict, so that report.json, junit.xml,
// summary.md, the step summary and `-o json` all name the cause
// (README.md "Exit codes").
type failedRun struct {
	sc      *scenarios.Scenario
	runID   string
	tool    reports.Tool
	command []string
	err     *exitcode.Error
	phase   string
}

// report is the failed run's report: verdict and gate INCONCLUSIVE (the
// mesh was not judged), its exit code the run's, every message redacted.
func (f failedRun) report() *reports.Report {
	kind := reports.FailureInput
	switch f.err.Code {
	case exitcode.Setup:
		kind = reports.FailureSetup
	case exitcode.Interrupted:
		kind = reports.FailureInterrupted
	}
	msg := redact.Message(f.err.Error())
	rep := &reports.Report{
		Schema:      reports.Schema,
		RunID:       f.runID,
		Tool:        f.tool,
		Command:     redact.Args(f.command),
		Scenario:    reports.ScenarioInfo{Name: f.sc.Metadata.Name, File: f.sc.File, Description: f.sc.Metadata.Description},
		Target:      redact.URL(f.sc.Target.URL),
		Dimensions:  []reports.Dimension{},
		Expectation: []reports.Expectation{},
		Verdict:     assert.Inconclusive,
		Gate:        assert.Inconclusive,
		ExitCode:    f.err.Code,
		Failure: &reports.Failure{Kind: kind, ExitCode: f.err.Code, Phase: f.phase,
			Error: msg, Cause: redact.Message(rootCause(f.err.Err))},
	}
	if kind == reports.FailureSetup {
		rep.SetupError = msg
	}
	return rep
}

// failureOf is the Failure of a report the runner returned with a setup
// error (nothing was answered, access to logs refused): the attack ran.
func failureOf(rep *reports.Report, err error) *reports.Failure {
	if rep.SetupError == "" || rep.Failure != nil {
		return rep.Failure
	}
	return &reports.Failure{Kind: reports.FailureSetup, ExitCode: rep.ExitCode, Phase: reports.PhaseAttack,
		Error: redact.Message(rep.SetupError), Cause: redact.Message(rootCause(err))}
}

// rootCause is the innermost error of err's chain (the first branch of a
// joined error): what a CI log shows as the cause.
func rootCause(err error) string {
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

// dropEmptyRecords removes the results.bin and attribution.jsonl a run
// that sent no request left empty: an empty results.bin beside a report
// would read as a run of no results. It says what it removed, for the
// report's warnings.
func dropEmptyRecords(dir string) []string {
	var notes []string
	for _, name := range []string{runlog.ResultsFile, runlog.AttributionFile} {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil || st.Size() > 0 || !st.Mode().IsRegular() {
			continue
		}
		if err := os.Remove(p); err != nil {
			notes = append(notes, fmt.Sprintf("%s is empty (no request was sent) and could not be removed: %v", name, err))
		}
	}
	return notes
}

// appendStepSummary appends summary.md to GitHub Actions' job summary
// when the run is a step of a workflow. A summary that cannot be written
// is a warning on w, never the run's exit code: a FAIL stays a FAIL.
func appendStepSummary(w io.Writer, rep *reports.Report) {
	path := os.Getenv("GITHUB_STEP_SUMMARY")
	if path == "" {
		return
	}
	if err := writeStepSummary(path, rep); err != nil {
		fmt.Fprintf(w, "mesh-verify: warning: %v (the run's exit code is unchanged)\n", err)
	}
}

func writeStepSummary(path string, rep *reports.Report) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("append to $GITHUB_STEP_SUMMARY: %w", err)
	}
	if err := reports.Markdown(f, rep); err != nil {
		f.Close()
		return fmt.Errorf("append to $GITHUB_STEP_SUMMARY %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("append to $GITHUB_STEP_SUMMARY %s: %w", path, err)
	}
	return nil
}

// redactReport is rep with every string in it (messages, samples of
// responses, log lines, map keys) passed through redact.Message: errors
// quote URLs verbatim, malformed ones included, and an echo server's body
// may hold the request's URL with its token.
func redactReport(rep *reports.Report) (*reports.Report, error) {
	out, err := reports.MapStrings(rep, redact.Message)
	if err != nil {
		return nil, fmt.Errorf("redact the report: %w", err)
	}
	return out, nil
}
