package tally

import (
	"fmt"
	"sort"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attribution"
)

// MaxWindows bounds the windows a tally keeps (assert.MaxWindows, the
// windows one split can be judged in): each keeps its own counters.
const MaxWindows = assert.MaxWindows

// window counts the answered requests sent in one time window of the run
// by every attributed dimension, with the per-connection sums the
// dependence rule needs (docs/statistics.md §3.3): a keep-alive connection
// that spans two windows is one sampling unit in each. Nothing is kept per
// request.
type window struct {
	start        time.Time
	dims         map[string]*dim
	order        []string
	conns        map[uint64]*connState
	unattributed map[string]int64
}

// WindowCounts is what one window counted: the requests answered from
// Start until the next window's Start (the last window: until the end).
type WindowCounts struct {
	Start        time.Time
	Dimensions   map[string]assert.Counts
	Unattributed map[string]int64
	// Overflow is, per dimension past MaxBuckets, the requests in Other.
	Overflow map[string]int64
}

// Cut starts a new window at the given time: requests answered from then
// on are counted in it (by the time their answer came, Result.Timestamp
// plus Result.Latency, so a request in flight at a cut counts in the
// later window). The data plane routes a request somewhere between its
// send and its answer: one answered before a cut was routed before it,
// while one sent before a cut and answered after may have been routed
// after it (the lab's failover test saw 1–4% of a window's requests
// routed by the next version when they were counted by send time: a new
// connection through a port-forward takes its time). Windows start in
// increasing time; requests answered before the first cut are in no
// window. A time not after the last cut's, or a window past MaxWindows,
// is an error.
func (t *Tally) Cut(at time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.windows); n > 0 && !at.After(t.windows[n-1].start) {
		return fmt.Errorf("tally: window at %s: not after the last window's start %s", at.Format(time.RFC3339Nano), t.windows[n-1].start.Format(time.RFC3339Nano))
	}
	if len(t.windows) >= MaxWindows {
		return fmt.Errorf("tally: window at %s: at most %d windows", at.Format(time.RFC3339Nano), MaxWindows)
	}
	w := &window{start: at, dims: map[string]*dim{}, conns: map[uint64]*connState{}, unattributed: map[string]int64{}}
	for _, f := range attribution.Fields() {
		w.dims[string(f)] = &dim{index: map[string]int{}}
		w.order = append(w.order, string(f))
	}
	t.windows = append(t.windows, w)
	return nil
}

// windowAt is the window a request sent at ts is counted in, nil before
// the first.
func (t *Tally) windowAt(ts time.Time) *window {
	i := sort.Search(len(t.windows), func(i int) bool { return t.windows[i].start.After(ts) })
	if i == 0 {
		return nil
	}
	return t.windows[i-1]
}

// countWindow counts an answered request in its window (r: when its
// answer came): its bucket in every attributed dimension, or
// unattributed there.
func (t *Tally) countWindow(r time.Time, connID uint64, id attribution.Identity) {
	w := t.windowAt(r)
	if w == nil {
		return
	}
	var cs *connState
	if connID != 0 {
		if cs = w.conns[connID]; cs == nil {
			cs = newConnState()
			w.conns[connID] = cs
		}
	}
	for _, f := range attribution.Fields() {
		if v := t.value(f, id); v != "" {
			countIn(w.dims[string(f)], string(f), v, cs)
		} else {
			w.unattributed[string(f)]++
		}
	}
}

// closeWindowConn marks a closed connection in every window that has it.
func (t *Tally) closeWindowConn(id uint64, at time.Time) {
	for _, w := range t.windows {
		if cs, ok := w.conns[id]; ok {
			cs.closedAt = at
		}
	}
}

// sweepWindows folds the windows' connections closed longer than the
// grace, as sweep does for the whole run's.
func (t *Tally) sweepWindows(now time.Time) {
	for _, w := range t.windows {
		for id, cs := range w.conns {
			if !cs.closedAt.IsZero() && now.Sub(cs.closedAt) > t.grace {
				fold(w.dims, cs)
				delete(w.conns, id)
			}
		}
	}
}

// windowSnapshots copies every window's counts.
func (t *Tally) windowSnapshots() []WindowCounts {
	var out []WindowCounts
	for _, w := range t.windows {
		dims, overflow := withOpen(w.dims, w.order, w.conns)
		wc := WindowCounts{Start: w.start, Dimensions: dims, Unattributed: copyMap(w.unattributed)}
		if len(overflow) > 0 {
			wc.Overflow = overflow
		}
		out = append(out, wc)
	}
	return out
}
