package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/runner"
)

// gateFlags are run's CI-gate flags (README.md "CI gate"): --set
// overrides, --wait-ready, and --converge N --within D, which repeats the
// whole run until N consecutive runs pass.
type gateFlags struct {
	set       []string
	waitReady time.Duration
	converge  int
	within    time.Duration

	// gate is the converge loop in progress; nil for a single run.
	gate *convergeLoop
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
	cmd.Flags().IntVar(&g.converge, "converge", 0, "re-run the whole scenario until N consecutive runs pass (with --within); every attempt gets its own run directory and the last report.json lists them all")
	cmd.Flags().DurationVar(&g.within, "within", 0, "deadline of --converge, from the start of the first attempt (no attempt starts after it)")
}

// check refuses flags that cannot work together, naming the flag.
func (g *gateFlags) check(cmd *cobra.Command) error {
	fl := cmd.Flags()
	switch {
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

// runGate runs the scenario once, or, with --converge, until N
// consecutive runs pass or --within has passed. Each attempt is a full
// run with its own run directory under --out (its run id); every
// attempt's report.json lists the attempts so far, so the last one lists
// them all, and stdout shows the last one's report. The exit code is 0
// when N consecutive runs passed in time, else the last attempt's.
func runGate(cmd *cobra.Command, file string, f runFlags) error {
	if err := f.gate.check(cmd); err != nil {
		return err
	}
	if f.gate.converge == 0 {
		return runScenario(cmd, file, f)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	loop := &convergeLoop{rec: &reports.Converge{Need: f.gate.converge, Within: f.gate.within}, start: time.Now()}
	loop.deadline = loop.start.Add(f.gate.within)
	f.gate.gate = loop
	output := f.output
	info := cmd.ErrOrStderr()
	streak, fails := 0, 0
	interrupted := false
	var err error
	for {
		n := len(loop.rec.Attempts)
		err = runScenario(cmd, file, f)
		if len(loop.rec.Attempts) == n {
			// The scenario did not load: invalid input before the attempt.
			if n > 0 {
				printAttempts(info, loop.rec)
			}
			return err
		}
		a := loop.last()
		if a.ExitCode == exitcode.Pass {
			streak++
		} else {
			streak = 0
		}
		// One line per attempt; the final report is printed once, below.
		fmt.Fprintf(info, "converge: attempt %d (%s): %s, exit %d, %d of %d consecutive passes%s\n",
			len(loop.rec.Attempts), a.RunID, a.Verdict, a.ExitCode, streak, f.gate.converge, reasonSuffix(reports.Printable(a.Reason)))
		switch {
		case streak >= f.gate.converge:
			loop.finish(true, fmt.Sprintf("%d consecutive passes after %d attempts in %s", streak, len(loop.rec.Attempts), time.Since(loop.start).Round(time.Second)))
		case a.ExitCode == exitcode.InvalidInput:
			loop.finish(false, "attempt "+a.RunID+" found the scenario invalid (exit 4): repeating cannot help")
		case ctx.Err() != nil || a.ExitCode == exitcode.Interrupted:
			interrupted = true
			loop.finish(false, "interrupted")
		case !time.Now().Before(loop.deadline):
			loop.finish(false, fmt.Sprintf("%d consecutive passes of %d when --within %s ended, after %d attempts", streak, f.gate.converge, f.gate.within, len(loop.rec.Attempts)))
		default:
			if a.ExitCode != exitcode.Pass {
				// An attempt that fails in milliseconds (a target refused,
				// an API server down) must not spin: back off, 1 s doubling
				// to 15 s, within the deadline.
				fails++
				wait := min(time.Second<<min(fails-1, 4), 15*time.Second, time.Until(loop.deadline))
				select {
				case <-time.After(wait):
				case <-ctx.Done():
				}
			} else {
				fails = 0
			}
			if ctx.Err() != nil {
				// Ctrl-C between attempts: no new attempt starts.
				interrupted = true
				loop.finish(false, fmt.Sprintf("interrupted after %d attempts", len(loop.rec.Attempts)))
				break
			}
			continue
		}
		break
	}
	if loop.rep == nil {
		// The last attempt wrote no report (it failed before measuring):
		// its error, with the attempts, is all there is.
		printAttempts(info, loop.rec)
		return err
	}
	// The last attempt's report, now with the gate's outcome and exit code.
	rep := loop.rep
	switch {
	case loop.rec.Converged:
		rep.ExitCode = exitcode.Pass
	case interrupted:
		rep.ExitCode = exitcode.Interrupted
	case rep.ExitCode == exitcode.Pass:
		// The last attempt passed, but not N in a row in time: the gate
		// did not see the mesh converge, which is no PASS.
		rep.ExitCode = exitcode.Inconclusive
	}
	if !loop.rec.Converged && rep.Gate == assert.Pass {
		// report.json and junit.xml say what the exit code says.
		rep.Gate = assert.Inconclusive
	}
	if _, werr := writeRun(loop.dir, rep, loop.source); werr != nil {
		return &exitcode.Error{Code: exitcode.Setup, Err: werr}
	}
	appendStepSummary(cmd.ErrOrStderr(), rep)
	// The final report, once, with every attempt in it.
	if rerr := renderOutput(cmd.OutOrStdout(), output, rep); rerr != nil {
		return &exitcode.Error{Code: exitcode.Setup, Err: rerr}
	}
	fmt.Fprintf(info, "converge: %s; report of every attempt: %s\n", loop.rec.Reason, filepath.Join(loop.dir, "report.json"))
	return exitcode.Wrap(rep.ExitCode, nil)
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return " — " + r
}

// printAttempts is the attempts table alone, after the last attempt's
// full output.
func printAttempts(w io.Writer, c *reports.Converge) {
	_ = reports.ConvergeTable(w, c)
}

// convergeLoop records the attempts of --converge as runScenario makes them.
type convergeLoop struct {
	rec      *reports.Converge
	start    time.Time
	deadline time.Time
	// rep, dir and source are the last attempt's report (nil when it
	// wrote none), run directory and scenario as run.
	rep    *reports.Report
	dir    string
	source []byte
	// begun is the start of the attempt in progress.
	begun time.Time
	runID string
}

// begin is called by runScenario when an attempt gets its run id.
func (l *convergeLoop) begin(runID string) {
	l.begun, l.runID = time.Now(), runID
	l.rep = nil
}

// record adds the attempt that made rep (nil when it failed before
// measuring, with err) and puts every attempt so far into rep.
func (l *convergeLoop) record(rep *reports.Report, dir string, source []byte, err error) {
	a := reports.Attempt{RunID: l.runID, Start: l.begun, Duration: time.Since(l.begun)}
	switch {
	case rep != nil:
		a.Verdict, a.ExitCode, a.Reason = rep.Verdict, rep.ExitCode, attemptReason(rep)
		if rep.ExitCode == exitcode.Setup && a.Verdict == assert.Pass {
			a.Verdict = assert.Inconclusive
		}
	default:
		// runScenario hands the code it exits with (an *exitcode.Error).
		a.Verdict, a.ExitCode = assert.Inconclusive, exitcode.Of(err, exitcode.Setup)
		if err != nil {
			a.Reason = firstLine(err.Error())
		}
	}
	l.rec.Attempts = append(l.rec.Attempts, a)
	l.rep, l.dir, l.source = rep, dir, source
	if rep != nil {
		c := *l.rec
		c.Attempts = append([]reports.Attempt(nil), l.rec.Attempts...)
		if c.Reason == "" {
			c.Reason = fmt.Sprintf("attempt %d in progress", len(c.Attempts))
		}
		rep.Converge = &c
	}
}

func (l *convergeLoop) last() *reports.Attempt {
	if len(l.rec.Attempts) == 0 {
		return nil
	}
	return &l.rec.Attempts[len(l.rec.Attempts)-1]
}

func (l *convergeLoop) finish(converged bool, reason string) {
	l.rec.Converged, l.rec.Reason, l.rec.Done = converged, reason, true
	if l.rep != nil {
		l.rep.Converge = l.rec
	}
}

// attemptReason is one line on why an attempt did not pass.
func attemptReason(rep *reports.Report) string {
	switch {
	case rep.Failure != nil:
		return rep.Failure.Kind + ": " + firstLine(rep.Failure.Error)
	case rep.SetupError != "":
		return "setup: " + firstLine(rep.SetupError)
	case len(rep.ConfigErrors) > 0:
		return "configuration: " + firstLine(rep.ConfigErrors[0].Subject+": "+rep.ConfigErrors[0].Message)
	}
	// The expectation that decided the verdict: a FAIL before an
	// INCONCLUSIVE listed ahead of it.
	for _, v := range []assert.Verdict{assert.Fail, assert.Inconclusive} {
		for _, e := range rep.Expectation {
			if e.Verdict == v {
				return firstLine(e.Name + ": " + e.Verdict.String() + ": " + e.Reason)
			}
		}
	}
	return ""
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}

// newRunID is the run id of the next run, noted by the converge loop.
func (g *gateFlags) newRunID() string {
	id := runner.NewRunID(time.Now())
	if g.gate != nil {
		g.gate.begin(id)
	}
	return id
}

// attempt hands a finished run to the converge loop before its files are
// written, so its report.json lists the attempts so far.
func (g *gateFlags) attempt(rep *reports.Report, dir string, source []byte, err error) {
	if g.gate != nil {
		g.gate.record(rep, dir, source, err)
	}
}

// deferOutput is true when the converge loop prints the output itself:
// the final report once, not one per attempt.
func (g *gateFlags) deferOutput() bool {
	return g.gate != nil
}
