package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/internal/cliout"
	"github.com/mesh-verify/mesh-verify/reports"
)

// diffOutputs are what report diff's --output takes.
var diffOutputs = []string{outputTable, outputJSON, outputHTML}

// newReportDiffCmd is `mesh-verify report diff RUN_A RUN_B`: compare two
// saved runs, before and after a rollout (docs/statistics.md §9).
func newReportDiffCmd() *cobra.Command {
	var format string
	var confidence float64
	cmd := &cobra.Command{
		Use:   "diff RUN_A RUN_B",
		Short: "Compare two saved runs: which shares changed significantly",
		Long: `Compare two saved runs, A (before) and B (after), each a run directory or a
report.json. For every dimension (cluster, pod, version) and source (body, logs,
metrics) both runs attributed, every bucket's requests and share in both runs, the
change with its confidence interval, and whether it is significant: a
two-proportion z test whose variance counts keep-alive connections, not requests,
where requests shared them (the per-connection counts the reports carry; a report
without them is taken as independent requests, which the output says), with
Holm's correction over the buckets of each dimension. Also each expectation's
verdict in both runs, matched by name.

Each expectation of both runs is compared at the effective draws its own
verdict used (as dependence-aware as the verdicts, following each run's
sampling): "changed" (a share changed significantly, or PASS in one run and
FAIL in the other), "no change" within its margin, or "untestable" (too few
independent draws for either). Success rates, only and never are compared
too.

Exit codes, for a CI gate: 0 no change within the margins, 1 a change (a
regression among them: the summary names the expectations whose verdict is
worse in B), 2 untestable or nothing could be compared (as with a few
keep-alive connections a run), 4 invalid input (an unreadable report, another
report schema, negative or overflowing counts, a bad flag).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := applyFormatAlias(cmd); err != nil {
				return err
			}
			render := map[string]func(io.Writer, reports.DiffReport) error{
				outputTable: reports.DiffTerminal, outputJSON: reports.DiffJSON, outputHTML: reports.DiffHTML,
			}[format]
			if render == nil {
				return exitcode.InvalidInputf("%s %q: want %s", outputName(cmd), format, cliout.OrList(diffOutputs))
			}
			if !(confidence > 0 && confidence < 1) {
				return &exitcode.Error{Code: exitcode.InvalidInput, Err: fmt.Errorf("--confidence %g: want a level between 0 and 1, like 0.95", confidence)}
			}
			var runs [2]*reports.Report
			for i, arg := range args {
				path := arg
				if st, err := os.Stat(path); err == nil && st.IsDir() {
					path = filepath.Join(path, "report.json")
				}
				rep, err := reports.ReadJSON(path)
				if err != nil {
					return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
				}
				runs[i] = rep
			}
			d, err := reports.Diff(runs[0], runs[1], confidence)
			if err != nil {
				return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
			}
			if err := render(cmd.OutOrStdout(), d); err != nil {
				return &exitcode.Error{Code: exitcode.Setup, Err: err}
			}
			switch d.Outcome {
			case assert.ExpectationChanged:
				return exitcode.Wrap(exitcode.Fail, nil)
			case assert.ExpectationUntestable:
				return exitcode.Wrap(exitcode.Inconclusive, nil)
			}
			return nil
		},
	}
	cliout.AddFlag(cmd, &format, outputTable, diffOutputs, "table, json or html")
	addFormatAlias(cmd, &format, outputTable)
	cmd.Flags().Float64Var(&confidence, "confidence", 0.95, "confidence level of the intervals and of each dimension's tests")
	return cmd
}
