package reports

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
)

// BatchKind names the JSON document of `run a.yaml b.yaml` (Batch).
const BatchKind = "mesh-verify-batch"

// Batch is several scenarios run in turn by one `run` (README.md,
// "Several scenarios in one run"): each has its own run directory and
// report; the batch has one exit code, its worst (exitcode.Worst).
type Batch struct {
	Kind string `json:"kind"`
	// ExitCode is the process's: the most severe of the runs'.
	ExitCode int `json:"exitCode"`
	// Outcome names ExitCode: PASS, FAIL, INCONCLUSIVE, SETUP ERROR,
	// INVALID INPUT or INTERRUPTED.
	Outcome string `json:"outcome"`
	// Runs are the scenarios that were started, in order.
	Runs []BatchRun `json:"runs"`
	// NotRun are the scenarios an interrupt kept from starting.
	NotRun []string `json:"notRun,omitempty"`
}

// BatchRun is one scenario of a batch.
type BatchRun struct {
	// Scenario is the argument it was given as: a file or a built-in name.
	Scenario string `json:"scenario"`
	ExitCode int    `json:"exitCode"`
	// RunDir is its run directory; empty when it wrote none (a scenario
	// that did not load).
	RunDir string `json:"runDir,omitempty"`
	// Error is why it has no report, when it has none.
	Error string `json:"error,omitempty"`
	// Report is its report.json, nil when it wrote none.
	Report *Report `json:"report,omitempty"`
}

// JUnitBatch writes one JUnit document with a test suite per scenario of
// the batch: each run's own suite (JUnit), a suite with one error case for
// a scenario that wrote no report, and one with a skipped case for each
// scenario not run.
func JUnitBatch(w io.Writer, b Batch) error {
	var all junitSuites
	for _, r := range b.Runs {
		if r.Report == nil {
			name := "mesh-verify/" + clean(r.Scenario, false)
			all.Suites = append(all.Suites, junitSuite{Name: name, Tests: 1, Errors: 1,
				Cases: []junitCase{{Name: "load", Classname: name, Error: &junitMessage{Message: clean(r.Error, false), Type: "error"}}}})
			continue
		}
		// Each run's suite exactly as its own junit.xml has it.
		var one bytes.Buffer
		if err := JUnit(&one, r.Report); err != nil {
			return err
		}
		var s junitSuites
		if err := xml.Unmarshal(one.Bytes(), &s); err != nil {
			return fmt.Errorf("junit of %s: %w", clean(r.Scenario, false), err)
		}
		all.Suites = append(all.Suites, s.Suites...)
	}
	for _, n := range b.NotRun {
		name := "mesh-verify/" + clean(n, false)
		all.Suites = append(all.Suites, junitSuite{Name: name, Tests: 1, Skipped: 1,
			Cases: []junitCase{{Name: "not run", Classname: name, Skipped: &junitMessage{Message: "the batch was interrupted before this scenario"}}}})
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// MarkdownBatch writes the batch's summary: the overall outcome first
// (GitHub shows a job summary's first lines), a table of the scenarios,
// then each run's own summary (Markdown).
func MarkdownBatch(w io.Writer, b Batch) error {
	var out bytes.Buffer
	fmt.Fprintf(&out, "## mesh-verify: %d scenarios — %s · exit code %d\n\n", len(b.Runs)+len(b.NotRun), b.Outcome, b.ExitCode)
	out.WriteString("| scenario | verdict | exit code | run |\n| --- | --- | --- | --- |\n")
	for _, r := range b.Runs {
		verdict, run := "", ""
		if r.Report != nil {
			verdict, run = r.Report.Verdict.String(), clean(r.Report.RunID, true)
		}
		if r.Error != "" {
			verdict = clean(r.Error, true)
		}
		fmt.Fprintf(&out, "| %s | %s | %d | %s |\n", clean(r.Scenario, true), verdict, r.ExitCode, run)
	}
	for _, n := range b.NotRun {
		fmt.Fprintf(&out, "| %s | not run (interrupted) | | |\n", clean(n, true))
	}
	for _, r := range b.Runs {
		if r.Report == nil {
			continue
		}
		out.WriteString("\n")
		if err := Markdown(&out, r.Report); err != nil {
			return err
		}
	}
	_, err := out.WriteTo(w)
	return err
}
