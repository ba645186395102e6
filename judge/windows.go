package judge

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/meshconfig"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// MeshWindow is the expected split in force in one window of a split
// that follows its mesh object (split.windows.follow): the run reads the
// object every poll and, at each change of the shares it defines, cuts
// the tally and records the new version here, so the windows of the
// tally and these pair up in order.
type MeshWindow struct {
	// Start is when the window starts: the run's start, or the poll that
	// saw the change.
	Start time.Time
	// Settling: the first split.windows.settle after a change, whose
	// requests are described, not judged.
	Settling bool
	Expected meshconfig.Expected
	// SeenAt is when the run read this version: the start, or the poll
	// that saw the change.
	SeenAt time.Time
	// Err is why the changed object defines no split the requests take.
	Err error
}

// windowed is a split judged over time (docs/statistics.md §10).
type windowed struct {
	sp    *scenarios.Split
	model assert.Shares
}

// judge sets r from the windows the run's tally cut; the whole run's
// model is the shares at the start.
func (w windowed) judge(c *call, r *reports.Expectation) {
	sp := w.sp
	counts := c.counts.Windows
	if len(counts) == 0 {
		r.Verdict = assert.Inconclusive
		r.Reason = fmt.Sprintf("split.windows: no windows were counted in the %s (windows are counted from the responses' bodies during the attack, or by cluster from the pods' logs)", r.Source)
		return
	}
	var mesh []MeshWindow
	if sp.Windows.Follow {
		mesh = c.j.mesh[sp.FromMesh].Windows
		if len(mesh) != len(counts) {
			r.Verdict = assert.Inconclusive
			r.Reason = fmt.Sprintf("split.windows.follow: %d windows counted but %d versions of the object recorded (still following it)", len(counts), len(mesh))
			return
		}
	}
	// The last window ends with the last request sent, not with the
	// timeline's last (partial) slice.
	end := time.Duration(len(c.counts.Slices)) * c.counts.SliceWidth
	if l := c.counts.Metrics.Latest; !l.IsZero() && !c.counts.Start.IsZero() {
		end = l.Sub(c.counts.Start)
	}
	ws := make([]assert.Window, len(counts))
	out := &reports.Windows{Mode: "every", Every: sp.Windows.Every.Duration, Windows: make([]reports.Window, len(counts))}
	if sp.Windows.Follow {
		out.Mode, out.Settle = "follow", sp.Windows.SettleTime()
	}
	for i, wc := range counts {
		rw := reports.Window{Index: i + 1, Start: max(wc.Start.Sub(c.counts.Start), 0), End: end, Expected: w.model.Shares}
		if i+1 < len(counts) {
			rw.End = counts[i+1].Start.Sub(c.counts.Start)
		}
		if mesh != nil {
			m := mesh[i]
			if m.Err != nil {
				r.Verdict = assert.Fail
				r.Reason = fmt.Sprintf("window %d (%s–%s): expected split: %v", i+1, offset(rw.Start), offset(rw.End), m.Err)
				return
			}
			rw.Settling, rw.Expected = m.Settling, m.Expected.Shares
			rw.Source = windowSource(m)
		}
		ws[i] = assert.Window{
			Counts:   byName(tally.Snapshot{Dimensions: wc.Dimensions, PodClusters: c.counts.PodClusters}, sp.By, slices.Collect(maps.Keys(rw.Expected))),
			Expected: rw.Expected, Settling: rw.Settling,
		}
		if r.Source == scenarios.SourceBody {
			ws[i].Missing = wc.Unattributed[sp.By]
		}
		out.Windows[i] = rw
	}
	spec := c.j.baseSpec(sp.Margin, sp.Relative, nil, c.conf)
	spec.Sampling = c.sampling
	spec.Looks = c.j.gateLooks
	res := assert.SplitWindows(ws, spec)
	out.Judged = res.Judged
	for i, v := range res.Windows {
		rw := &out.Windows[i]
		rw.Judged, rw.Split, rw.Verdict, rw.Reason = v.Judged, v.Split, v.Split.Verdict, v.Split.Reason
		if !v.Judged {
			rw.Reason = "not judged: " + notJudged(rw, v.Split) + "; " + v.Split.Reason
		}
	}
	if res.Deciding >= 0 {
		out.Deciding = res.Deciding + 1
	}
	var changes map[int]change
	if mesh != nil {
		changes = windowChanges(mesh)
	}
	out.Converge = convergence(out, changes)
	if mesh != nil {
		timeline(out, c.counts, sp.By, r.Source)
	}
	r.Windows = out
	r.Verdict = res.Verdict
	r.Reason = windowsReason(out, res)
}

func notJudged(w *reports.Window, s assert.SplitResult) string {
	if w.Settling {
		return "sent while the data plane settled after a change"
	}
	if s.N == 0 {
		return "no requests"
	}
	return "no requests attributed"
}

// windowSource is where a window's shares were read, for the report.
func windowSource(m MeshWindow) *reports.WindowSource {
	s := &reports.WindowSource{Object: m.Expected.Ref.Object(), ReadAt: m.SeenAt}
	var rvs []string
	for _, src := range m.Expected.Sources {
		rvs = append(rvs, src.Kind+" "+src.ResourceVersion)
	}
	if len(m.Expected.Sources) == 1 {
		rvs = []string{m.Expected.Sources[0].ResourceVersion}
	}
	s.ResourceVersion = strings.Join(rvs, ", ")
	return s
}

// convergence times every change of the expected shares by the first
// judged window after it (docs/statistics.md §10): a PASS shows the split
// inside its band from that window's start on, so the change converged
// within that time (an upper bound at the window's confidence); a FAIL
// shows it did not converge by then.
// changes (windowChanges) says, per 0-based window that a change of the
// object's version opened, what changed.
func convergence(w *reports.Windows, changes map[int]change) []reports.Convergence {
	var out []reports.Convergence
	for i := 1; i < len(w.Windows); i++ {
		prev, cur := w.Windows[i-1], w.Windows[i]
		if cur.Source == nil || prev.Source != nil && prev.Source.ResourceVersion == cur.Source.ResourceVersion && maps.Equal(prev.Expected, cur.Expected) {
			continue
		}
		c := reports.Convergence{At: cur.Start, ResourceVersion: cur.Source.ResourceVersion, Change: i + 1}
		head := fmt.Sprintf("change at %s (resourceVersion %s)", offset(c.At), c.ResourceVersion)
		if ch, ok := changes[i]; ok {
			c.Cause, c.Why = ch.cause, ch.why
			if ch.cause == causeBackends {
				head = fmt.Sprintf("ready backends changed at %s (%s; same resourceVersions)", offset(c.At), ch.why)
			}
		}
		j := i
		for j < len(w.Windows) && !w.Windows[j].Judged {
			j++
		}
		switch {
		case j == len(w.Windows):
			c.Text = head + ": no judged window after it; convergence unknown"
		case w.Windows[j].Verdict == assert.Pass:
			c.Window, c.Converged, c.Within = j+1, true, w.Windows[j].Start-c.At
			c.Text = fmt.Sprintf("%s: converged within %s (window %d PASSes from %s)", head, offset(c.Within), j+1, offset(w.Windows[j].Start))
		case w.Windows[j].Verdict == assert.Fail:
			c.Window, c.NotConverged = j+1, true
			c.Text = fmt.Sprintf("%s: not converged: window %d (%s–%s) FAILs", head, j+1, offset(w.Windows[j].Start), offset(w.Windows[j].End))
		default:
			c.Window = j + 1
			c.Text = fmt.Sprintf("%s: convergence unknown: window %d is INCONCLUSIVE", head, j+1)
		}
		out = append(out, c)
	}
	return out
}

// windowsReason names the deciding window with its expected shares and
// where they came from.
func windowsReason(w *reports.Windows, res assert.WindowsResult) string {
	if res.Deciding < 0 {
		return res.Reason
	}
	d := w.Windows[res.Deciding]
	return fmt.Sprintf("window %d of %d (%s–%s, expected %s%s): %s: %s", d.Index, len(w.Windows), offset(d.Start), offset(d.End),
		FormatShares(d.Expected), sourceText(d.Source), d.Verdict, d.Reason)
}

func sourceText(s *reports.WindowSource) string {
	if s == nil {
		return ""
	}
	return fmt.Sprintf(" from %s resourceVersion %s", s.Object, s.ResourceVersion)
}

// offset is a time after the attack's start, to the tenth of a second.
func offset(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }

// FormatShares is "v1=80%, v2=20%" in bucket order.
func FormatShares(shares map[string]float64) string {
	var out []string
	for _, b := range slices.Sorted(maps.Keys(shares)) {
		out = append(out, fmt.Sprintf("%s=%.4g%%", b, 100*shares[b]))
	}
	return strings.Join(out, ", ")
}
