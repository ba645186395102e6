package runner

import (
	"context"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/converge"
	"github.com/mesh-verify/mesh-verify/judge"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// GateSplit is the split a converge gate can judge in the windows of one
// run, as they seal: the split whose expected shares come from a mesh
// object it follows (split.fromMesh with split.windows.follow: true), in
// a run from this process (attack.workers 0: a distributed run is
// re-run whole). "" and why not when there is none: `run --converge`
// then re-runs whole scenarios (README.md "CI gate").
func GateSplit(sc *scenarios.Scenario) (name, why string) {
	for _, e := range sc.Expect {
		sp := e.Split
		if sp == nil || sp.FromMesh == nil || sp.Windows == nil || !sp.Windows.Follow {
			continue
		}
		if sc.Attack.Workers > 0 {
			return "", fmt.Sprintf("split %q follows its mesh object, but attack.workers %d runs the attack from worker pods, which a gate does not stop early", e.Name, sc.Attack.Workers)
		}
		return e.Name, ""
	}
	return "", "no split follows the mesh object its shares come from (split.fromMesh with split.windows.follow: true)"
}

// gateScenario is the scenario a converge gate runs: its attack lasts
// --within (the gate stops it earlier when it converges).
func gateScenario(sc *scenarios.Scenario, g *converge.Gate) *scenarios.Scenario {
	c := *sc
	c.Attack.Duration = scenarios.Duration{Duration: g.Within}
	c.Attack.Requests, c.Attack.Repetitions = 0, 0
	// Early stopping has its own looks; the gate's are the windows.
	c.Statistics.Stop = ""
	return &c
}

// gateFollowed reports whether the gate's split is followed: its object
// defined a split when the run read it (readMesh).
func gateFollowed(follow []meshQuery, g *converge.Gate) bool {
	for _, mq := range follow {
		if mq.name == g.Expectation {
			return true
		}
	}
	return false
}

// gateWatch judges a followed split's windows as they seal, with the
// run's own judge at the gate's level (assert.GateLevel), and tells the
// run to stop the attack once the gate is decided.
type gateWatch struct {
	g     converge.Gate
	tl    *tally.Tally
	start time.Time
	// seal is how long after a window's end it is judged: the tally's
	// hold, which lets the answers of a cut in the past land, and
	// converge.SealMargin for the attribution queue.
	seal time.Duration
	// windows returns the expected split of each window so far (the
	// follower's); judge judges the windows of body against them.
	windows func() []judge.MeshWindow
	judge   func(body tally.Snapshot, mesh []judge.MeshWindow) (*reports.Windows, string)
	w       io.Writer
	// unjudged: why the sealed windows could not be judged was printed,
	// once, not at every look (the final report gives the reason whole).
	unjudged bool

	// sealed is the windows judged, last their judgement.
	sealed   int
	last     []reports.Window
	decision *converge.Decision
}

// look judges the windows sealed by now that were not judged yet, prints
// a line for each, and reports whether the gate is decided (converged,
// or every look spent).
func (gw *gateWatch) look(now time.Time) bool {
	// Whether a window sealed is told from the windows' starts alone: the
	// whole tally is copied only when there is something to judge, not at
	// every tick.
	starts := gw.tl.WindowStarts()
	mesh := gw.windows()
	n := 0
	// The last window is open; one before is sealed once the next began
	// a seal ago.
	for n+1 < len(starts) && n < len(mesh) && !now.Before(starts[n+1].Add(gw.seal)) {
		n++
	}
	if n <= gw.sealed {
		return false
	}
	body := gw.tl.Snapshot()
	all := body.Windows
	if len(all) <= n {
		return false // cannot happen: windows are only added
	}
	body.Windows = all[:n]
	ws, why := gw.judge(body, mesh[:n])
	if ws == nil || len(ws.Windows) != n {
		// The split is judged without its windows (a window's object
		// defined no split, say): the gate cannot decide on windows,
		// and the run's final judgement says what it is. Said once, as
		// it would otherwise stay silent to --within.
		if !gw.unjudged {
			gw.unjudged = true
			fmt.Fprintf(gw.w, "converge: the sealed windows cannot be judged one by one: %s\n", reports.Printable(why))
		}
		return false
	}
	// The judge ends the last window given with the run's last answer;
	// it ended where the next began.
	ws.Windows[n-1].End = all[n].Start.Sub(gw.start)
	gw.last = ws.Windows
	// A change the follower cut after the sealed windows voids a streak
	// before it: the gate's passes must follow the last change.
	pending := false
	for j := n; j < len(mesh); j++ {
		pending = pending || converge.Changed(mesh[j-1].Expected.Shares, mesh[j].Expected.Shares, mesh[j].Settling)
	}
	ds, decided := gw.g.Look(ws.Windows, gw.sealed, pending)
	for k, d := range ds {
		fmt.Fprintln(gw.w, converge.Progress(ws.Windows[gw.sealed+k], d, gw.g.Need))
	}
	gw.sealed = n
	if decided {
		d := ds[len(ds)-1]
		gw.decision = &d
	}
	return decided
}

// run looks every tick until ctx ends or the gate is decided, then
// calls stop.
func (gw *gateWatch) run(ctx context.Context, tick time.Duration, stop func()) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if gw.look(now) {
				stop()
				return
			}
		}
	}
}

// gateTick is how often the gate looks for windows that sealed.
const gateTick = 250 * time.Millisecond

// newGateWatch watches the windows f cuts for the split mq with the
// run's judge of every expectation, at the gate's level.
func newGateWatch(o Options, sc *scenarios.Scenario, ao attack.Options, mesh judge.Mesh, mq meshQuery, f *follower, tl *tally.Tally, start time.Time) *gateWatch {
	w := o.Progress
	if w == nil {
		w = io.Discard
	}
	return &gateWatch{g: *o.Gate, tl: tl, start: start, seal: f.hold() + converge.SealMargin, windows: f.snapshot, w: w,
		judge: func(body tally.Snapshot, mw []judge.MeshWindow) (*reports.Windows, string) {
			// A judge of its own, with the windows so far: the run's
			// reads its mesh map after the attack.
			m := maps.Clone(mesh)
			ms := m[mq.src]
			ms.Windows = mw
			m[mq.src] = ms
			j := newJudge(sc, ao)
			j.WithMesh(m)
			j.WithGateLooks(o.Gate.Looks())
			for _, e := range j.evaluate(evidence{body: body}, -1) {
				if e.Name == mq.name {
					return e.Windows, e.Verdict.String() + ": " + e.Reason
				}
			}
			return nil, "no expectation " + mq.name
		}}
}

// stopped is why the attack ended, for report.json.
func (gw *gateWatch) stopped(ctx context.Context) string {
	switch {
	case gw.decision != nil && gw.decision.Converged:
		return converge.StopConverged
	case gw.decision != nil && gw.decision.Spent:
		return converge.StopLooksSpent
	case ctx.Err() != nil:
		return converge.StopInterrupted
	}
	return converge.StopDeadline
}
