package converge

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/judge"
	"github.com/mesh-verify/mesh-verify/meshconfig"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// Calibration of a converge gate that judges one run's windows as they
// seal (docs/statistics.md §10.1): seeded simulated runs of a split that
// follows its VirtualService, each window's counts drawn as independent
// requests (keepAlive: false), judged by the run's own judge
// (judge.Judge with WithGateLooks, which calls assert.SplitWindows) and
// decided by Gate.Look, the rule the runner stops the attack on, and
// Gate.Finish, which sets the run's verdict. The simulation is ours; the
// decision is the shipped one.

const calHeader = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: calibration}
clusters: [{name: c1, context: kind-c1}]
target: {url: "http://127.0.0.1:1/"}
attack: {concurrency: 1, requests: 1000, keepAlive: false}
attribution: {preset: tutorial}
statistics: {confidence: 0.95}
expect:
  - split: {by: version, fromMesh: {virtualService: demo/reviews}, margin: 10%, windows: {follow: true, settle: 5s}}
`

// calEvidence is every source read, nothing wrong with it.
type calEvidence struct{ s tally.Snapshot }

func (e calEvidence) Counts(string) (tally.Snapshot, bool)     { return e.s, true }
func (e calEvidence) FromSource(string) (tally.Snapshot, bool) { return tally.Snapshot{}, false }
func (e calEvidence) ReadyPods() map[string][]string           { return nil }
func (e calEvidence) Unusable(string, bool) string             { return "" }
func (e calEvidence) MirrorCounts(*scenarios.MirrorExpect) judge.MirrorCount {
	return judge.MirrorCount{}
}

// calRun is one simulated gate: window i expects v2 at expected[i] and
// routes v2 at truth[i]; settling[i] marks the window after a change.
type calRun struct {
	expected, truth []float64
	settling        []bool
	n               int // requests per window
}

func vsVersion(rv string, v2 float64) meshconfig.Expected {
	return meshconfig.Expected{
		Ref: meshconfig.Ref{Kind: meshconfig.KindVirtualService, Namespace: "demo", Name: "reviews"}, By: "version",
		Shares: map[string]float64{"v1": 1 - v2, "v2": v2}, Model: assert.ModelWeights,
		Sources: []meshconfig.Source{{Cluster: "c1", Kind: "VirtualService", Namespace: "demo", Name: "reviews", ResourceVersion: rv}},
	}
}

// draw draws one run: the version in force in each window and its counts.
func (c calRun) draw(rng *rand.Rand) ([]judge.MeshWindow, []tally.WindowCounts) {
	start := time.Unix(1_800_000_000, 0)
	var mesh []judge.MeshWindow
	var counts []tally.WindowCounts
	rv := 1
	for i := range c.expected {
		if i > 0 && c.expected[i] != c.expected[i-1] {
			rv++
		}
		at := start.Add(time.Duration(i) * time.Second)
		mesh = append(mesh, judge.MeshWindow{Start: at, Settling: c.settling[i], Expected: vsVersion(fmt.Sprint(rv), c.expected[i])})
		var v2 int64
		for range c.n {
			if rng.Float64() < c.truth[i] {
				v2++
			}
		}
		counts = append(counts, tally.WindowCounts{Start: at,
			Dimensions: map[string]assert.Counts{"version": {Buckets: []string{"v1", "v2"}, N: []int64{int64(c.n) - v2, v2}}}})
	}
	return mesh, counts
}

// judgeWindows judges the windows drawn as the run's judge does at the
// gate's level (looks; 0: the plain windows rule, each window's PASS at
// α).
func judgeWindows(t *testing.T, sc *scenarios.Scenario, mesh []judge.MeshWindow, counts []tally.WindowCounts, looks int) []reports.Window {
	t.Helper()
	var total int64
	for _, c := range counts {
		total += c.Dimensions["version"].Total()
	}
	sp := sc.Expect[0].Split
	j := judge.New(sc, judge.Attack{Connections: 1}).WithMesh(judge.Mesh{sp.FromMesh: {Expected: mesh[0].Expected, Windows: mesh}}).WithGateLooks(looks)
	start := counts[0].Start
	snap := tally.Snapshot{Start: start, SliceWidth: time.Second, Slices: make([]tally.Slice, len(counts)), Total: total, Windows: counts}
	r := j.Evaluate(calEvidence{snap}, -1, 0)[0]
	if r.Windows == nil {
		t.Fatalf("no windows judged: %s", r.Reason)
	}
	return r.Windows.Windows
}

func (c calRun) judged(t *testing.T, sc *scenarios.Scenario, rng *rand.Rand, looks int) []reports.Window {
	mesh, counts := c.draw(rng)
	return judgeWindows(t, sc, mesh, counts, looks)
}

// gateOutcome is the gate's verdict on one run, reached as the runner
// reaches it: the windows seal one at a time and Gate.Look, the live
// rule, looks at each and stops the attack once decided; then
// Gate.Finish decides on the windows the run had by then and sets the
// split's verdict, which the run's verdict and exit code are made of.
// The live and final decisions must agree (the counts do not change
// after a window sealed here).
func gateOutcome(t *testing.T, ws []reports.Window, need, looks int) assert.Verdict {
	t.Helper()
	g := Gate{Need: need, Within: time.Duration(looks) * time.Second, Window: time.Second, Expectation: "gate"}
	n, stopped := len(ws), StopDeadline
	var live *Decision
	for i := range ws {
		ds, decided := g.Look(ws[:i+1], i, false)
		if decided {
			d := ds[len(ds)-1]
			live, n, stopped = &d, i+1, StopConverged
			if d.Spent {
				stopped = StopLooksSpent
			}
			break
		}
	}
	rep := &reports.Report{Expectation: []reports.Expectation{{Name: "gate", Confidence: 0.95, Windows: &reports.Windows{Windows: ws[:n]}}}}
	g.Finish(rep, stopped, live)
	if len(rep.Warnings) > 0 {
		t.Fatalf("the final decision differs from the live one: %q", rep.Warnings)
	}
	return rep.Expectation[0].Verdict
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// maxRate is the most times an event of probability alpha may be seen in
// runs runs before the test calls it more likely than alpha: its
// binomial mean plus 3.1 standard deviations (one-sided, about 99.9%).
func maxRate(alpha float64, runs int) int {
	return int(alpha*float64(runs) + 3.1*math.Sqrt(alpha*(1-alpha)*float64(runs)))
}

// TestCalibrationConvergeGate: a gate of 10 looks (--within 100s,
// --converge-window 10s) at α = 0.05.
//
//   - A wrong split, every window 10⁻⁶ beyond its band's upper edge (60%
//     of 50% ± 10 points): the gate PASSes at most α of the time with
//     need 1, the easiest gate to pass falsely; judging each window at α
//     instead (no spending) passes it far more often.
//   - A correct split on its band's edge in every window, with a change
//     90/10 → 50/50 after window 2 (a settling window): the gate FAILs at
//     most α of the time (need 2), and so does any window. Routed
//     exactly as configured, it converges in most runs (the power).
//
// Windows are judged once each and the gate stops at the first streak:
// the levels are fixed by the looks, so a window's verdict is the same
// whether judged as it sealed or with every window (checked here).
func TestCalibrationConvergeGate(t *testing.T) {
	t.Parallel()
	sc, err := scenarios.Parse("calibration.yaml", []byte(calHeader))
	if err != nil {
		t.Fatal(err)
	}
	const looks, alpha = 10, 0.05
	runs := 400
	if testing.Short() {
		runs = 150
	}
	rng := rand.New(rand.NewPCG(25, 1))
	wrong := calRun{expected: repeat(0.5, looks), truth: repeat(0.6+1e-6, looks), settling: make([]bool, looks), n: 300}
	correct := calRun{expected: append([]float64{0.1, 0.1}, repeat(0.5, looks-1)...), n: 300}
	correct.truth = append([]float64{0.2, 0.2, 0.3}, repeat(0.6, looks-2)...) // the band's upper edge; window 3 settles
	correct.settling = make([]bool, looks+1)
	correct.settling[2] = true
	// The same rollout routed exactly as configured: the power.
	exact := correct
	exact.truth = append([]float64{0.1, 0.1, 0.3}, repeat(0.5, looks-2)...)

	falsePass, falsePassPlain, falseFail, anyFail, passes := 0, 0, 0, 0, 0
	for run := range runs {
		ws := wrong.judged(t, sc, rng, looks)
		if gateOutcome(t, ws, 1, looks) == assert.Pass {
			falsePass++
		}
		if plain := wrong.judged(t, sc, rng, 0); gateOutcome(t, plain, 1, looks) == assert.Pass {
			falsePassPlain++
		}
		mesh, counts := correct.draw(rng)
		cs := judgeWindows(t, sc, mesh, counts, looks)
		switch gateOutcome(t, cs, 2, looks) {
		case assert.Fail:
			falseFail++
		}
		if gateOutcome(t, exact.judged(t, sc, rng, looks), 2, looks) == assert.Pass {
			passes++
		}
		for _, w := range cs {
			if w.Judged && w.Verdict == assert.Fail {
				anyFail++
				break
			}
		}
		if run < 5 {
			// As the windows seal: the first i windows judged alone
			// give the verdicts the whole run's judgement gave them.
			for i := 1; i <= len(cs); i++ {
				part := judgeWindows(t, sc, mesh[:i], counts[:i], looks)
				for k := range part {
					if part[k].Verdict != cs[k].Verdict || part[k].Judged != cs[k].Judged {
						t.Fatalf("run %d: window %d judged with %d windows: %s, with all %d: %s", run, k+1, i, part[k].Verdict, len(cs), cs[k].Verdict)
					}
				}
			}
		}
	}
	t.Logf("%d runs of a 10-look gate: wrong split (60%%+1e-6 for 50%% ± 10): false PASS %d (need 1; %d judging each window at α); correct on the edge: false FAIL %d (a window FAILed in %d); exactly as configured: converged %d",
		runs, falsePass, falsePassPlain, falseFail, anyFail, passes)
	if limit := maxRate(alpha, runs); falsePass > limit || falseFail > limit || anyFail > limit {
		t.Errorf("false PASS %d, false FAIL %d (a window FAILed: %d) in %d runs: more than %d, the most α = %g allows", falsePass, falseFail, anyFail, runs, limit, alpha)
	}
	if falsePassPlain <= maxRate(alpha, runs) {
		t.Errorf("judging each window at α passed a wrong split only %d times in %d runs: the test cannot tell spending from none", falsePassPlain, runs)
	}
	if passes < runs/2 {
		t.Errorf("a split routed as configured converged in %d of %d runs: too little power to show anything", passes, runs)
	}
}
