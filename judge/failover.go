package judge

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/meshconfig"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// What changed the expected shares of a followed split
// (reports.Convergence.Cause).
const (
	// causeSpec: an object the shares were read from has a new
	// resourceVersion (an edit, a rollout step).
	causeSpec = "spec"
	// causeBackends: the same objects, other ready pods behind them (a
	// scale to zero, a lost cluster): a failover.
	causeBackends = "backends"
)

// change is what changed between the version in force before a window
// and the one the window expects.
type change struct{ cause, why string }

// windowChanges compares every followed version with the one before it:
// keyed by the 0-based window whose version differs from its
// predecessor's (the settling window a change opened).
func windowChanges(mesh []MeshWindow) map[int]change {
	out := map[int]change{}
	for i := 1; i < len(mesh); i++ {
		prev, cur := mesh[i-1], mesh[i]
		if prev.Err != nil || cur.Err != nil {
			continue
		}
		if ch, ok := changeOf(prev.Expected, cur.Expected); ok {
			out[i] = ch
		}
	}
	return out
}

// changeOf says what differs between two reads of the same object; false
// when nothing the split depends on does.
func changeOf(prev, cur meshconfig.Expected) (change, bool) {
	rv := func(e meshconfig.Expected) map[string]string {
		m := map[string]string{}
		for _, s := range e.Sources {
			obj := s.Kind + " " + s.Name
			if s.Namespace != "" {
				obj = s.Kind + " " + s.Namespace + "/" + s.Name
			}
			m[obj+" in "+s.Cluster] = s.ResourceVersion
		}
		return m
	}
	a, b := rv(prev), rv(cur)
	var edits []string
	for _, k := range sortedUnion(a, b) {
		if a[k] != b[k] {
			edits = append(edits, fmt.Sprintf("%s resourceVersion %s → %s", k, cmp.Or(a[k], "(not read)"), cmp.Or(b[k], "(not read)")))
		}
	}
	var pods []string
	of := cmp.Or(cur.BackendsOf, prev.BackendsOf)
	for _, c := range sortedUnion(prev.Backends, cur.Backends) {
		o, n := prev.Backends[c], cur.Backends[c]
		switch {
		case o == n:
		case n == 0:
			pods = append(pods, fmt.Sprintf("%s has no ready backend of %s (%d → 0)", c, of, o))
		case o == 0:
			pods = append(pods, fmt.Sprintf("%s has ready backends of %s again (0 → %d)", c, of, n))
		default:
			pods = append(pods, fmt.Sprintf("%s: %d → %d ready backends of %s", c, o, n, of))
		}
	}
	switch {
	case len(edits) > 0:
		return change{causeSpec, strings.Join(append(edits, pods...), "; ")}, true
	case len(pods) > 0:
		return change{causeBackends, strings.Join(pods, "; ")}, true
	case !maps.Equal(prev.Shares, cur.Shares):
		// Kinds that record no Backends (Istio's subsets, Kuma's
		// Services by tag) still resolve through ready pods.
		return change{causeBackends, "the ready pods behind the objects changed"}, true
	}
	return change{}, false
}

func sortedUnion[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// timeline marks a failover timeline in w: when every change came from
// the ready backends, the judged windows' phases (before, during, after),
// and for each change that took all of some buckets' shares to others,
// when the traffic moved, measured from the timeline's slices (requests
// by send time and serving cluster for a split counted from the answers,
// served lines by log time for one counted from the logs: only a split
// by cluster has them).
func timeline(w *reports.Windows, s tally.Snapshot, by, source string) {
	if len(w.Converge) == 0 {
		return
	}
	failover := true
	for _, c := range w.Converge {
		failover = failover && c.Cause == causeBackends
	}
	if failover {
		first, last := w.Converge[0].Change, w.Converge[len(w.Converge)-1].Change
		for i := range w.Windows {
			x := &w.Windows[i]
			switch {
			case x.Settling:
			case x.Index < first:
				x.Phase = "before"
			case x.Index > last:
				x.Phase = "after"
			default:
				x.Phase = "during"
			}
		}
	}
	for i := range w.Converge {
		c := &w.Converge[i]
		if c.Cause != causeBackends || c.Change < 2 {
			continue
		}
		m := moved(w, c, s, by)
		if m == nil {
			continue
		}
		c.Moved = m
		clock := "send time"
		if source == scenarios.SourceLogs {
			clock = "log time"
		}
		c.Text += "; " + movedText(m, w.Windows[c.Change-1].Start, clock)
	}
}

// moved measures when the traffic left the buckets whose share a change
// took to 0 and reached those that got one, in the slices from the window
// before the change to the end of the first judged window after it (the
// change window's end without one). Only whole slices inside that span
// count: a slice that straddles its end may hold the next change's
// requests.
func moved(w *reports.Windows, c *reports.Convergence, s tally.Snapshot, by string) *reports.Moved {
	if by != string(attribution.Cluster) || s.SliceWidth <= 0 || len(s.Slices) == 0 {
		return nil
	}
	prev, cur := w.Windows[c.Change-2], w.Windows[c.Change-1]
	m := &reports.Moved{Resolution: s.SliceWidth}
	for _, b := range sortedUnion(prev.Expected, cur.Expected) {
		switch {
		case prev.Expected[b] > 0 && cur.Expected[b] == 0:
			m.From = append(m.From, b)
		case prev.Expected[b] == 0 && cur.Expected[b] > 0:
			m.To = append(m.To, b)
		}
	}
	if len(m.From) == 0 || len(m.To) == 0 {
		return nil
	}
	lo, hi := prev.Start, cur.End
	if c.Window > 0 {
		hi = w.Windows[c.Window-1].End
	}
	served := func(sl tally.Slice, bs []string) bool {
		for _, b := range bs {
			if sl.Clusters[b] > 0 {
				return true
			}
		}
		return false
	}
	var lastSlice time.Duration
	fromSeen, toSeen := false, false
	for _, sl := range s.Slices {
		end := sl.Start + s.SliceWidth
		if sl.Start < lo || end > hi {
			continue
		}
		lastSlice = end
		if served(sl, m.From) {
			m.LastFrom, fromSeen = end, true
		}
		if served(sl, m.To) && !toSeen {
			m.FirstTo, toSeen = sl.Start, true
		}
	}
	m.Moved = fromSeen && toSeen && m.LastFrom < lastSlice
	if m.Moved {
		m.Within = max(m.LastFrom-cur.Start, 0)
	}
	return m
}

// movedText says when the traffic moved, with its resolution.
func movedText(m *reports.Moved, changeAfter time.Duration, clock string) string {
	from, to := strings.Join(m.From, ", "), strings.Join(m.To, ", ")
	if !m.Moved {
		switch {
		case m.LastFrom == 0 && m.FirstTo == 0:
			return fmt.Sprintf("the timeline shows neither %s nor %s serving around the change: the time to fail over is not measured", from, to)
		case m.FirstTo == 0:
			return fmt.Sprintf("%s served no request after the change: the traffic did not move to it", to)
		}
		return fmt.Sprintf("%s still served requests sent at the end of the first judged window after the change (%s): the traffic did not move away from it", from, offset(m.LastFrom))
	}
	return fmt.Sprintf("traffic moved from %s to %s within %s of the last read that still saw the old backends (at %s): %s's last request was sent before %s, %s's first from %s (%s slices by %s; an upper bound, widened by the poll)",
		from, to, offset(m.Within), offset(changeAfter), from, offset(m.LastFrom), to, offset(m.FirstTo), m.Resolution, clock)
}
