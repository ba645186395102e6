package reports

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
)

// Windows is a split judged over time (split.windows; docs/statistics.md
// §10): every window against the shares expected in it.
type Windows struct {
	// Mode is "every" (fixed windows) or "follow" (windows that follow the
	// mesh object the expected shares are read from).
	Mode string `json:"mode"`
	// Every is the fixed windows' length; Settle the time after a change
	// of the expected shares whose requests are not judged.
	Every  time.Duration `json:"every,omitempty"`
	Settle time.Duration `json:"settle,omitempty"`
	// Judged is k, the windows judged: each window's FAIL intervals are at
	// 1-α/(buckets·k), its PASS at α (docs/statistics.md §10).
	Judged int `json:"judged"`
	// Deciding is the 1-based window that decided a FAIL or an
	// INCONCLUSIVE; 0 on a PASS.
	Deciding int      `json:"deciding,omitempty"`
	Windows  []Window `json:"windows"`
	// Converge is, for every change of the expected shares, whether and
	// within what time the split entered its band.
	Converge []Convergence `json:"converge,omitempty"`
}

// Window is one time window: from Start to End after the attack's start.
type Window struct {
	Index int           `json:"index"` // 1-based
	Start time.Duration `json:"start"`
	End   time.Duration `json:"end"`
	// Settling: the requests were sent while the data plane converged
	// after a change; described, not judged.
	Settling bool `json:"settling,omitempty"`
	Judged   bool `json:"judged"`
	// Phase places a judged window in a failover timeline, when every
	// change of the expected shares came from the ready backends (a
	// scale, a lost cluster) and not from an edit of the objects:
	// "before" the first change, "after" the last of two or more (the
	// only one: "after"), "during" in between.
	Phase string `json:"phase,omitempty"`
	// Expected is the shares expected in the window; Source the mesh
	// object they were read from, with its resourceVersion.
	Expected map[string]float64 `json:"expected"`
	Source   *WindowSource      `json:"source,omitempty"`
	Verdict  assert.Verdict     `json:"verdict"`
	Reason   string             `json:"reason"`
	// Split is the window's counts, shares with their intervals, and
	// verdict.
	Split assert.SplitResult `json:"split"`
}

// WindowSource is the mesh object whose shares held in a window.
type WindowSource struct {
	Object          string `json:"object"`
	ResourceVersion string `json:"resourceVersion"`
	// ReadAt is when the run read this version: the start, or the poll
	// that saw the change (within split.windows.poll after it was made).
	ReadAt time.Time `json:"readAt"`
}

// Convergence says how a change of the expected shares converged: the
// change was seen at At (after the attack's start); the split is shown
// inside its band from Within after it when the first judged window
// after it PASSes (an upper bound at that window's confidence), shown
// outside it (NotConverged, naming that window) when it FAILs, and
// unknown otherwise.
type Convergence struct {
	At              time.Duration `json:"at"`
	ResourceVersion string        `json:"resourceVersion,omitempty"`
	// Change is the 1-based window the change opened (its settling
	// window).
	Change int `json:"change,omitempty"`
	// Cause is what changed the expected shares: "spec" (an object read
	// has a new resourceVersion: an edit) or "backends" (the same objects,
	// other ready pods behind them: a scale, a lost cluster, a failover);
	// Why names it, e.g. "c1 has no ready backend of Service
	// default/rebel-base (2 → 0)".
	Cause string `json:"cause,omitempty"`
	Why   string `json:"why,omitempty"`
	// Moved is when the traffic moved, for a change that took every share
	// from some buckets and gave it to others (a failover or a failback),
	// measured from the requests; nil when the shares only shifted or the
	// run's timeline does not count the split's buckets.
	Moved *Moved `json:"moved,omitempty"`
	// Window is the 1-based judged window after the change.
	Window       int           `json:"window"`
	Converged    bool          `json:"converged"`
	NotConverged bool          `json:"notConverged,omitempty"`
	Within       time.Duration `json:"within,omitempty"`
	Text         string        `json:"text"`
}

// Moved is when the traffic of a failover moved, from the timeline's
// slices (requests by send time and by the cluster that answered): the
// end of the last slice in which a bucket that lost its share still
// served a request, and the start of the first in which a bucket that
// got one did, both after the attack's start and at the slices'
// resolution, searched from the window before the change to the end of
// the first judged window after it.
type Moved struct {
	From       []string      `json:"from"`
	To         []string      `json:"to"`
	LastFrom   time.Duration `json:"lastFrom"`
	FirstTo    time.Duration `json:"firstTo"`
	Resolution time.Duration `json:"resolution"`
	// Within is an upper bound of the time to fail over: from the last
	// read that still saw the old backends (the change came after it) to
	// LastFrom. Poll and resolution both widen it.
	Within time.Duration `json:"within"`
	// Moved is false when From still served requests at the end of the
	// searched span, or To served none: no time is measured then.
	Moved bool `json:"moved"`
}

// windowRow is one window as the terminal, Markdown and JUnit show it,
// unescaped: each caller escapes for its medium.
func windowRow(w Window) []string {
	obj := ""
	if w.Source != nil {
		obj = w.Source.Object + " @" + w.Source.ResourceVersion
	}
	verdict := w.Verdict.String()
	switch {
	case w.Settling:
		verdict = "settling (not judged)"
	case !w.Judged:
		verdict = "not judged"
	}
	index := fmt.Sprint(w.Index)
	if w.Phase != "" {
		index += " (" + w.Phase + ")"
	}
	return []string{index, round(w.Start) + "–" + round(w.End), shareList(w.Expected, func(b string) float64 { return w.Expected[b] }),
		obj, fmt.Sprint(w.Split.N), observedList(w.Split), verdict}
}

// windowHeader names windowRow's columns.
var windowHeader = []string{"window", "time", "expected", "object", "requests", "observed (pass interval)", "verdict"}

func shareList(m map[string]float64, v func(string) float64) string {
	var out []string
	for _, b := range slices.Sorted(maps.Keys(m)) {
		out = append(out, b+" "+pct(v(b)))
	}
	return strings.Join(out, ", ")
}

func observedList(s assert.SplitResult) string {
	var out []string
	for _, b := range s.Buckets {
		out = append(out, fmt.Sprintf("%s %s (%s–%s)", b.Bucket, pct(b.Observed), pct(b.PassInterval.Lo), pct(b.PassInterval.Hi)))
	}
	return strings.Join(out, ", ")
}

// windowsText is the windows as lines of text, for JUnit, each line
// made printable on its own (clean).
func windowsText(w *Windows) string {
	var sb strings.Builder
	for _, x := range w.Windows {
		sb.WriteString(clean(strings.Join(windowRow(x), " | "), false) + "\n")
	}
	for _, c := range w.Converge {
		sb.WriteString(clean(c.Text, false) + "\n")
	}
	return sb.String()
}

// toAny is a row of strings as the table writer takes it.
func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
