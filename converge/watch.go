package converge

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/reports"
)

// Limits of a gate that judges windows as they seal.
const (
	// DefaultWindow is the length of the windows the gate cuts between
	// changes of the expected shares (--converge-window).
	DefaultWindow = 10 * time.Second
	// MinWindow is the shortest: the tally's timeline has a one-second
	// resolution, and a shorter window holds too few requests.
	MinWindow = time.Second
	// SealMargin is how long after a window's end, beyond the tally's
	// hold, the gate waits before it judges the window: an answer is
	// counted when the attribution workers have read its body, a little
	// after it came (docs/statistics.md §10.1).
	SealMargin = time.Second
)

// Looks is the number of windows a gate of within with windows of window
// may judge, ⌈within/window⌉: fixed before the run, so the level every
// window is judged at (assert.GateLevel) does not depend on what the
// windows show. A change of the expected shares cuts a window short and
// so uses a look; windows past the last look are not judged by the gate.
func Looks(within, window time.Duration) int {
	if window <= 0 {
		return 0
	}
	return int((within + window - 1) / window)
}

// CheckWindow validates --converge-window against --within and the
// followed split's poll (split.windows.poll): at least MinWindow, at
// least the poll, and at most assert.MaxWindows looks. The follower cuts
// a window when a read of the object finds the version unchanged, so a
// window shorter than the poll would last the poll: fewer looks than
// counted, and windows longer than the gate says.
func CheckWindow(within, window, poll time.Duration) error {
	switch {
	case window < MinWindow:
		return fmt.Errorf("--converge-window %s: want at least %s", window, MinWindow)
	case window < poll:
		return fmt.Errorf("--converge-window %s: shorter than split.windows.poll %s, how often the followed object is read, where windows are cut", window, poll)
	case window > within:
		return fmt.Errorf("--converge-window %s: longer than --within %s, no window could seal in time", window, within)
	case Looks(within, window) > assert.MaxWindows:
		return fmt.Errorf("--converge-window %s over --within %s: %d looks, at most %d (each look spends α/looks)", window, within, Looks(within, window), assert.MaxWindows)
	}
	return nil
}

// Decision is what the gate made of the windows sealed so far.
type Decision struct {
	// Converged: Need consecutive judged windows PASSed after the last
	// change of the expected shares; Window is the 0-based index of the
	// last of them.
	Converged bool
	Window    int
	// Spent: every look was judged without converging; no later
	// window can make the gate PASS.
	Spent bool
	// Looks is the judged windows counted as looks, Streak the
	// consecutive PASSes after the last change.
	Looks, Streak int
	// Change is the 0-based index of the window the last change of the
	// expected shares opened, -1 when none did.
	Change int
	// Failed are the 0-based windows after the last change that FAILed.
	Failed []int
}

// Decide is the gate's rule over the windows sealed so far, in order, as
// the judge judged them (each at assert.GateLevel): a window that a
// change of the expected shares opened (Changed: a settling window, or new
// shares) restarts the count, also after the gate converged, since the N
// passes must follow the last change; a judged window that PASSes adds
// to the streak, any other verdict resets it; the gate converges at the
// need-th PASS in a row, and the windows after it are no look unless a
// change follows. Windows without requests or settling are no look. Past
// looks judged windows, nothing more is counted (Spent).
func Decide(ws []reports.Window, need, looks int) Decision {
	d := Decision{Window: -1, Change: -1}
	for i, w := range ws {
		if i == 0 && w.Settling || i > 0 && Changed(ws[i-1].Expected, w.Expected, w.Settling) {
			// The looks already judged stay spent.
			d = Decision{Window: -1, Change: i, Looks: d.Looks}
		}
		if !w.Judged || d.Converged {
			continue
		}
		if looks > 0 && d.Looks == looks {
			d.Spent = true
			return d
		}
		d.Looks++
		switch w.Verdict {
		case assert.Pass:
			d.Streak++
		case assert.Fail:
			d.Streak = 0
			d.Failed = append(d.Failed, i)
		default:
			d.Streak = 0
		}
		if d.Streak >= need {
			d.Converged, d.Window = true, i
		}
	}
	if !d.Converged && looks > 0 && d.Looks >= looks {
		d.Spent = true
	}
	return d
}

// Changed reports whether a window expecting cur, settling or not, opens
// a change after one expecting prev: the rule Decide restarts its count
// by, for the runner to apply to windows cut but not sealed yet.
func Changed(prev, cur map[string]float64, settling bool) bool {
	return settling || !maps.Equal(prev, cur)
}

// Look is the gate's live rule, as the runner applies it while the
// attack runs: ws are the windows sealed so far, judged, of which the
// first from were looked at before; pending reports whether a window cut
// after them, not sealed yet, opens a change (Changed). It decides after
// each new window in turn, as if that one had just sealed, and stops at
// the first that decides the gate: every look spent, or converged with
// no change after the streak, sealed or pending (a rollout that moved on
// meanwhile is judged on its new weight). It returns the decision after
// each window it looked at and whether the gate is decided, which stops
// the attack.
func (g Gate) Look(ws []reports.Window, from int, pending bool) (ds []Decision, decided bool) {
	for i := from; i < len(ws); i++ {
		d := Decide(ws[:i+1], g.Need, g.Looks())
		ds = append(ds, d)
		if d.Spent {
			return ds, true
		}
		if d.Converged && !pending && !changedAfter(ws, i) {
			return ds, true
		}
	}
	return ds, false
}

// changedAfter reports whether a window after the i-th opens a change.
func changedAfter(ws []reports.Window, i int) bool {
	for j := i + 1; j < len(ws); j++ {
		if Changed(ws[j-1].Expected, ws[j].Expected, ws[j].Settling) {
			return true
		}
	}
	return false
}

// Stop reasons of a gate that judged windows as they sealed.
const (
	StopConverged   = "converged"
	StopDeadline    = "deadline"
	StopLooksSpent  = "looks spent"
	StopInterrupted = "interrupted"
	// StopNotFollowed: the split's object defined no split the requests
	// take when the run read it, so nothing was followed and the run kept
	// its scenario's attack.
	StopNotFollowed = "not followed"
)

// Gate is a converge gate that judges the windows of one run as they seal
// (`run --converge N --within D` with a watchable split).
type Gate struct {
	Need   int
	Within time.Duration
	Window time.Duration
	// Expectation is the name of the split whose windows the gate judges.
	Expectation string
}

// Looks is the gate's number of looks.
func (g Gate) Looks() int { return Looks(g.Within, g.Window) }

// Finish decides the gate on the run's final windows (the judge's,
// every answer counted) and puts it in rep: rep.Converge says why the
// attack stopped, whether and when it converged, and the split's verdict
// becomes the gate's, for finish to make the run's verdict and exit code
// of. stopped is why the attack ended (Stop…); live is the decision that
// stopped it early, if one did. It returns the decision.
func (g Gate) Finish(rep *reports.Report, stopped string, live *Decision) Decision {
	c := &reports.Converge{Need: g.Need, Within: g.Within, Mode: reports.ConvergeWindows, Window: g.Window, Looks: g.Looks(),
		Stopped: stopped, Done: true}
	rep.Converge = c
	var exp *reports.Expectation
	for i := range rep.Expectation {
		if rep.Expectation[i].Name == g.Expectation {
			exp = &rep.Expectation[i]
		}
	}
	if exp == nil || exp.Windows == nil {
		c.Reason = fmt.Sprintf("expectation %q: no windows were judged", g.Expectation)
		if exp != nil {
			c.Reason += ": " + exp.Reason
		}
		return Decision{Window: -1, Change: -1}
	}
	c.Level = assert.GateLevel(exp.Confidence, c.Looks)
	ws := exp.Windows.Windows
	d := Decide(ws, g.Need, c.Looks)
	c.Judged = d.Looks
	if d.Change >= 0 {
		c.LastChange = d.Change + 1
		at := ws[d.Change].Start
		c.ChangeAt = &at
	}
	for _, i := range d.Failed {
		c.FailedWindows = append(c.FailedWindows, i+1)
	}
	if live != nil && live.Converged && (!d.Converged || d.Window != live.Window) {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("converge: the gate stopped the attack when window %d completed %d consecutive passes, but with every answer counted the windows decide otherwise: an answer came more than the hold and %s after its window ended", live.Window+1, g.Need, SealMargin))
	}
	from := "the attack's start"
	if c.ChangeAt != nil {
		from = fmt.Sprintf("the change at %s (window %d)", offset(*c.ChangeAt), c.LastChange)
	}
	switch {
	case d.Converged:
		end := ws[d.Window].End
		since := end
		if c.ChangeAt != nil {
			since = end - *c.ChangeAt
		}
		c.Converged, c.ConvergedAt, c.TimeToConverge = true, &end, &since
		c.Windows = streakWindows(ws, d.Window, g.Need)
		exp.Verdict = assert.Pass
		exp.Reason = fmt.Sprintf("converge gate: %d consecutive windows PASS after %s (windows %s, each at %s): converged at %s, %s after it",
			g.Need, from, joinInts(c.Windows), reports.Level(c.Level), offset(end), offset(since))
	case d.Failed != nil:
		exp.Verdict = assert.Fail
		exp.Reason = fmt.Sprintf("converge gate: not %d consecutive passes after %s by %s: window%s %s FAILed (each at %s)",
			g.Need, from, gateEnd(stopped, g.Within), plural(len(d.Failed)), joinInts(c.FailedWindows), reports.Level(c.Level))
	default:
		exp.Verdict = assert.Inconclusive
		exp.Reason = fmt.Sprintf("converge gate: %d consecutive passes of %d after %s by %s, no window FAILed (%d of %d looks judged)",
			d.Streak, g.Need, from, gateEnd(stopped, g.Within), d.Looks, c.Looks)
	}
	c.Reason = exp.Reason
	return d
}

// streakWindows are the 1-based numbers of the need judged windows that
// end at last.
func streakWindows(ws []reports.Window, last, need int) []int {
	var out []int
	for i := last; i >= 0 && len(out) < need; i-- {
		if ws[i].Judged {
			out = append([]int{ws[i].Index}, out...)
		}
	}
	return out
}

func gateEnd(stopped string, within time.Duration) string {
	switch stopped {
	case StopLooksSpent:
		return "the last look"
	case StopInterrupted:
		return "the interruption"
	}
	return "--within " + within.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ", ")
}

// offset is a time after the attack's start, to the tenth of a second.
func offset(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }

// Progress is the line a gate prints when a window seals.
func Progress(w reports.Window, d Decision, need int) string {
	s := fmt.Sprintf("converge: window %d (%s–%s): %s", w.Index, offset(w.Start), offset(w.End), w.Verdict)
	if !w.Judged {
		s = fmt.Sprintf("converge: window %d (%s–%s): not judged", w.Index, offset(w.Start), offset(w.End))
	}
	return s + fmt.Sprintf(", %d of %d consecutive passes", d.Streak, need)
}
