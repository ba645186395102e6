package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mesh-verify/mesh-verify/redact"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/runlog"
)

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
	appendStepSummaryOf(w, func(f io.Writer) error { return reports.Markdown(f, rep) })
}

// appendStepSummaryOf appends what render writes (a run's summary.md, or a
// batch's) to GitHub Actions' job summary, as appendStepSummary.
func appendStepSummaryOf(w io.Writer, render func(io.Writer) error) {
	path := os.Getenv("GITHUB_STEP_SUMMARY")
	if path == "" {
		return
	}
	if err := writeStepSummary(path, render); err != nil {
		fmt.Fprintf(w, "mesh-verify: warning: %v (the run's exit code is unchanged)\n", err)
	}
}

func writeStepSummary(path string, render func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("append to $GITHUB_STEP_SUMMARY: %w", err)
	}
	if err := render(f); err != nil {
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
