package reports

import (
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
)

// Windows is a split judged over time (split.windows; docs/statistics.md
// §8): every window against the shares expected in it.
type Windows struct {
	// Mode is "every" (fixed windows) or "follow" (windows that follow the
	// mesh object the expected shares are read from).
	Mode string `json:"mode"`
	// Every is the fixed windows' length; Settle the time after a change
	// of the expected shares whose requests are not judged.
	Every  time.Duration `json:"every,omitempty"`
	Settle time.Duration `json:"settle,omitempty"`
	// Judged is k, the windows judged: each window's FAIL intervals are at
	// 1-α/(buckets·k), its PASS at α (docs/statistics.md §8).
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
	// ReadAt is when the run read this version (a change is timed to the
	// poll that saw it: within split.windows.poll after it was made).
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
