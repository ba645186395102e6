package assert

import (
	"fmt"
)

// MaxWindows bounds the windows one split is judged in (README.md,
// Limits): every window spends a share of α, so past a hundred each is
// judged at α/100 or less and a correct split needs far more requests per
// window to settle; the tally keeps per-window counters, which this bounds
// too.
const MaxWindows = 100

// Window is one time window of a split judged over time
// (docs/statistics.md §10): its counts and the shares expected in it.
type Window struct {
	Counts   Counts
	Expected map[string]float64
	// Missing is the window's answered requests whose bucket is unknown.
	Missing int64
	// Settling marks the requests sent while the data plane converged
	// after a change of the expected shares: they are reported but never
	// judged, since neither the old nor the new shares are the truth then.
	Settling bool
}

// WindowVerdict is one window's judgement.
type WindowVerdict struct {
	// Judged is false for a settling window or one without requests:
	// its Split then only describes what was seen, and its verdict counts
	// for nothing.
	Judged bool        `json:"judged"`
	Split  SplitResult `json:"split"`
}

// WindowsResult is the verdict on a split judged in windows.
type WindowsResult struct {
	Verdict Verdict `json:"verdict"`
	// Judged is k, the number of windows judged; each window's FAIL
	// intervals are at 1-α/(buckets·k).
	Judged  int             `json:"judged"`
	Windows []WindowVerdict `json:"windows"`
	// Deciding is the index of the window that decided a FAIL (the one
	// furthest outside its band) or an INCONCLUSIVE (the first); -1 on a
	// PASS.
	Deciding int    `json:"deciding"`
	Reason   string `json:"reason"`
	// Looks is SplitSpec.Looks: the windows were judged as a converge
	// gate's looks, each at α/Looks; 0 otherwise.
	Looks int `json:"looks,omitempty"`
}

// judgedWindows is k: the windows with requests that are not settling.
// It depends on the number of requests per window, never on where they
// went, so the level each window is judged at does not depend on the
// outcomes it judges.
func judgedWindows(ws []Window) int {
	k := 0
	for _, w := range ws {
		if !w.Settling && w.Counts.Total()+w.Missing > 0 {
			k++
		}
	}
	return k
}

// SplitWindows judges a split over time (docs/statistics.md §10): every
// window against the shares expected in it, with s's margin, confidence,
// method and sampling (s.Expected and s.Missing are the windows' own). A
// window's PASS is judged at α as in Split: the run PASSes only when every
// judged window PASSes, an intersection–union test whose false PASS is at
// most α however many windows there are. A window's FAIL is judged by
// intervals at 1-α/(buckets·k), k the windows judged: the run FAILs when
// any window FAILs, and by Bonferroni a correct rollout FAILs with
// probability at most α over the whole run. Else INCONCLUSIVE. Settling
// windows and windows without requests are described, not judged.
func SplitWindows(ws []Window, s SplitSpec) WindowsResult {
	if len(ws) == 0 {
		return WindowsResult{Verdict: Inconclusive, Deciding: -1, Reason: "no windows to judge"}
	}
	if len(ws) > MaxWindows {
		return WindowsResult{Verdict: Inconclusive, Deciding: -1,
			Reason: fmt.Sprintf("%d windows: at most %d can be judged together (MaxWindows)", len(ws), MaxWindows)}
	}
	k := judgedWindows(ws)
	out := WindowsResult{Verdict: Pass, Judged: k, Windows: make([]WindowVerdict, len(ws)), Deciding: -1, Looks: s.Looks}
	worst := -1.0
	for i, w := range ws {
		judged := !w.Settling && w.Counts.Total()+w.Missing > 0
		out.Windows[i] = WindowVerdict{Judged: judged, Split: Split(w.Counts, windowSpec(s, w, k))}
		if !judged {
			continue
		}
		r := out.Windows[i].Split
		switch {
		case r.Verdict == Fail:
			if d := failDistance(r); out.Verdict != Fail || d > worst+1e-12 {
				worst, out.Deciding = d, i
			}
		case r.Verdict == Inconclusive && out.Verdict == Pass:
			out.Deciding = i
		}
		out.Verdict = Worst(out.Verdict, r.Verdict)
	}
	if k == 0 {
		out.Verdict = Inconclusive
	}
	out.Reason = out.reason()
	return out
}

// windowSpec is the spec one window is judged by.
func windowSpec(s SplitSpec, w Window, k int) SplitSpec {
	s.Expected, s.Missing, s.Family = w.Expected, w.Missing, max(k, 1)
	if s.Looks > 0 {
		// A converge gate's look: its level is fixed before the run.
		s.Confidence, s.Family = GateLevel(s.Confidence, s.Looks), 1
	}
	return s
}

// decideWindows is SplitWindows' verdict alone, for the calibration's
// speed (checked against SplitWindows there).
func decideWindows(ws []Window, s SplitSpec) (Verdict, int, error) {
	k := judgedWindows(ws)
	v, deciding, worst := Pass, -1, -1.0
	for i, w := range ws {
		if w.Settling || w.Counts.Total()+w.Missing == 0 {
			continue
		}
		r, _, _, err := decideSplit(w.Counts, windowSpec(s.withDefaults(), w, k))
		if err != nil {
			return Inconclusive, -1, err
		}
		switch {
		case r.Verdict == Fail:
			if d := failDistance(r); v != Fail || d > worst+1e-12 {
				worst, deciding = d, i
			}
		case r.Verdict == Inconclusive && v == Pass:
			deciding = i
		}
		v = Worst(v, r.Verdict)
	}
	if k == 0 {
		v = Inconclusive
	}
	return v, deciding, nil
}

// failDistance is how far the failing bucket furthest outside its band
// lies from it: the FAIL interval's gap to the allowed band.
func failDistance(r SplitResult) float64 {
	d := 0.0
	for _, b := range r.Buckets {
		if b.Verdict == Fail {
			d = max(d, b.FailInterval.Lo-b.Allowed.Hi, b.Allowed.Lo-b.FailInterval.Hi)
		}
	}
	return d
}

func (r WindowsResult) reason() string {
	switch {
	case r.Judged == 0:
		return "no window with requests outside the settling time after a change: nothing judged"
	case r.Verdict == Pass && r.Looks > 0:
		return fmt.Sprintf("every one of the %d windows judged PASSes (each as one of at most %d looks of a converge gate, at α/%d)", r.Judged, r.Looks, r.Looks)
	case r.Verdict == Pass:
		return fmt.Sprintf("every one of the %d windows judged PASSes (each at the split's confidence: all must pass; FAIL intervals spend α over the %d windows)", r.Judged, r.Judged)
	}
	w := r.Windows[r.Deciding].Split
	return fmt.Sprintf("window %d of %d: %s: %s", r.Deciding+1, len(r.Windows), w.Verdict, w.Reason)
}
