package runner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/converge"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/judge"
	"github.com/mesh-verify/mesh-verify/measure"
	"github.com/mesh-verify/mesh-verify/meshconfig"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/tally"
)

// gateRig is a gate watch over a real tally and the runner's real judge
// of a followed split; the windows' expected splits are the test's
// instead of a follower's reads (a fake of the reads: the lab test
// TestConvergeOneRunAfterPush follows a real VirtualService).
type gateRig struct {
	t     *testing.T
	tl    *tally.Tally
	gw    *gateWatch
	start time.Time
	out   *strings.Builder

	mu   sync.Mutex
	mesh []judge.MeshWindow
}

const rigHold = 300 * time.Millisecond

func newGateRig(t *testing.T, need int) *gateRig {
	t.Helper()
	sc := load(t, "http://127.0.0.1:1", "  rate: 10/s\n  duration: 10s", "  confidence: 0.95",
		"  - split: {by: cluster, fromMesh: {trafficRoute: test-server}, margin: 10%, windows: {follow: true, settle: 0s}}")
	e := sc.Expect[0]
	// Everything happened a minute ago: the tally's hold (real time) is
	// over for every answer, and the test moves the gate's clock.
	start := time.Now().Add(-time.Minute)
	r := &gateRig{t: t, tl: tally.New(start, time.Minute), start: start, out: &strings.Builder{}}
	mq := meshQuery{name: e.Name, src: e.Split.FromMesh}
	mesh := judge.Mesh{mq.src: {Expected: split(0.9, "1")}}
	g := &converge.Gate{Need: need, Within: 10 * time.Second, Window: time.Second, Expectation: e.Name}
	f := &follower{poll: 100 * time.Millisecond, readTimeout: 100 * time.Millisecond}
	if f.hold() != rigHold {
		t.Fatalf("hold %s", f.hold())
	}
	if err := r.tl.SetHold(f.hold()); err != nil {
		t.Fatal(err)
	}
	r.gw = newGateWatch(Options{Gate: g, Progress: r.out}, sc, measure.AttackConfig(sc, "", ""), mesh, mq, f, r.tl, start)
	r.gw.windows = func() []judge.MeshWindow {
		r.mu.Lock()
		defer r.mu.Unlock()
		return append([]judge.MeshWindow(nil), r.mesh...)
	}
	return r
}

func split(c1 float64, rv string) meshconfig.Expected {
	return meshconfig.Expected{Shares: map[string]float64{"c1": c1, "c2": 1 - c1}, Sources: []meshconfig.Source{{Kind: "TrafficRoute", ResourceVersion: rv}}}
}

// cut starts a window at at (after the start) expecting c1's share.
func (r *gateRig) cut(at time.Duration, c1 float64, rv string, settling bool) {
	r.t.Helper()
	if _, err := r.tl.Cut(r.start.Add(at)); err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.mesh = append(r.mesh, judge.MeshWindow{Start: r.start.Add(at), Settling: settling, Expected: split(c1, rv)})
	r.mu.Unlock()
}

// answer adds n answers that came from at on, c1 answering every
// 1/c1-th, each a draw of its own (no connection).
func (r *gateRig) answer(at time.Duration, n int, c1 float64) {
	for i := range n {
		c := "c2"
		if float64(i%100) < 100*c1 {
			c = "c1"
		}
		r.tl.Add(&attack.Result{Result: &vegeta.Result{Timestamp: r.start.Add(at + time.Duration(i)*time.Microsecond), Latency: time.Millisecond, Code: 200}},
			attribution.Identity{Cluster: c, Pod: c + "-0"})
	}
}

// changeAtOne plays window 1, 90/10 as the object said, and window 2,
// opened when a change to 50/50 was seen at the second second, settling.
func (r *gateRig) changeAtOne() {
	r.cut(0, 0.9, "1", false)
	r.answer(0, 1000, 0.9)
	r.cut(time.Second, 0.5, "2", true)
	r.answer(time.Second, 200, 0.7)
}

// sealAt is when the window starting at next's predecessor seals: next's
// start plus the hold and the margin.
func sealAt(r *gateRig, next time.Duration) time.Time {
	return r.start.Add(next + rigHold + converge.SealMargin)
}

// The live loop of a converge gate: a window is judged once the next one
// began a hold and a margin ago, so an answer that came late, within
// that, is in it; a settling window cut in the past by a change keeps the
// window before it open; a change restarts the count, and the gate
// converges at the need-th PASS in a row after it.
func TestGateWatchJudgesWindowsAsTheySeal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		last      float64 // window 4's c1 share (expected 50%)
		converged bool
		failed    []int
	}{
		{"converges after the change", 0.5, true, nil},
		{"a window after the change FAILs", 0.9, false, []int{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newGateRig(t, 2)
			r.changeAtOne()
			if r.gw.look(sealAt(r, time.Second).Add(-time.Millisecond)) || r.gw.sealed != 0 {
				t.Fatalf("window 1 judged before its seal (%d sealed)", r.gw.sealed)
			}
			if r.gw.look(sealAt(r, time.Second)) || r.gw.sealed != 1 {
				t.Fatalf("window 1 not judged at its seal (%d sealed)", r.gw.sealed)
			}
			// Window 3 (2s–3s) at 50/50; a change seen late cut window
			// 4 in the past: window 3 stays open until 4's start.
			r.cut(2*time.Second, 0.5, "2", false)
			r.answer(2*time.Second, 1000, 0.5)
			if r.gw.look(sealAt(r, 2*time.Second)) || r.gw.sealed != 2 {
				t.Fatalf("%d sealed, want the settling window too", r.gw.sealed)
			}
			r.cut(3*time.Second, 0.5, "2", false)
			if r.gw.look(sealAt(r, 3*time.Second).Add(-time.Millisecond)) || r.gw.sealed != 2 {
				t.Fatalf("window 3 judged before its seal")
			}
			// A late answer of window 3, within the hold and margin.
			r.answer(3*time.Second-2*time.Millisecond, 1, 1)
			r.answer(3*time.Second, 1000, tc.last)
			if r.gw.look(sealAt(r, 3*time.Second)) || r.gw.sealed != 3 {
				t.Fatalf("window 3 not judged at its seal")
			}
			if w := r.gw.last[2]; w.Split.N != 1001 || w.Verdict != assert.Pass || w.End != 3*time.Second {
				t.Fatalf("window 3: %d requests, %s, ends %s; want the late answer in it, PASS, ending at 3s", w.Split.N, w.Verdict, w.End)
			}
			r.cut(4*time.Second, 0.5, "2", false)
			decided := r.gw.look(sealAt(r, 4*time.Second))
			if decided != tc.converged {
				t.Fatalf("decided %v after window 4, want %v:\n%s", decided, tc.converged, r.out)
			}
			d := converge.Decide(r.gw.last, 2, r.gw.g.Looks())
			if d.Converged != tc.converged || d.Change != 1 || !slices.Equal(d.Failed, tc.failed) {
				t.Errorf("decision %+v", d)
			}
			if tc.converged && (r.gw.decision == nil || r.gw.decision.Window != 3 || r.gw.stopped(context.Background()) != converge.StopConverged) {
				t.Errorf("gate decision %+v", r.gw.decision)
			}
			if n := strings.Count(r.out.String(), "converge: window "); n != 4 {
				t.Errorf("%d progress lines, want one per window:\n%s", n, r.out)
			}
		})
	}
}

// run stops the attack as soon as the gate converges, and not at all
// when it does not by the deadline (the attack's own end).
func TestGateWatchRunStops(t *testing.T) {
	t.Parallel()
	for _, converges := range []bool{true, false} {
		r := newGateRig(t, 2)
		share := 0.5
		if !converges {
			share = 0.9
		}
		for i := range 4 {
			r.cut(time.Duration(i)*time.Second, 0.5, "1", false)
			r.answer(time.Duration(i)*time.Second, 1000, share)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		stopped := make(chan struct{})
		begin := time.Now()
		r.gw.run(ctx, 10*time.Millisecond, func() { close(stopped) })
		cancel()
		select {
		case <-stopped:
			if !converges {
				t.Errorf("the attack was stopped without converging")
			}
			if took := time.Since(begin); took > time.Second {
				t.Errorf("stopped after %s, want at the first look", took)
			}
		default:
			if converges {
				t.Errorf("a gate that converged did not stop the attack:\n%s", r.out)
			}
			if got := r.gw.stopped(context.Background()); got != converge.StopDeadline {
				t.Errorf("stopped %q, want the deadline", got)
			}
		}
	}
}

// A window that completes the streak does not stop the attack when the
// follower already cut a change after it, not sealed yet: the rollout
// moved on, and the gate judges the new weight from the change on.
func TestGateWatchChangeAfterStreak(t *testing.T) {
	t.Parallel()
	r := newGateRig(t, 1)
	r.changeAtOne()
	// Window 1 seals with the settling window 2 already cut.
	if r.gw.look(sealAt(r, time.Second)) || r.gw.sealed != 1 || r.gw.decision != nil {
		t.Fatalf("window 1 PASSed before a pending change stopped the attack (%d sealed, %+v):\n%s", r.gw.sealed, r.gw.decision, r.out)
	}
	r.cut(2*time.Second, 0.5, "2", false)
	r.answer(2*time.Second, 1000, 0.5)
	r.cut(3*time.Second, 0.5, "2", false)
	if !r.gw.look(sealAt(r, 3*time.Second)) || r.gw.decision == nil || r.gw.decision.Window != 2 || r.gw.decision.Change != 1 {
		t.Fatalf("decision %+v, want converged at window 3 after the change in window 2:\n%s", r.gw.decision, r.out)
	}
}

// A gate over one run's windows that did not converge is no PASS, also
// where statistics.inconclusive: pass lets an INCONCLUSIVE run pass (as
// the gate of whole runs); one that converged passes; an interrupted
// run keeps 130.
func TestFinishGateNotConverged(t *testing.T) {
	t.Parallel()
	// The split's verdict, and the run's gate and exit code wanted.
	type want struct {
		gate assert.Verdict
		exit int
	}
	for _, tc := range []struct {
		name                   string
		converged, interrupted bool
		verdict                assert.Verdict
		want
	}{
		{"inconclusive, not converged", false, false, assert.Inconclusive, want{assert.Inconclusive, exitcode.Inconclusive}},
		{"converged", true, false, assert.Pass, want{assert.Pass, exitcode.Pass}},
		{"failed", false, false, assert.Fail, want{assert.Fail, exitcode.Fail}},
		{"interrupted", false, true, assert.Inconclusive, want{assert.Inconclusive, exitcode.Interrupted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc := load(t, "http://127.0.0.1:1", "  rate: 10/s\n  duration: 10s", "  confidence: 0.95\n  inconclusive: pass",
				"  - split: {by: cluster, fromMesh: {trafficRoute: test-server}, margin: 10%, windows: {follow: true}}")
			rep := &reports.Report{Expectation: []reports.Expectation{{Verdict: tc.verdict}},
				Converge: &reports.Converge{Mode: reports.ConvergeWindows, Converged: tc.converged}}
			rep.Attack.Interrupted = tc.interrupted
			finish(rep, sc)
			if rep.Gate != tc.gate || rep.ExitCode != tc.exit {
				t.Errorf("gate %s exit %d, want %s %d", rep.Gate, rep.ExitCode, tc.gate, tc.exit)
			}
		})
	}
}

// A window whose object defined no split makes the whole split FAIL
// without windows: the gate cannot decide on windows and says so once,
// escaped (the reason is the cluster's), instead of staying silent until
// --within.
func TestGateWatchSaysWhyWindowsAreNotJudged(t *testing.T) {
	t.Parallel()
	r := newGateRig(t, 2)
	r.cut(0, 0.9, "1", false)
	r.answer(0, 1000, 0.9)
	r.cut(time.Second, 0.5, "2", true)
	r.mu.Lock()
	r.mesh[1].Err = errors.New("subset \"v9\x1b[2J\" is not defined")
	r.mu.Unlock()
	r.cut(2*time.Second, 0.5, "2", false)
	r.cut(3*time.Second, 0.5, "2", false)
	for _, next := range []time.Duration{2 * time.Second, 3 * time.Second} {
		if r.gw.look(sealAt(r, next)) || r.gw.decision != nil {
			t.Fatalf("decided %+v on windows that cannot be judged", r.gw.decision)
		}
	}
	out := r.out.String()
	if n := strings.Count(out, "converge: the sealed windows cannot be judged one by one: FAIL"); n != 1 || strings.Contains(out, "\x1b") || !strings.Contains(out, "is not defined") {
		t.Errorf("want the reason once, escaped:\n%q", out)
	}
}
