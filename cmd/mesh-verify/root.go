package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/internal/cliout"
	"github.com/mesh-verify/mesh-verify/measure"
	"github.com/mesh-verify/mesh-verify/metricsout"
	"github.com/mesh-verify/mesh-verify/redact"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/runlog"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// version is stamped by the Makefile with -ldflags.
var version = "dev"

func execute(args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:   "mesh-verify",
		Short: "Check where a multi-cluster service mesh really sends traffic",
		Long: `mesh-verify attacks the entry point of a service mesh, works out which cluster,
pod and version served every request, and judges the observed split against the
expected one with sound statistics. Exit codes: 0 pass, 1 an expectation failed,
2 inconclusive, 3 setup error, 4 invalid input, 130 interrupted.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRunCmd(args), newValidateCmd(), newReportCmd(), newPlanCmd(), newCheckCmd(), newPortForwardCmd(), newLabCmd(), newSchemaCmd(), newScenariosCmd(), newVersionCmd(), newRBACCmd(), newWorkerCmd())
	registerCompletions(root)

	err := root.Execute()
	if err == nil {
		return exitcode.Pass
	}
	code := exitcode.Of(err, exitcode.InvalidInput) // the default: cobra's own errors (unknown flag, wrong args)
	if msg := err.Error(); msg != "" {
		// Errors may quote input verbatim (a malformed URL, a YAML
		// value): redacted like everything else shown.
		fmt.Fprintln(stderr, "mesh-verify:", redact.Message(msg))
	}
	return code
}

// validateDoc is validate's -o json document: every file given, in order.
type validateDoc struct {
	Files []validatedFile `json:"files"`
	// Invalid counts the files that are not valid scenarios.
	Invalid int `json:"invalid"`
}

type validatedFile struct {
	File string `json:"file"`
	// Scenario is its metadata.name, when it loaded.
	Scenario string   `json:"scenario,omitempty"`
	Valid    bool     `json:"valid"`
	Error    string   `json:"error,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// MeshWarning is why the expected splits were not read from the mesh
	// (with --kubeconfig).
	MeshWarning string `json:"meshWarning,omitempty"`
	// WorkerClusters are the scenario clusters its worker pods attack
	// from (attack.sources, or attack.from with attack.workers), in
	// order: where `mesh-verify rbac FILE --cluster NAME` must be applied
	// before a run. Scripts read them here instead of the YAML.
	WorkerClusters []string `json:"workerClusters,omitempty"`
}

func newValidateCmd() *cobra.Command {
	var set []string
	var kf kubeFlags
	var output string
	cmd := &cobra.Command{
		Use:   "validate FILE|DIR...",
		Short: "Check scenario files without running them",
		Long: `validate checks scenario files without running them. With --kubeconfig it
also reads the expected splits a scenario takes from the mesh's objects
(split.fromMesh) and prints them with the objects' resourceVersions; a
cluster it cannot reach or an object it cannot read is a warning. A
directory stands for every .yaml/.yml file in it, sorted, as for run. -o json
prints one object: every file with its verdict, error and warnings (what the
mesh read prints goes to stderr then).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cliout.Check(output, []string{outputTable, outputJSON}); err != nil {
				return err
			}
			// A directory stands for its scenario files, as for run.
			args, err := expandScenarios(args)
			if err != nil {
				return err
			}
			asJSON := output == outputJSON
			meshOut := cmd.OutOrStdout()
			if asJSON {
				meshOut = cmd.ErrOrStderr() // stdout is the document
			}
			doc := validateDoc{Files: []validatedFile{}}
			for _, f := range args {
				v := validatedFile{File: f}
				sc, _, err := loadScenario(f, set)
				if err == nil {
					// The files a scenario names are input too: run would
					// refuse a CA file that is missing, too large, not a
					// regular file or holding a private key.
					if _, cerr := measure.ReadCA(sc); cerr != nil {
						err = fmt.Errorf("%s: %w", f, cerr)
					}
				}
				if err != nil {
					v.Error = redact.Message(err.Error())
					doc.Files, doc.Invalid = append(doc.Files, v), doc.Invalid+1
					if !asJSON {
						fmt.Fprintln(cmd.ErrOrStderr(), v.Error)
					}
					continue
				}
				v.Valid, v.Scenario, v.Warnings = true, sc.Metadata.Name, sc.Warnings()
				for _, src := range sc.Attack.WorkerSources() {
					if !slices.Contains(v.WorkerClusters, src.Cluster) {
						v.WorkerClusters = append(v.WorkerClusters, src.Cluster)
					}
				}
				if !asJSON {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", f)
					for _, w := range v.Warnings {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: %s\n", f, w)
					}
				}
				if _, err := readMeshFlags(cmd, sc, &kf, meshOut); err != nil {
					v.MeshWarning = "the expected split from the mesh was not read: " + redact.Message(err.Error())
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: %s\n", f, v.MeshWarning)
				}
				doc.Files = append(doc.Files, v)
			}
			if asJSON {
				if err := cliout.WriteJSON(cmd.OutOrStdout(), doc); err != nil {
					return err
				}
			}
			if doc.Invalid > 0 {
				return &exitcode.Error{Code: exitcode.InvalidInput, Err: fmt.Errorf("%d of %d scenario files are invalid", doc.Invalid, len(args))}
			}
			return nil
		},
	}
	addSetFlag(cmd, &set)
	addKubeFlags(cmd.Flags(), &kf, scenarioContextHelp, scenarioNamespaceHelp)
	cliout.AddFlag(cmd, &output, outputTable, []string{outputTable, outputJSON}, "table (a line per file), or json (one object: every file's verdict, error and warnings)")
	return cmd
}

type runFlags struct {
	kube     kubeFlags
	out      string
	output   string
	json     bool
	quiet    bool
	progress string
	gate     gateFlags
	// workers is --workers: attack.workers, set before the scenario is
	// validated like --set attack.workers=N.
	workers int
	// connectTo are the --connect-to values; dial follows them and
	// $MESH_VERIFY_CONNECT_TO (connectToDial), nil without any.
	connectTo []string
	dial      attack.DialFunc
	// argv is the command line, recorded (redacted) in the report.
	argv []string
	// metrics are the Prometheus outputs (--metrics-listen, --remote-write).
	metrics metricsFlags
	// shortcuts are --rate, --duration and --requests.
	shortcuts attackShortcuts
	// batch collects the runs of several scenarios (batch.go); nil for one.
	batch *batchRecorder
	// junit is --junit: a fixed path the run's junit.xml (a batch's:
	// one test suite per scenario) is also written to, "" for none.
	junit string
}

// runOutputs are what run's --output takes.
var runOutputs = []string{outputTable, outputJSON, outputMD}

func newRunCmd(argv []string) *cobra.Command {
	f := runFlags{argv: argv}
	cmd := &cobra.Command{
		Use:   "run SCENARIO|DIR...",
		Short: "Attack, attribute, judge and report; the exit code is the verdict",
		Long: `run attacks the scenario's entry point, attributes and judges every request,
and writes a run directory under --out: report.json (the versioned report),
report.html (self-contained, opens offline), junit.xml, summary.md and the
scenario as run. --output picks what stdout shows: the tables (table), the
report.json document (json, for scripts) or the Markdown summary (md).
When $GITHUB_STEP_SUMMARY is set, summary.md is appended to it.

Several scenarios (files, built-in names, or a directory: every .yaml/.yml
file in it, sorted) run in turn, each with its own run directory and every
flag applied to each (--converge gates each on its own). The batch writes
junit.xml (one test suite per scenario), summary.md and batch.json into
<--out>/batch-<id>/, appends one summary to $GITHUB_STEP_SUMMARY, prints the
overall outcome first, and exits with the worst code: interrupted, then
invalid input, then setup error, then FAIL, then INCONCLUSIVE. -o json prints
batch.json (kind mesh-verify-batch: every run's report.json in runs[]), -o md
the batch's summary.md. Ctrl-C stops the scenario in progress as it stops one
run, starts no other, and still writes the batch's files.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cliout.ApplyJSONAlias(cmd, f.json, &f.output); err != nil {
				return err
			}
			if err := validOutput(f.output); err != nil {
				return err
			}
			if !slices.Contains([]string{"auto", "tty", "plain"}, f.progress) {
				return exitcode.InvalidInputf("--progress %q: want auto, tty or plain", f.progress)
			}
			if cmd.Flags().Changed("workers") {
				if f.workers < 0 || f.workers > scenarios.MaxAttackWorkers {
					return exitcode.InvalidInputf("--workers %d: want 0 (attack from this process) to %d worker pods", f.workers, scenarios.MaxAttackWorkers)
				}
				f.gate.set = append(f.gate.set, "attack.workers="+strconv.Itoa(f.workers))
			}
			f.gate.set = append(f.gate.set, f.shortcuts.sets(cmd)...)
			if err := checkJUnitPath(cmd, f.junit); err != nil {
				return err
			}
			dial, err := connectToDial(f.connectTo)
			if err != nil {
				return err
			}
			f.dial = dial
			files, err := expandScenarios(args)
			if err != nil {
				return err
			}
			if len(files) == 1 {
				return runGate(cmd, files[0], f)
			}
			return runBatch(cmd, files, f)
		},
	}
	cmd.Flags().StringVar(&f.out, "out", "mesh-verify-runs", "directory that receives one sub-directory per run (report.json, report.html, junit.xml, summary.md, scenario.yaml)")
	cliout.AddFlag(cmd, &f.output, outputTable, runOutputs, "what stdout shows: table, json (report.json) or md (summary.md)")
	cliout.AddJSONAlias(cmd, &f.json)
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "no live progress")
	cmd.Flags().StringVar(&f.progress, "progress", "auto", "live progress style: auto, tty or plain")
	cmd.Flags().StringVar(&f.junit, "junit", "", "also write the junit.xml to this fixed path, for CI's test reporters (several scenarios: the batch's, one test suite each; --converge: the last attempt's)")
	cmd.Flags().IntVar(&f.workers, "workers", 0, "attack from N worker pods in cluster attack.from (sets attack.workers; docs/distributed.md)")
	cmd.Flags().StringArrayVar(&f.connectTo, "connect-to", nil, "HOST:PORT:CONNECT_HOST:CONNECT_PORT (repeatable, or comma-separated; curl's --connect-to): connections to HOST:PORT go to CONNECT_HOST:CONNECT_PORT, the request keeps its URL; entries with the same HOST:PORT are picked at random per connection; $"+attack.ConnectToEnv+" adds entries after these")
	addKubeFlags(cmd.Flags(), &f.kube, scenarioContextHelp, scenarioNamespaceHelp)
	addGateFlags(cmd, &f.gate)
	addMetricsFlags(cmd, &f.metrics)
	addAttackShortcuts(cmd, &f.shortcuts)
	return cmd
}

// validOutput refuses an unknown --output; -o used to take the run
// directory, so a path gets a hint instead of silently becoming one.
func validOutput(o string) error {
	if err := cliout.Check(o, runOutputs); err != nil {
		return exitcode.InvalidInputf("%v (the run directory is --out DIR)", err)
	}
	return nil
}

func runScenario(cmd *cobra.Command, file string, f runFlags) error {
	sc, source, err := loadScenario(file, f.gate.set)
	if err != nil {
		return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
	}
	if sc.Attack.Workers > 0 && len(f.connectTo) > 0 {
		return exitcode.InvalidInputf("--connect-to redirects this process's connections, but with attack.workers %d the worker pods attack the target by its in-cluster name: leave out --connect-to", sc.Attack.Workers)
	}
	ko, err := f.kube.forScenario(sc)
	if err != nil {
		return err
	}
	remote, pushRemote, err := f.metrics.remote()
	if err != nil {
		return err
	}
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, abort, stop := interrupts(parent, cmd.ErrOrStderr(), sc.Attack.Timeout.Duration)
	defer stop()
	runID := f.gate.newRunID()
	dir := filepath.Join(f.out, runID)
	// The run directory exists before the attack, so that what is
	// streamed to it survives an interrupted run.
	// Credentials in it (a token in the URL, an Authorization header) are
	// redacted, like everywhere else the run is written.
	if _, err := reports.WriteFile(dir, "scenario.yaml", func(w io.Writer) error { _, err := io.WriteString(w, redact.Scenario(string(source))); return err }); err != nil {
		return &exitcode.Error{Code: exitcode.Setup, Err: err}
	}
	// Every result streams to results.bin (vegeta's encoding) and
	// attribution.jsonl as it is measured (docs/architecture.md).
	rec, err := runlog.Create(dir)
	if err != nil {
		return &exitcode.Error{Code: exitcode.Setup, Err: err}
	}
	defer rec.Close() // Run closes it; this covers a run that ends before the attack
	o := runner.Options{Kube: ko, RunID: runID, Tool: toolInfo(), Command: append([]string{"mesh-verify"}, f.argv...), Source: source,
		Record: rec, Abort: abort, WaitReady: f.gate.waitReady, Gate: f.gate.live}
	if f.dial != nil {
		o.Dial = f.dial
	}
	if !f.quiet {
		o.Progress = cmd.ErrOrStderr()
		switch f.progress {
		case "tty":
			o.Terminal = true
		case "plain":
		default:
			if fd, ok := o.Progress.(interface{ Fd() uintptr }); ok {
				o.Terminal = term.IsTerminal(int(fd.Fd()))
			}
		}
	}
	// A --metrics-listen that cannot listen ends the run like any setup
	// error once the run directory exists: with every file written.
	var rep *reports.Report
	live, err := f.metrics.startMetrics(&o, metricsout.Run{ID: runID, Scenario: sc.Metadata.Name})
	if err == nil {
		rep, err = runner.Run(ctx, sc, o)
		live.stop()
		if rep != nil && pushRemote {
			pushMetrics(remote, rep, cmd.ErrOrStderr())
		}
	}
	var failed *exitcode.Error
	if rep == nil {
		// The exit code is decided here, once, for the process and for
		// the attempt --converge records.
		failed = &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
		var se *runner.SetupError
		var decided *exitcode.Error
		switch {
		case errors.As(err, &decided):
			failed = decided
		case ctx.Err() != nil:
			// Ctrl-C while connecting or waiting for readiness: an
			// interrupt, not a broken setup.
			failed = &exitcode.Error{Code: exitcode.Interrupted, Err: fmt.Errorf("interrupted before the attack: %w", err)}
		case errors.As(err, &se):
			failed.Code = exitcode.Setup
		}
		// The run directory exists: the run still writes every file, so
		// that CI finds the cause where it looks for a verdict.
		_ = rec.Close()
		rep = reports.FailedRun{Scenario: reports.ScenarioInfo{Name: sc.Metadata.Name, File: sc.File, Description: sc.Metadata.Description},
			Target: sc.Target.URL, RunID: runID, Tool: o.Tool, Command: o.Command, Err: failed, Phase: reports.PhasePrepare}.Report()
		rep.Warnings = append(rep.Warnings, dropEmptyRecords(dir)...)
		err = failed
	} else {
		rep.Failure = reports.FailureOf(rep, err)
	}
	// Credentials never leave the process, whichever path wrote them.
	if red, rerr := redactReport(rep); rerr != nil {
		return &exitcode.Error{Code: exitcode.Setup, Err: rerr}
	} else {
		rep = red
	}
	f.gate.attempt(rep, dir, source, err)
	paths, werr := writeRun(dir, rep, source)
	if werr == nil && f.junit != "" && f.batch == nil {
		// A batch writes its own junit.xml there (finishBatch).
		if p, err := writeJUnitAt(f.junit, func(w io.Writer) error { return reports.JUnit(w, rep) }); err != nil {
			werr = err
		} else {
			paths = append(paths, p)
		}
	}
	if werr == nil {
		f.batch.ran(dir, rep)
	}
	if werr == nil && f.gate.gate == nil && f.batch == nil { // --converge appends the last attempt's only, a batch one summary
		appendStepSummary(cmd.ErrOrStderr(), rep)
	}
	stdout, info := cmd.OutOrStdout(), cmd.OutOrStdout()
	if f.output != outputTable {
		info = cmd.ErrOrStderr() // stdout carries one document only
	}
	switch {
	case f.gate.deferOutput():
		// --converge prints one line per attempt and the final report
		// once (gate.go).
		paths = nil
	case failed != nil && f.output == outputTable:
		// The error on stderr says it all; the files name it for CI.
	case f.oneDocument():
		// The batch prints one document for all its runs (batch.go).
	default:
		if rerr := renderOutput(stdout, f.output, rep); rerr != nil {
			return &exitcode.Error{Code: exitcode.Setup, Err: rerr}
		}
	}
	for _, p := range paths {
		fmt.Fprintf(info, "wrote %s\n", p)
	}
	switch {
	case failed != nil:
		if werr != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "mesh-verify: %v\n", werr)
		}
		return failed
	case werr != nil:
		return &exitcode.Error{Code: exitcode.Setup, Err: werr}
	case err != nil:
		return &exitcode.Error{Code: rep.ExitCode, Err: err}
	}
	return exitcode.Wrap(rep.ExitCode, nil)
}

func renderOutput(w io.Writer, output string, rep *reports.Report) error {
	switch output {
	case outputJSON:
		return reports.WriteJSON(w, rep)
	case outputMD:
		return reports.Markdown(w, rep)
	}
	return reports.Terminal(w, rep)
}

// savedRun is what a format may read besides the report: the run
// directory (results.bin for the plot) and the scenario as run.
type savedRun struct {
	dir      string
	scenario []byte
}

// runFile is one file of a run directory, by --format name; byRun files
// are written by every run, the others on request (report --format).
type runFile struct {
	name, file string
	byRun      bool
	render     func(io.Writer, *reports.Report, savedRun) error
}

// formats is a read-only table of functions, not state.
var formats = []runFile{
	{"json", "report.json", true, func(w io.Writer, r *reports.Report, _ savedRun) error { return reports.WriteJSON(w, r) }},
	{"html", "report.html", true, func(w io.Writer, r *reports.Report, s savedRun) error {
		return reports.HTMLWith(w, r, reports.HTMLOptions{Scenario: s.scenario})
	}},
	{"junit", "junit.xml", true, func(w io.Writer, r *reports.Report, _ savedRun) error { return reports.JUnit(w, r) }},
	{"md", "summary.md", true, func(w io.Writer, r *reports.Report, _ savedRun) error { return reports.Markdown(w, r) }},
	// vegeta's plot of results.bin, one series per cluster (runlog.Plot).
	{"plot", runlog.PlotFile, false, func(w io.Writer, r *reports.Report, s savedRun) error {
		return runlog.Plot(w, s.dir, "mesh-verify "+r.RunID)
	}},
}

func formatNamed(name string) (runFile, bool) {
	i := slices.IndexFunc(formats, func(f runFile) bool { return f.name == name })
	if i < 0 {
		return runFile{}, false
	}
	return formats[i], true
}

// writeRun writes the report formats every run has into its directory.
func writeRun(dir string, rep *reports.Report, scenario []byte) ([]string, error) {
	var paths []string
	for _, out := range formats {
		if !out.byRun {
			continue
		}
		p, err := reports.WriteFile(dir, out.file, func(w io.Writer) error { return out.render(w, rep, savedRun{dir, scenario}) })
		if err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func newReportCmd() *cobra.Command {
	var (
		format string
		out    string
	)
	cmd := &cobra.Command{
		Use:   "report RUN_DIR|report.json",
		Short: "Render a saved run again (table, json, html, junit, md, plot)",
		Long: `report renders a saved run from its report.json, also for an interrupted run.
One --output (-o) is printed on stdout; several (-o html,json,junit,md) are
written as files into --out (default: the run directory) and their paths
printed. plot draws the latency of every request over time, one series per
cluster, from results.bin with vegeta's plot (vegeta plot results.bin reads the
same file). The exit code is the run's.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := applyFormatAlias(cmd); err != nil {
				return err
			}
			return reportRun(cmd, args[0], format, out)
		},
	}
	cliout.AddFlag(cmd, &format, outputTable, []string{outputTable, outputJSON, outputHTML, "junit", outputMD, "plot"},
		"table, json, html, junit, md (markdown) or plot; several, comma-separated, are written as files")
	addFormatAlias(cmd, &format, outputTable)
	cmd.Flags().StringVar(&out, "out", "", "directory for the files of several formats (default: the run directory)")
	cmd.AddCommand(newReportDiffCmd())
	return cmd
}

func reportRun(cmd *cobra.Command, arg, format, out string) error {
	path, dir := arg, filepath.Dir(arg)
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		path, dir = filepath.Join(arg, "report.json"), arg
	}
	rep, err := reports.ReadJSON(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w (a run writes report.json when it ends, also when interrupted with Ctrl-C; a run killed outright leaves none)", err)
		}
		return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
	}
	// The exit code is the process's: one that is none of ours (a file
	// edited by hand) would be taken modulo 256 by the shell (256 → 0, a
	// PASS).
	if !exitcode.Known(rep.ExitCode) {
		return exitcode.InvalidInputf("%s: exitCode %d is not one mesh-verify gives (0, 1, 2, 3, 4 or 130)", path, rep.ExitCode)
	}
	// scenario.yaml is absent for older runs: the HTML then shows none.
	scenario, _ := os.ReadFile(filepath.Join(dir, "scenario.yaml"))
	src := savedRun{dir, scenario}
	var files []runFile
	table := false
	flag := outputName(cmd)
	for _, n := range strings.Split(format, ",") {
		switch n = strings.TrimSpace(n); n {
		case "":
			continue
		case "markdown":
			n = "md"
		case outputTable:
			table = true
			continue
		}
		f, ok := formatNamed(n)
		if !ok {
			return exitcode.InvalidInputf("%s %q: want table, json, html, junit, md or plot", flag, n)
		}
		if !slices.ContainsFunc(files, func(g runFile) bool { return g.name == n }) {
			files = append(files, f)
		}
	}
	switch {
	case table && (len(files) > 0 || out != ""):
		return exitcode.InvalidInputf("%s table prints on stdout: it cannot be written with other formats", flag)
	case table:
		if err := reports.Terminal(cmd.OutOrStdout(), rep); err != nil {
			return &exitcode.Error{Code: exitcode.Setup, Err: err}
		}
		return exitcode.Wrap(rep.ExitCode, nil)
	case len(files) == 0:
		return exitcode.InvalidInputf("%s %q: want table, json, html, junit, md or plot", flag, format)
	case len(files) == 1 && out == "":
		// Rendered whole before anything is printed: a results.bin cut
		// short (a run killed outright) is an error alone, not a page and
		// then an error.
		var page bytes.Buffer
		if err := files[0].render(&page, rep, src); err != nil {
			return renderError(dir, err)
		}
		if _, err := page.WriteTo(cmd.OutOrStdout()); err != nil {
			return &exitcode.Error{Code: exitcode.Setup, Err: err}
		}
		return exitcode.Wrap(rep.ExitCode, nil)
	}
	if out == "" {
		out = dir
	}
	for _, f := range files {
		p, err := reports.WriteFile(out, f.file, func(w io.Writer) error { return f.render(w, rep, src) })
		if err != nil {
			return renderError(dir, err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", p)
	}
	return exitcode.Wrap(rep.ExitCode, nil)
}

// renderError is the exit of a format that could not be rendered: a run
// file cut short or damaged (results.bin of a run killed outright) is
// invalid input, naming the file; anything else (a full disk) a setup
// error.
func renderError(dir string, err error) error {
	if errors.Is(err, runlog.ErrTruncated) {
		return &exitcode.Error{Code: exitcode.InvalidInput, Err: fmt.Errorf("run directory %s: %w (a run killed outright leaves its results cut short; the other formats render from report.json)", dir, err)}
	}
	return &exitcode.Error{Code: exitcode.Setup, Err: err}
}

// connectToDial is the dialer of --connect-to values followed by
// $MESH_VERIFY_CONNECT_TO's entries (attack.ConnectToEnv), nil when there
// are none: `run` and `worker` then dial plainly.
func connectToDial(values []string) (attack.DialFunc, error) {
	ct, err := attack.ParseConnectTo(append(slices.Clone(values), os.Getenv(attack.ConnectToEnv))...)
	if err != nil {
		return nil, exitcode.InvalidInputf("--connect-to or $%s: %w", attack.ConnectToEnv, err)
	}
	if len(ct.Entries()) == 0 {
		return nil, nil
	}
	return ct.Dial(nil), nil
}
