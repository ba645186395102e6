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

// Limits of holding answers back (SetHold).
const (
	// MaxHold bounds how long answers are held back before they are
	// counted in a window: a followed object's poll plus two reads
	// (scenarios.MaxPoll, scenarios.MaxReadTimeout) fit in it.
	MaxHold = 5 * time.Minute
	// MaxHeld bounds the answers held back at once (about 100 bytes
	// each): past it the oldest is counted at once, and
	// Snapshot.WindowsHeldEarly says how many were.
	MaxHeld = 1 << 18
)

// heldAnswer is an answered request not yet counted in a window.
type heldAnswer struct {
	at   time.Time
	conn uint64
	id   attribution.Identity
}

// SetHold makes the tally hold every answer back for d after it came
// before counting it in a window, so that a cut made up to d in the past
// still takes the answers after it. A followed object's change is seen
// when a read ends, and its settling window opens when the last read
// that saw the old version began: up to a poll and two reads earlier
// (docs/statistics.md §10). Without the hold, the answers in between
// were already counted in the window before the change. d is from 0 to
// MaxHold.
func (t *Tally) SetHold(d time.Duration) error {
	if d < 0 || d > MaxHold {
		return fmt.Errorf("tally: hold answers back %s before windowing them: want 0 to %s", d, MaxHold)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hold = d
	return nil
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
// window. A cut may be in the past by up to the hold (SetHold); one
// earlier than an answer already counted in a window starts just after
// that answer instead, and Cut returns the start it used. A time not
// after the last cut's, or a window past MaxWindows, is an error.
func (t *Tally) Cut(at time.Time) (time.Time, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.committed.IsZero() && !at.After(t.committed) {
		at = t.committed.Add(time.Nanosecond)
	}
	if n := len(t.windows); n > 0 && !at.After(t.windows[n-1].start) {
		return at, fmt.Errorf("tally: window at %s: not after the last window's start %s", at.Format(time.RFC3339Nano), t.windows[n-1].start.Format(time.RFC3339Nano))
	}
	if len(t.windows) >= MaxWindows {
		return at, fmt.Errorf("tally: window at %s: at most %d windows", at.Format(time.RFC3339Nano), MaxWindows)
	}
	w := &window{start: at, dims: map[string]*dim{}, conns: map[uint64]*connState{}, unattributed: map[string]int64{}}
	for _, f := range attribution.Fields() {
		w.dims[string(f)] = &dim{index: map[string]int{}}
		w.order = append(w.order, string(f))
	}
	t.windows = append(t.windows, w)
	return at, nil
}

// ReleaseHeld counts every answer still held back in its window: the
// run's answers are all in, and no cut made after this moves them (the
// end of a run, before its last snapshot).
func (t *Tally) ReleaseHeld() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.releaseUntil(time.Time{}, true)
}

// holdWindow holds an answer (r: when it came) back for the hold, then
// counts it in its window (release); now is the tally's clock.
func (t *Tally) holdWindow(r time.Time, connID uint64, id attribution.Identity, now time.Time) {
	if t.hold <= 0 {
		t.commit(r, connID, id)
		return
	}
	if len(t.held)-t.heldHead >= MaxHeld {
		h := t.held[t.heldHead]
		t.held[t.heldHead] = heldAnswer{}
		t.heldHead++
		t.heldEarly++
		t.commit(h.at, h.conn, h.id)
	}
	t.held = append(t.held, heldAnswer{at: r, conn: connID, id: id})
	t.release(now)
}

// release counts in their windows the held answers whose hold is over
// at now, oldest first: answers come nearly in order, and one behind a
// later answer waits for it, which only holds it longer.
func (t *Tally) release(now time.Time) {
	t.releaseUntil(now.Add(-t.hold), false)
}

func (t *Tally) releaseUntil(until time.Time, all bool) {
	for t.heldHead < len(t.held) {
		h := t.held[t.heldHead]
		if !all && !h.at.Before(until) {
			break
		}
		t.held[t.heldHead] = heldAnswer{}
		t.heldHead++
		t.commit(h.at, h.conn, h.id)
	}
	// Reuse the slice's front once half of it is released.
	if t.heldHead > 0 && t.heldHead*2 >= len(t.held) {
		n := copy(t.held, t.held[t.heldHead:])
		clear(t.held[n:])
		t.held = t.held[:n]
		t.heldHead = 0
	}
}

// commit counts an answer in its window and notes that no cut may start
// before it any more.
func (t *Tally) commit(r time.Time, connID uint64, id attribution.Identity) {
	if r.After(t.committed) {
		t.committed = r
	}
	t.countWindow(r, connID, id)
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
// grace, as sweep does for the whole run's, and the hold: an answer held
// back is counted on its connection after the connection closed.
func (t *Tally) sweepWindows(now time.Time) {
	for _, w := range t.windows {
		for id, cs := range w.conns {
			if !cs.closedAt.IsZero() && now.Sub(cs.closedAt) > t.grace+t.hold {
				fold(w.dims, cs)
				delete(w.conns, id)
			}
		}
	}
}

// Windows is Snapshot's Windows and WindowsHeldEarly alone, for a caller
// that wants only the windows (a distributed run's coordinator counts
// nothing else, the runner recounts them after ReleaseHeld): the answers
// whose hold is over are counted first.
func (t *Tally) Windows() (windows []WindowCounts, heldEarly int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.windowsNow()
}

// WindowStarts is when each window began, in order: what a watcher
// needs to tell whether a window has sealed, without copying any counts.
func (t *Tally) WindowStarts() []time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]time.Time, len(t.windows))
	for i, w := range t.windows {
		out[i] = w.start
	}
	return out
}

func (t *Tally) windowsNow() ([]WindowCounts, int64) {
	t.release(t.now())
	return t.windowSnapshots(), t.heldEarly
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
