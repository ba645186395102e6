package converge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/reports"
)

// script is an attempt function that plays the given exit codes in turn,
// as runScenario would: Begin with a run id, then Record its report (or,
// for code -1, nothing at all: the scenario did not load; for
// code exitcode.Setup with noReport, no report and an error).
type script struct {
	l        *Loop
	codes    []int
	noReport bool
	n        int
	// onAttempt runs after the n-th attempt is recorded (cancel a context).
	onAttempt func(n int)
}

func (s *script) attempt() error {
	code := s.codes[min(s.n, len(s.codes)-1)]
	s.n++
	if code == -1 {
		return exitcode.InvalidInputf("scenario.yaml: line 3: unknown field")
	}
	s.l.Begin(fmt.Sprintf("run-%d", s.n))
	err := exitcode.Wrap(code, nil)
	if s.noReport {
		err = &exitcode.Error{Code: code, Err: errors.New("target refused\nsecond line")}
		s.l.Record(nil, "", nil, err)
	} else {
		v := map[int]assert.Verdict{exitcode.Pass: assert.Pass, exitcode.Fail: assert.Fail}[code]
		if _, ok := map[int]bool{exitcode.Pass: true, exitcode.Fail: true}[code]; !ok {
			v = assert.Inconclusive
		}
		rep := &reports.Report{RunID: fmt.Sprintf("run-%d", s.n), Verdict: v, Gate: v, ExitCode: code}
		s.l.Record(rep, "dir-"+rep.RunID, []byte("src"), err)
	}
	if s.onAttempt != nil {
		s.onAttempt(s.n)
	}
	return err
}

func TestLoop(t *testing.T) {
	t.Parallel()
	P, F, I, S := exitcode.Pass, exitcode.Fail, exitcode.Inconclusive, exitcode.Setup
	cases := []struct {
		name     string
		need     int
		within   time.Duration
		codes    []int
		noReport bool
		cancelAt int // cancel the context after this attempt (0: never)
		// pauseAt cancels the context in the pause after this many
		// failing attempts in a row, a pause of an hour: Run must end
		// at once.
		pauseAt   int
		attempts  int
		exit      int // the final report's exit code (or the error's without one)
		converged bool
		reason    string
	}{
		{"first two pass", 2, time.Minute, []int{P, P}, false, 0, 0, 2, P, true, "2 consecutive passes after 2 attempts"},
		{"a FAIL resets the streak", 2, time.Minute, []int{P, F, P, P}, false, 0, 0, 4, P, true, "2 consecutive passes after 4 attempts"},
		{"deadline after a pass is no PASS", 3, time.Nanosecond, []int{P}, false, 0, 0, 1, I, false, "1 consecutive passes of 3 when --within 1ns ended, after 1 attempts"},
		{"deadline after a FAIL keeps it", 3, time.Nanosecond, []int{F}, false, 0, 0, 1, F, false, "0 consecutive passes of 3"},
		{"invalid input stops at once", 2, time.Minute, []int{F, exitcode.InvalidInput}, false, 0, 0, 2, exitcode.InvalidInput, false, "found the scenario invalid (exit 4): repeating cannot help"},
		{"Ctrl-C during the pause", 2, time.Hour, []int{S, S, S}, false, 0, 2, 2, exitcode.Interrupted, false, "interrupted after 2 attempts"},
		{"Ctrl-C during an attempt", 2, time.Minute, []int{P, P}, false, 1, 0, 1, exitcode.Interrupted, false, "interrupted"},
		{"no report: the error is all there is", 2, time.Nanosecond, []int{S}, true, 0, 0, 1, S, false, "0 consecutive passes of 2"},
		{"scenario invalid before the first attempt", 1, time.Minute, []int{-1}, false, 0, 0, 0, exitcode.InvalidInput, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			l := New(c.need, c.within, time.Now(), WithBackoff(func(fails int) time.Duration {
				if fails == c.pauseAt {
					cancel()
					return time.Hour
				}
				return time.Millisecond
			}))
			s := &script{l: l, codes: c.codes, noReport: c.noReport, onAttempt: func(n int) {
				if n == c.cancelAt {
					cancel()
				}
			}}
			var progress strings.Builder
			start := time.Now()
			out := l.Run(ctx, s.attempt, &progress)
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("Run took %s: a pause outlived Ctrl-C", took)
			}
			if got := len(out.Converge.Attempts); got != c.attempts || s.n != max(c.attempts, 1) {
				t.Fatalf("%d attempts recorded, %d made; want %d\n%s", got, s.n, c.attempts, progress.String())
			}
			if n := strings.Count(progress.String(), "converge: attempt "); n != c.attempts {
				t.Errorf("%d progress lines, want one per attempt:\n%s", n, progress.String())
			}
			exit := exitcode.Of(out.Err, exitcode.Pass)
			if out.Report != nil {
				exit = out.Report.ExitCode
				if out.Report.Converge != out.Converge || out.Dir != "dir-"+out.Report.RunID || string(out.Source) != "src" {
					t.Errorf("the final report is not the last attempt's with the record: %+v", out)
				}
				if !c.converged && out.Report.Gate == assert.Pass {
					t.Errorf("gate PASS in report.json of a gate that did not converge")
				}
			}
			if exit != c.exit || out.Converge.Converged != c.converged || !strings.Contains(out.Converge.Reason, c.reason) {
				t.Errorf("exit %d, converged %v, reason %q; want %d, %v, %q", exit, out.Converge.Converged, out.Converge.Reason, c.exit, c.converged, c.reason)
			}
			if c.attempts > 0 && !out.Converge.Done {
				t.Errorf("the record is not marked done")
			}
			if c.noReport && (out.Loaded != true || out.Converge.Attempts[0].Reason != "target refused") {
				t.Errorf("an attempt without a report: loaded %v, reason %q (want its error's first line)", out.Loaded, out.Converge.Attempts[0].Reason)
			}
		})
	}
}

// Each attempt's report lists the attempts so far, with the current one
// in progress, before its files are written.
func TestRecordListsTheAttemptsSoFar(t *testing.T) {
	t.Parallel()
	l := New(3, time.Minute, time.Now())
	var reps []*reports.Report
	for i := range 3 {
		l.Begin(fmt.Sprint("r", i))
		rep := &reports.Report{Verdict: assert.Pass, ExitCode: exitcode.Pass}
		l.Record(rep, "", nil, nil)
		reps = append(reps, rep)
	}
	for i, rep := range reps {
		if got := len(rep.Converge.Attempts); got != i+1 || rep.Converge.Reason != fmt.Sprintf("attempt %d in progress", i+1) {
			t.Errorf("attempt %d's report lists %d attempts (%q)", i+1, got, rep.Converge.Reason)
		}
	}
}

// A FAIL attempt's one-line reason names the failing expectation, not an
// INCONCLUSIVE one listed before it; setup errors and configuration errors
// come first, on one line.
func TestAttemptReason(t *testing.T) {
	t.Parallel()
	rep := &reports.Report{Verdict: assert.Fail, ExitCode: exitcode.Fail, Expectation: []reports.Expectation{
		{Name: "split", Verdict: assert.Inconclusive, Reason: "too few connections"},
		{Name: "successRate", Verdict: assert.Fail, Reason: "50% < 99%\nmore"},
	}}
	if got := attemptReason(rep); got != "successRate: FAIL: 50% < 99%" {
		t.Errorf("attemptReason = %q, want the failing successRate on one line", got)
	}
	rep.Expectation[1].Verdict = assert.Pass
	if got := attemptReason(rep); !strings.HasPrefix(got, "split: INCONCLUSIVE") {
		t.Errorf("attemptReason = %q, want the inconclusive split", got)
	}
	rep.SetupError = "port-forward svc/x: not found\nat ..."
	if got := attemptReason(rep); got != "setup: port-forward svc/x: not found" {
		t.Errorf("attemptReason = %q, want the setup error's first line", got)
	}
}

func TestDefaultBackoff(t *testing.T) {
	t.Parallel()
	for fails, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 5: 15 * time.Second, 40: 15 * time.Second} {
		if got := DefaultBackoff(fails); got != want {
			t.Errorf("DefaultBackoff(%d) = %s, want %s", fails, got, want)
		}
	}
}
