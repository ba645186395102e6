// Package converge is the CI gate of `run --converge N --within D`
// (README.md, "CI gate"): it repeats a whole run until N consecutive
// attempts pass or the deadline ends, records every attempt in the
// report, and decides the gate's exit code. How one attempt runs is not
// its business: the caller passes the attempt in, and the attempt hands
// its report back through Begin and Record before it writes its files,
// so that every attempt's report.json lists the attempts so far.
//
// Where the scenario's split follows its mesh object, the gate is one
// run instead (watch.go): Gate and Decide are the rule the runner stops
// the attack on as the run's windows seal, and the gate's outcome in
// report.json (docs/statistics.md §10.1).
package converge

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/reports"
)

// Backoff is the pause after the fails-th failing attempt in a row: an
// attempt that fails in milliseconds (a target refused, an API server
// down) must not spin. DefaultBackoff is 1 s doubling to 15 s.
type Backoff func(fails int) time.Duration

// DefaultBackoff is 1 s, doubling with each failing attempt in a row, at
// most 15 s.
func DefaultBackoff(fails int) time.Duration {
	return min(time.Second<<min(max(fails-1, 0), 4), 15*time.Second)
}

// Loop is one gate: Need consecutive passes within Within.
type Loop struct {
	rec      *reports.Converge
	start    time.Time
	deadline time.Time
	backoff  Backoff
	// rep, dir and source are the last attempt's report (nil when it
	// wrote none), run directory and scenario as run.
	rep    *reports.Report
	dir    string
	source []byte
	// begun and runID are the attempt in progress.
	begun time.Time
	runID string
}

// Option configures a Loop.
type Option func(*Loop)

// WithBackoff replaces DefaultBackoff (tests use short pauses).
func WithBackoff(b Backoff) Option { return func(l *Loop) { l.backoff = b } }

// New is a gate that needs need consecutive passes within within,
// counted from now.
func New(need int, within time.Duration, now time.Time, opts ...Option) *Loop {
	l := &Loop{rec: &reports.Converge{Need: need, Within: within, Mode: reports.ConvergeRuns}, start: now, deadline: now.Add(within), backoff: DefaultBackoff}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Begin is called by the attempt when it gets its run id.
func (l *Loop) Begin(runID string) {
	l.begun, l.runID = time.Now(), runID
	l.rep = nil
}

// Record is called by the attempt with what it made, before it writes its
// files: rep (nil when it failed before measuring, with err), its run
// directory and the scenario as run. It puts every attempt so far into rep.
func (l *Loop) Record(rep *reports.Report, dir string, source []byte, err error) {
	a := reports.Attempt{RunID: l.runID, Start: l.begun, Duration: time.Since(l.begun)}
	switch {
	case rep != nil:
		a.Verdict, a.ExitCode, a.Reason = rep.Verdict, rep.ExitCode, attemptReason(rep)
		if rep.ExitCode == exitcode.Setup && a.Verdict == assert.Pass {
			a.Verdict = assert.Inconclusive
		}
	default:
		// The attempt hands the code it exits with (an *exitcode.Error).
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

// Outcome is how the gate ended.
type Outcome struct {
	// Report is the last attempt's report with the gate's outcome in it
	// (Converge, ExitCode, Gate); nil when the last attempt wrote none.
	Report *reports.Report
	// Dir and Source are the last attempt's run directory and scenario.
	Dir    string
	Source []byte
	// Converge is the record of every attempt.
	Converge *reports.Converge
	// Err is the last attempt's error: the whole story when Report is nil.
	Err error
	// Loaded is false when the scenario did not load before the first
	// attempt (invalid input): there is nothing to report but Err.
	Loaded bool
}

// Run repeats attempt until the gate is decided, printing one line per
// attempt to progress. attempt must call Begin and Record once each when
// it gets as far as a run id; one that returns without calling Record
// found the scenario invalid, which ends the gate. Ctrl-C (ctx done)
// during an attempt or the pause between attempts ends it too: no new
// attempt starts, and the exit code is 130.
func (l *Loop) Run(ctx context.Context, attempt func() error, progress io.Writer) Outcome {
	streak, fails := 0, 0
	interrupted := false
	var err error
	for {
		n := len(l.rec.Attempts)
		err = attempt()
		if len(l.rec.Attempts) == n {
			// The scenario did not load: invalid input before the attempt.
			return Outcome{Err: err, Converge: l.rec, Loaded: n > 0}
		}
		a := l.last()
		if a.ExitCode == exitcode.Pass {
			streak++
		} else {
			streak = 0
		}
		fmt.Fprintf(progress, "converge: attempt %d (%s): %s, exit %d, %d of %d consecutive passes%s\n",
			len(l.rec.Attempts), a.RunID, a.Verdict, a.ExitCode, streak, l.rec.Need, reasonSuffix(reports.Printable(a.Reason)))
		switch {
		case streak >= l.rec.Need:
			l.finish(true, fmt.Sprintf("%d consecutive passes after %d attempts in %s", streak, len(l.rec.Attempts), time.Since(l.start).Round(time.Second)))
		case a.ExitCode == exitcode.InvalidInput:
			l.finish(false, "attempt "+a.RunID+" found the scenario invalid (exit 4): repeating cannot help")
		case ctx.Err() != nil || a.ExitCode == exitcode.Interrupted:
			interrupted = true
			l.finish(false, "interrupted")
		case !time.Now().Before(l.deadline):
			l.finish(false, fmt.Sprintf("%d consecutive passes of %d when --within %s ended, after %d attempts", streak, l.rec.Need, l.rec.Within, len(l.rec.Attempts)))
		default:
			if a.ExitCode != exitcode.Pass {
				fails++
				wait := min(l.backoff(fails), time.Until(l.deadline))
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
				}
			} else {
				fails = 0
			}
			if ctx.Err() != nil {
				// Ctrl-C between attempts: no new attempt starts.
				interrupted = true
				l.finish(false, fmt.Sprintf("interrupted after %d attempts", len(l.rec.Attempts)))
				break
			}
			continue
		}
		break
	}
	out := Outcome{Report: l.rep, Dir: l.dir, Source: l.source, Converge: l.rec, Err: err, Loaded: true}
	if l.rep == nil {
		return out
	}
	// The last attempt's report, now with the gate's outcome and exit code.
	rep := l.rep
	switch {
	case l.rec.Converged:
		rep.ExitCode = exitcode.Pass
	case interrupted:
		rep.ExitCode = exitcode.Interrupted
	}
	if !l.rec.Converged {
		// The last attempt may have passed, but not N in a row in time.
		NotConverged(rep)
	}
	return out
}

// NotConverged makes the verdict of a gate that did not converge no
// PASS: it did not see the mesh converge, whatever passed on the way and
// whatever statistics.inconclusive lets an INCONCLUSIVE run do. A run
// that PASSed the gate (exit 0, or its gate) becomes INCONCLUSIVE; an
// interrupted, failed or invalid run keeps its exit code. Both gates
// apply it: the loop of runs and the runner after a gate over one run's
// windows.
func NotConverged(rep *reports.Report) {
	if rep.ExitCode == exitcode.Pass {
		rep.ExitCode = exitcode.Inconclusive
	}
	if rep.Gate == assert.Pass {
		// report.json and junit.xml say what the exit code says.
		rep.Gate = assert.Inconclusive
	}
}

func (l *Loop) last() *reports.Attempt {
	if len(l.rec.Attempts) == 0 {
		return nil
	}
	return &l.rec.Attempts[len(l.rec.Attempts)-1]
}

func (l *Loop) finish(converged bool, reason string) {
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

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return " — " + r
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}
