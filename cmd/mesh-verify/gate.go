package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/converge"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// gateFlags are run's CI-gate flags (README.md "CI gate"): --set
// overrides, --wait-ready, and --converge N --within D, which repeats the
// whole run until N consecutive runs pass.
type gateFlags struct {
	set       []string
	waitReady time.Duration
	converge  int
	within    time.Duration
	// window is --converge-window, the windows of a gate that judges one
	// run's windows as they seal.
	window time.Duration

	// gate is the converge loop in progress; nil for a single run.
	gate *converge.Loop
	// live is the gate that judges one run's windows as they seal; nil
	// otherwise.
	live *converge.Gate
}

// addSetFlag adds --set to run, validate and plan.
func addSetFlag(cmd *cobra.Command, set *[]string) {
	cmd.Flags().StringArrayVar(set, "set", nil, "override a scenario field before it is validated, PATH=VALUE ("+strings.Join(setExamples, ", ")+"); repeatable")
}

// setExamples are --set's help examples; a test applies each to a
// built-in scenario, so the help never shows one that is refused.
var setExamples = []string{"attack.rate=500/s", "expect[0].split.margin=3%", "clusters[1].context=kind-c2"}

// addGateFlags adds the CI-gate flags to run.
func addGateFlags(cmd *cobra.Command, g *gateFlags) {
	addSetFlag(cmd, &g.set)
	cmd.Flags().DurationVar(&g.waitReady, "wait-ready", 0, "before the attack, wait up to this long for every observed workload and the port-forward target to be ready in every cluster (exit 3 naming what is not)")
	cmd.Flags().IntVar(&g.converge, "converge", 0, "pass once N consecutive windows of one run pass after the last change of a followed split's mesh object (split.fromMesh with windows.follow), stopping the attack then; without such a split, re-run the whole scenario until N consecutive runs pass (every attempt gets its own run directory and the last report.json lists them all); with --within")
	cmd.Flags().DurationVar(&g.within, "within", 0, "deadline of --converge: the attack's duration when one run's windows are judged, else from the start of the first attempt (no attempt starts after it)")
	cmd.Flags().DurationVar(&g.window, "converge-window", converge.DefaultWindow, "length of the windows --converge judges as they seal, between changes of the followed object (at most --within; ⌈within/window⌉ looks, each at α/looks)")
}

// check refuses flags that cannot work together, naming the flag.
func (g *gateFlags) check(cmd *cobra.Command) error {
	fl := cmd.Flags()
	switch {
	case fl.Changed("converge-window") && !fl.Changed("converge"):
		return exitcode.InvalidInputf("--converge-window %s needs --converge N", g.window)
	case fl.Changed("within") && !fl.Changed("converge"):
		return exitcode.InvalidInputf("--within %s needs --converge N (how many consecutive passes)", g.within)
	case fl.Changed("converge") && g.converge < 1:
		return exitcode.InvalidInputf("--converge %d: want N ≥ 1 consecutive passes", g.converge)
	case fl.Changed("converge") && g.within <= 0:
		return exitcode.InvalidInputf("--converge %d needs --within DURATION > 0 (the deadline to converge by)", g.converge)
	case g.waitReady < 0:
		return exitcode.InvalidInputf("--wait-ready %s: want a duration ≥ 0", g.waitReady)
	}
	return nil
}

// runGate runs the scenario once, or, with --converge on a split that
// follows its mesh object (runner.GateSplit), once with a converge.Gate
// that judges the run's windows as they seal and stops the attack when N
// in a row pass after the last change; or, with --converge elsewhere,
// until N consecutive runs pass or --within has passed (package
// converge), saying in its first line which it does. Each
// attempt is a full run with its own run directory under --out (its run
// id); every attempt's report.json lists the attempts so far, so the last
// one lists them all, and stdout shows the last one's report. The exit
// code is 0 when N consecutive runs passed in time, else the last
// attempt's.
func runGate(cmd *cobra.Command, file string, f runFlags) error {
	if err := f.gate.check(cmd); err != nil {
		return err
	}
	if f.gate.converge == 0 {
		return runScenario(cmd, file, f)
	}
	info := cmd.ErrOrStderr()
	sc, _, err := loadScenario(file, f.gate.set)
	if err != nil {
		return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
	}
	name, why := runner.GateSplit(sc)
	if name != "" {
		window := f.gate.window
		if !cmd.Flags().Changed("converge-window") {
			window = min(window, f.gate.within)
		}
		poll := scenarios.DefaultPoll
		for _, e := range sc.Expect {
			if e.Name == name {
				poll = e.Split.Windows.PollEvery()
			}
		}
		if err := converge.CheckWindow(f.gate.within, window, poll); err != nil {
			return exitcode.InvalidInputf("%v", err)
		}
		if f.gate.within > scenarios.MaxDuration {
			// The attack lasts --within.
			return exitcode.InvalidInputf("--within %s: the attack of a gate that judges one run's windows lasts --within, at most attack.duration's %s", f.gate.within, scenarios.MaxDuration)
		}
		g := &converge.Gate{Need: f.gate.converge, Within: f.gate.within, Window: window, Expectation: name}
		fmt.Fprintf(info, "converge: one run, judging the windows of split %q as they seal: windows of %s between changes of its mesh object, %d looks at α/%d each; PASS once %d in a row pass after the last change, the attack stops then or after --within %s\n",
			name, window, g.Looks(), g.Looks(), g.Need, g.Within)
		f.gate.live = g
		return runScenario(cmd, file, f)
	}
	fmt.Fprintf(info, "converge: re-running the whole scenario until %d consecutive runs pass within %s: %s\n", f.gate.converge, f.gate.within, why)
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	loop := converge.New(f.gate.converge, f.gate.within, time.Now())
	f.gate.gate = loop
	out := loop.Run(ctx, func() error { return runScenario(cmd, file, f) }, info)
	if out.Report == nil {
		// The scenario did not load, or the last attempt wrote no report
		// (it failed before measuring): its error, with the attempts so
		// far, is all there is.
		if out.Loaded {
			_ = reports.ConvergeTable(info, out.Converge)
		}
		return out.Err
	}
	rep := out.Report
	if _, werr := writeRun(out.Dir, rep, out.Source); werr != nil {
		return &exitcode.Error{Code: exitcode.Setup, Err: werr}
	}
	// A batch keeps the gate's final report, and prints one summary and
	// (with -o json|md) one document for all its runs (batch.go).
	f.batch.ran(out.Dir, rep)
	if f.batch == nil {
		appendStepSummary(cmd.ErrOrStderr(), rep)
	}
	// The final report, once, with every attempt in it.
	if !f.oneDocument() {
		if rerr := renderOutput(cmd.OutOrStdout(), f.output, rep); rerr != nil {
			return &exitcode.Error{Code: exitcode.Setup, Err: rerr}
		}
	}
	fmt.Fprintf(info, "converge: %s; report of every attempt: %s\n", out.Converge.Reason, filepath.Join(out.Dir, "report.json"))
	return exitcode.Wrap(rep.ExitCode, nil)
}

// newRunID is the run id of the next run, noted by the converge loop.
func (g *gateFlags) newRunID() string {
	id := runner.NewRunID(time.Now())
	if g.gate != nil {
		g.gate.Begin(id)
	}
	return id
}

// attempt hands a finished run to the converge loop before its files are
// written, so its report.json lists the attempts so far.
func (g *gateFlags) attempt(rep *reports.Report, dir string, source []byte, err error) {
	if g.gate != nil {
		g.gate.Record(rep, dir, source, err)
	}
}

// deferOutput is true when the converge loop prints the output itself:
// the final report once, not one per attempt.
func (g *gateFlags) deferOutput() bool {
	return g.gate != nil
}
