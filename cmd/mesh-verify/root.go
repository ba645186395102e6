package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// version is stamped by the Makefile with -ldflags.
var version = "dev"

// exitCoder is how a command tells execute which exit code it ends with.
type exitCoder interface{ ExitCode() int }

// codedError carries an exit code and a message that was not printed yet.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e *codedError) ExitCode() int { return e.code }

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
	root.AddCommand(newRunCmd(args), newValidateCmd(), newReportCmd(), newPlanCmd(), newCheckCmd(), newPortForwardCmd(), newLabCmd())

	err := root.Execute()
	if err == nil {
		return exitPass
	}
	code := exitInvalidInput // cobra's own errors: unknown flag, wrong args
	var ec exitCoder
	if errors.As(err, &ec) {
		code = ec.ExitCode()
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(stderr, "mesh-verify:", msg)
	}
	return code
}

func newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check scenario files without running them",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := 0
			for _, f := range args {
				if _, err := scenarios.Load(f); err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), err)
					bad++
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", f)
			}
			if bad > 0 {
				return &codedError{code: exitInvalidInput, err: fmt.Errorf("%d of %d scenario files are invalid", bad, len(args))}
			}
			return nil
		},
	}
}

type runFlags struct {
	kubeconfig []string
	out        string
	json       bool
	quiet      bool
	progress   string
	// argv is the command line, recorded (redacted) in the report.
	argv []string
}

func newRunCmd(argv []string) *cobra.Command {
	f := runFlags{argv: argv}
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Attack, attribute, judge and report; the exit code is the verdict",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runScenario(cmd, args[0], f)
		},
	}
	cmd.Flags().StringVarP(&f.out, "out", "o", "mesh-verify-runs", "directory that receives one sub-directory per run (report.json, junit.xml, summary.md)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print the JSON report on stdout instead of the tables")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "no live progress")
	cmd.Flags().StringVar(&f.progress, "progress", "auto", "live progress style: auto, tty or plain")
	cmd.Flags().StringSliceVar(&f.kubeconfig, "kubeconfig", nil, "kubeconfig files, merged like KUBECONFIG (default: $KUBECONFIG, else ~/.kube/config; only read)")
	return cmd
}

func runScenario(cmd *cobra.Command, file string, f runFlags) error {
	sc, err := scenarios.Load(file)
	if err != nil {
		return &codedError{code: exitInvalidInput, err: err}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if ctx == nil {
		ctx = context.Background()
	}
	o := runner.Options{Kubeconfig: f.kubeconfig, Tool: toolInfo(), Command: append([]string{"mesh-verify"}, f.argv...)}
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
	rep, err := runner.Run(ctx, sc, o)
	if rep == nil {
		var se *runner.SetupError
		if errors.As(err, &se) {
			return &codedError{code: exitSetup, err: err}
		}
		return &codedError{code: exitInvalidInput, err: err}
	}
	dir := filepath.Join(f.out, rep.RunID)
	paths, werr := writeRun(dir, rep)
	if f.json {
		if err := reports.WriteJSON(cmd.OutOrStdout(), rep); err != nil {
			return &codedError{code: exitSetup, err: err}
		}
	} else {
		if err := reports.Terminal(cmd.OutOrStdout(), rep); err != nil {
			return &codedError{code: exitSetup, err: err}
		}
		for _, p := range paths {
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", p)
		}
	}
	if werr != nil {
		return &codedError{code: exitSetup, err: werr}
	}
	if err != nil {
		return &codedError{code: rep.ExitCode, err: err}
	}
	return &codedError{code: rep.ExitCode}
}

// writeRun writes every report format into the run's directory.
func writeRun(dir string, rep *reports.Report) ([]string, error) {
	var paths []string
	for _, out := range []struct {
		name   string
		render func(io.Writer, *reports.Report) error
	}{
		{"report.json", reports.WriteJSON},
		{"junit.xml", reports.JUnit},
		{"summary.md", reports.Markdown},
	} {
		p, err := reports.WriteFile(dir, out.name, func(w io.Writer) error { return out.render(w, rep) })
		if err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func newReportCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "report RUN_DIR|report.json",
		Short: "Render a saved run again (table, json, junit, markdown)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if st, err := os.Stat(path); err == nil && st.IsDir() {
				path = filepath.Join(path, "report.json")
			}
			rep, err := reports.ReadJSON(path)
			if err != nil {
				return &codedError{code: exitInvalidInput, err: err}
			}
			render := map[string]func(io.Writer, *reports.Report) error{
				"table": reports.Terminal, "json": reports.WriteJSON, "junit": reports.JUnit, "markdown": reports.Markdown,
			}[format]
			if render == nil {
				return &codedError{code: exitInvalidInput, err: fmt.Errorf("--format %q: want table, json, junit or markdown", format)}
			}
			if err := render(cmd.OutOrStdout(), rep); err != nil {
				return &codedError{code: exitSetup, err: err}
			}
			return &codedError{code: rep.ExitCode}
		},
	}
	cmd.Flags().StringVarP(&format, "format", "f", "table", "table, json, junit or markdown")
	return cmd
}
