package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/internal/cliout"
	"github.com/mesh-verify/mesh-verify/redact"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/runner"
)

// Files of a batch's directory, <--out>/batch-<id>/ (README.md, "Several
// scenarios in one run").
const (
	batchJUnitFile   = "junit.xml"
	batchSummaryFile = "summary.md"
	batchJSONFile    = "batch.json"
)

// expandScenarios turns run's arguments into the scenarios to run: a
// directory stands for every .yaml/.yml file directly in it, sorted by
// name (hidden files left out); anything else (a file, a built-in name)
// is itself.
func expandScenarios(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil || !st.IsDir() {
			out = append(out, a)
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, exitcode.InvalidInputf("scenario directory %s: %w", a, err)
		}
		var files []string
		for _, e := range entries {
			n := e.Name()
			if strings.HasPrefix(n, ".") || !e.Type().IsRegular() && e.Type()&os.ModeSymlink == 0 {
				continue
			}
			if strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") {
				files = append(files, filepath.Join(a, n))
			}
		}
		if len(files) == 0 {
			return nil, exitcode.InvalidInputf("scenario directory %s: no .yaml or .yml file in it", a)
		}
		slices.Sort(files)
		out = append(out, files...)
	}
	return out, nil
}

// batchRecorder collects the runs of a batch as runScenario finishes
// them; nil for a single scenario.
type batchRecorder struct {
	// cur is the run of the scenario in progress: with --converge the
	// last attempt's replaces the earlier ones'.
	cur *reports.BatchRun
}

// ran is called by runScenario with each run it wrote.
func (b *batchRecorder) ran(dir string, rep *reports.Report) {
	if b == nil || b.cur == nil {
		return
	}
	b.cur.RunDir, b.cur.Report = dir, rep
}

// oneDocument is true when stdout carries one document for the whole
// batch (-o json or md), so that runs print none of their own.
func (f runFlags) oneDocument() bool {
	return f.batch != nil && f.output != outputTable
}

// runBatch runs several scenarios in turn, each as `run FILE` would (its
// own run directory, --converge per scenario, --set and every other flag
// applied to each), then writes the batch's junit.xml (a test suite per
// scenario), summary.md and batch.json into <--out>/batch-<id>/, appends
// the summary to $GITHUB_STEP_SUMMARY, and exits with the worst code
// (exitcode.Worst). Ctrl-C stops the run in progress as it stops one run;
// no further scenario starts, and the batch's files are still written.
func runBatch(cmd *cobra.Command, files []string, f runFlags) error {
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal the run's own handling (interrupts) is
		// the only one, so a third Ctrl-C still kills the process.
		<-ctx.Done()
		stop()
	}()
	cmd.SetContext(ctx)
	rec := &batchRecorder{}
	f.batch = rec
	errw := cmd.ErrOrStderr()
	b := reports.Batch{Kind: reports.BatchKind}
	for i, file := range files {
		if ctx.Err() != nil {
			b.NotRun = files[i:]
			break
		}
		fmt.Fprintf(errw, "mesh-verify: scenario %d of %d: %s\n", i+1, len(files), file)
		b.Runs = append(b.Runs, reports.BatchRun{Scenario: file})
		rec.cur = &b.Runs[len(b.Runs)-1]
		err := runGate(cmd, file, f)
		rec.cur.ExitCode = exitcode.Of(err, exitcode.Pass)
		if err != nil && rec.cur.Report == nil {
			// No run directory: the scenario did not load, or its run
			// ended before writing (a --converge gate's first attempt).
			msg := redact.Message(err.Error())
			rec.cur.Error = msg
			if msg != "" {
				fmt.Fprintf(errw, "mesh-verify: %s\n", msg)
			}
		}
		rec.cur = nil
		if b.Runs[len(b.Runs)-1].ExitCode == exitcode.Interrupted {
			b.NotRun = files[i+1:]
			break
		}
	}
	codes := make([]int, 0, len(b.Runs)+1)
	for _, r := range b.Runs {
		codes = append(codes, r.ExitCode)
	}
	if len(b.NotRun) > 0 {
		codes = append(codes, exitcode.Interrupted)
	}
	b.ExitCode = exitcode.Worst(codes...)
	b.Outcome = exitcode.Name(b.ExitCode)
	return finishBatch(cmd, f, b)
}

// finishBatch writes the batch's files and its one summary and document.
func finishBatch(cmd *cobra.Command, f runFlags, b reports.Batch) error {
	dir := filepath.Join(f.out, "batch-"+runner.NewRunID(time.Now()))
	var paths []string
	var werr error
	for _, out := range []struct {
		name   string
		render func(io.Writer) error
	}{
		{batchJUnitFile, func(w io.Writer) error { return reports.JUnitBatch(w, b) }},
		{batchSummaryFile, func(w io.Writer) error { return reports.MarkdownBatch(w, b) }},
		{batchJSONFile, func(w io.Writer) error { return cliout.WriteJSON(w, b) }},
	} {
		p, err := reports.WriteFile(dir, out.name, out.render)
		if err != nil {
			werr = errors.Join(werr, err)
			continue
		}
		paths = append(paths, p)
	}
	if f.junit != "" {
		if p, err := writeJUnitAt(f.junit, func(w io.Writer) error { return reports.JUnitBatch(w, b) }); err != nil {
			werr = errors.Join(werr, err)
		} else {
			paths = append(paths, p)
		}
	}
	appendStepSummaryOf(cmd.ErrOrStderr(), func(w io.Writer) error { return reports.MarkdownBatch(w, b) })
	stdout, info := cmd.OutOrStdout(), cmd.OutOrStdout()
	var err error
	switch f.output {
	case outputJSON:
		info = cmd.ErrOrStderr()
		err = cliout.WriteJSON(stdout, b)
	case outputMD:
		info = cmd.ErrOrStderr()
		err = reports.MarkdownBatch(stdout, b)
	default:
		err = batchTable(stdout, b)
	}
	if err != nil {
		return &exitcode.Error{Code: exitcode.Setup, Err: fmt.Errorf("print the batch's outcome: %w", err)}
	}
	for _, p := range paths {
		fmt.Fprintf(info, "wrote %s\n", p)
	}
	if werr != nil {
		// The runs' own files are written; the batch's are missing, which
		// is an infrastructure fault, not a verdict.
		return &exitcode.Error{Code: exitcode.Worst(b.ExitCode, exitcode.Setup), Err: werr}
	}
	return exitcode.Wrap(b.ExitCode, nil)
}

// batchTable is the batch's outcome for the terminal: the overall outcome
// first, then one line per scenario.
func batchTable(w io.Writer, b reports.Batch) error {
	fmt.Fprintf(w, "\nmesh-verify: %d scenarios: %s (exit code %d)\n", len(b.Runs)+len(b.NotRun), b.Outcome, b.ExitCode)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tVERDICT\tEXIT\tRUN DIRECTORY")
	for _, r := range b.Runs {
		// A run that ended in a setup error has a verdict of what it
		// measured (INCONCLUSIVE); its exit code's name says more.
		verdict := exitcode.Name(r.ExitCode)
		if r.Report != nil && r.ExitCode <= exitcode.Inconclusive {
			verdict = r.Report.Verdict.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", reports.Printable(r.Scenario), verdict, r.ExitCode, reports.Printable(r.RunDir))
	}
	for _, n := range b.NotRun {
		fmt.Fprintf(tw, "%s\tnot run (interrupted)\t\t\n", reports.Printable(n))
	}
	return tw.Flush()
}

// checkJUnitPath refuses a --junit that cannot name a file: empty, or an
// existing directory. Its parent directories are created when written.
func checkJUnitPath(cmd *cobra.Command, path string) error {
	if !cmd.Flags().Changed("junit") {
		return nil
	}
	if path == "" {
		return exitcode.InvalidInputf("--junit: want a file path, like reports/junit.xml")
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return exitcode.InvalidInputf("--junit %s: a directory; want a file path, like %s", path, filepath.Join(path, batchJUnitFile))
	}
	return nil
}

// writeJUnitAt writes a junit.xml to --junit's path, atomically, as the
// run directory's files are written.
func writeJUnitAt(path string, render func(io.Writer) error) (string, error) {
	p, err := reports.WriteFile(filepath.Dir(path), filepath.Base(path), render)
	if err != nil {
		return "", fmt.Errorf("--junit: %w", err)
	}
	return p, nil
}
