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
	// Window is the 1-based judged window after the change.
	Window       int           `json:"window"`
	Converged    bool          `json:"converged"`
	NotConverged bool          `json:"notConverged,omitempty"`
	Within       time.Duration `json:"within,omitempty"`
	Text         string        `json:"text"`
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
	return []string{fmt.Sprint(w.Index), round(w.Start) + "–" + round(w.End), shareList(w.Expected, func(b string) float64 { return w.Expected[b] }),
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
