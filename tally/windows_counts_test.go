package tally

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
)

// Each window's counts, and its per-connection sums, must equal a tally
// fed only that window's requests: a keep-alive connection spanning a cut
// is one unit in each window, and requests are placed by the time their
// answer came whatever order they arrive in (a request in flight at a cut
// counts in the later window: it may have been routed after it).
func TestWindowsMatchSeparateTallies(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(25, 3))
	start := time.Unix(1_800_000_000, 0)
	cuts := []time.Time{start, start.Add(10 * time.Second), start.Add(25 * time.Second)}
	whole := New(start, time.Minute)
	for _, c := range cuts {
		if _, err := whole.Cut(c); err != nil {
			t.Fatal(err)
		}
	}
	sep := []*Tally{New(start, time.Minute), New(start, time.Minute), New(start, time.Minute)}
	clusters := []string{"c1", "c2"}
	for range 6000 {
		off := time.Duration(rng.Int64N(int64(40 * time.Second)))
		conn := uint64(rng.IntN(12)) // 0: no connection
		b := clusters[rng.IntN(2)]
		if conn%5 == 1 {
			b = "c1" // connections that stick, so the sums matter
		}
		// Up to 2 s in flight: many requests span a cut.
		lat := time.Duration(rng.Int64N(int64(2 * time.Second)))
		r := &attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start.Add(off), Latency: lat}, ConnID: conn}
		id := attribution.Identity{Cluster: b}
		if rng.IntN(50) == 0 {
			id = attribution.Identity{}
		}
		whole.Add(r, id)
		w := windowOf(cuts, r.Timestamp.Add(lat))
		sep[w].Add(r, id)
	}
	// Half the connections close and are folded: nothing may change.
	for c := uint64(1); c < 12; c += 2 {
		whole.ConnClosed(c)
	}
	whole.mu.Lock()
	whole.grace = 0
	whole.sweep(time.Now().Add(time.Second))
	whole.mu.Unlock()
	got := whole.Snapshot().Windows
	if len(got) != len(cuts) {
		t.Fatalf("%d windows, want %d", len(got), len(cuts))
	}
	for i, w := range got {
		want := sep[i].Snapshot()
		if !w.Start.Equal(cuts[i]) {
			t.Errorf("window %d starts %s, want %s", i, w.Start, cuts[i])
		}
		if !sameCounts(w.Dimensions["cluster"], want.Dimensions["cluster"]) {
			t.Errorf("window %d: cluster counts %+v %+v, want %+v %+v", i, w.Dimensions["cluster"], *w.Dimensions["cluster"].Units, want.Dimensions["cluster"], *want.Dimensions["cluster"].Units)
		}
		if w.Unattributed["cluster"] != want.Unattributed["cluster"] {
			t.Errorf("window %d: %d unattributed, want %d", i, w.Unattributed["cluster"], want.Unattributed["cluster"])
		}
	}
}

// windowOf is the window of a time, computed here by hand.
func windowOf(cuts []time.Time, ts time.Time) int {
	for i := len(cuts) - 1; i >= 0; i-- {
		if !ts.Before(cuts[i]) {
			return i
		}
	}
	return 0
}

func sameCounts(a, b assert.Counts) bool {
	const eps = 1e-9
	if !slices.Equal(a.Buckets, b.Buckets) || !slices.Equal(a.N, b.N) || a.Units.Units != b.Units.Units || a.Units.SumMM-b.Units.SumMM > eps || b.Units.SumMM-a.Units.SumMM > eps {
		return false
	}
	for i := range a.Units.SumXX {
		if d := a.Units.SumXX[i] - b.Units.SumXX[i]; d > eps || d < -eps {
			return false
		}
		if d := a.Units.SumXM[i] - b.Units.SumXM[i]; d > eps || d < -eps {
			return false
		}
	}
	return true
}

// Cut refuses a window not after the last one and past MaxWindows;
// requests before the first cut are in no window.
func TestCutLimits(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_800_000_000, 0)
	tl := New(start, time.Minute)
	tl.Add(&attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start}}, attribution.Identity{Cluster: "c1"})
	if _, err := tl.Cut(start.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := tl.Cut(start.Add(time.Second)); err == nil {
		t.Error("a cut at the last cut's time is accepted")
	}
	for i := 2; i <= MaxWindows; i++ {
		if _, err := tl.Cut(start.Add(time.Duration(i) * time.Second)); err != nil {
			t.Fatalf("cut %d: %v", i, err)
		}
	}
	if _, err := tl.Cut(start.Add(time.Hour)); err == nil {
		t.Errorf("cut %d accepted, want at most %d", MaxWindows+1, MaxWindows)
	}
	s := tl.Snapshot()
	if len(s.Windows) != MaxWindows || s.Windows[0].Dimensions["cluster"].Total() != 0 || s.Dimensions["cluster"].Total() != 1 {
		t.Errorf("the request before the first cut: windows %d, first window %d, whole run %d", len(s.Windows), s.Windows[0].Dimensions["cluster"].Total(), s.Dimensions["cluster"].Total())
	}
}

// clock is a test's time for holding answers back.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// answer adds one answer from cluster at the clock's time on connection
// conn.
func answer(tl *Tally, c *clock, cluster string, conn uint64) {
	tl.Add(&attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: c.t}, ConnID: conn}, attribution.Identity{Cluster: cluster})
}

// A cut made in the past, as a followed object's settling window is
// (from the start of the last read that saw the old version), takes the
// answers after it when they are held back for as long: without the
// hold they were already counted in the window before. A cut further
// back than the hold starts after the last answer counted, and says so.
func TestHoldTakesALateCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		hold time.Duration
		// the cut's age when made, the start it must get (offset from
		// the attack's start), and the c2 answers the first window keeps
		age       time.Duration
		wantStart time.Duration
		firstC2   int64
	}{
		{"held for longer than the cut's age", 5 * time.Second, 4 * time.Second, 6 * time.Second, 0},
		{"held exactly the cut's age", 4 * time.Second, 4 * time.Second, 6 * time.Second, 0},
		// Not held: the answers up to the cut's making (10 s) are counted
		// in window 0, and the cut starts just after the last of them.
		{"not held", 0, 4 * time.Second, 10*time.Second + time.Nanosecond, 5},
		// Held 2 s: the answers before 8 s are counted, the cut starts
		// after them, and window 0 keeps the c2 answers at 6 and 7 s.
		{"held for less than the cut's age", 2 * time.Second, 4 * time.Second, 7*time.Second + time.Nanosecond, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Unix(1_800_000_000, 0)
			c := &clock{t: start}
			tl := New(start, time.Minute)
			tl.now = c.now
			if err := tl.SetHold(tc.hold); err != nil {
				t.Fatal(err)
			}
			if _, err := tl.Cut(start); err != nil {
				t.Fatal(err)
			}
			// One answer a second from 1 to 10 s: c1 until 5 s, then c2
			// (the data plane moved at 5.5 s).
			for s := 1; s <= 10; s++ {
				c.t = start.Add(time.Duration(s) * time.Second)
				cl := "c1"
				if s > 5 {
					cl = "c2"
				}
				answer(tl, c, cl, 1)
			}
			at := c.t.Add(-tc.age)
			got, err := tl.Cut(at)
			if err != nil {
				t.Fatal(err)
			}
			if got.Sub(start) != tc.wantStart {
				t.Errorf("the cut at %s starts at %s, want %s", at.Sub(start), got.Sub(start), tc.wantStart)
			}
			for s := 11; s <= 12; s++ {
				c.t = start.Add(time.Duration(s) * time.Second)
				answer(tl, c, "c2", 1)
			}
			tl.ReleaseHeld()
			ws := tl.Snapshot().Windows
			if len(ws) != 2 {
				t.Fatalf("%d windows, want 2", len(ws))
			}
			w0, w1 := ws[0].Dimensions["cluster"], ws[1].Dimensions["cluster"]
			if w0.Count("c1") != 5 || w0.Count("c2") != tc.firstC2 || w1.Count("c1") != 0 || w1.Count("c2") != 7-tc.firstC2 {
				t.Errorf("windows %v %v and %v %v; want c1 5 and c2 %d before the cut, c2 %d after it", w0.Buckets, w0.N, w1.Buckets, w1.N, tc.firstC2, 7-tc.firstC2)
			}
		})
	}
}

// SetHold takes 0 to MaxHold; past MaxHeld answers held, the oldest is
// counted at once and the snapshot says how many were.
func TestHoldLimits(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_800_000_000, 0)
	tl := New(start, time.Minute)
	for _, d := range []time.Duration{-time.Second, MaxHold + time.Nanosecond} {
		if err := tl.SetHold(d); err == nil || !strings.Contains(err.Error(), "want 0 to 5m0s") {
			t.Errorf("hold %s: %v, want refused naming the bounds", d, err)
		}
	}
	if err := tl.SetHold(MaxHold); err != nil {
		t.Fatal(err)
	}
	c := &clock{t: start}
	tl.now = c.now
	if _, err := tl.Cut(start); err != nil {
		t.Fatal(err)
	}
	for range MaxHeld + 3 {
		answer(tl, c, "c1", 0)
	}
	s := tl.Snapshot()
	if n := s.Windows[0].Dimensions["cluster"].Count("c1"); s.WindowsHeldEarly != 3 || n != 3 {
		t.Errorf("%d counted early, window 0 counts %d; want 3 of each", s.WindowsHeldEarly, n)
	}
	tl.ReleaseHeld()
	if n := tl.Snapshot().Windows[0].Dimensions["cluster"].Count("c1"); n != MaxHeld+3 {
		t.Errorf("after ReleaseHeld window 0 counts %d, want %d", n, MaxHeld+3)
	}
}

// AddWindowed (a distributed run's coordinator) counts in the windows
// only: fed results on as many connections, none of them ever closed, the
// tally keeps no whole-run connection state and its whole-run counts stay
// empty, while the windows count every answer, each connection one unit.
func TestAddWindowedCountsOnlyWindows(t *testing.T) {
	t.Parallel()
	start := time.Unix(1700000000, 0)
	tl := New(start, time.Minute)
	if _, err := tl.Cut(start); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		r := &attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start.Add(time.Duration(i) * time.Millisecond)}, ConnID: uint64(i + 1)}
		tl.AddWindowed(r, attribution.Identity{Cluster: "c1"}, i%10 == 0)
	}
	failed := &attack.Result{Result: &vegeta.Result{Code: 503, Error: "503", Timestamp: start}, ConnID: n + 1}
	tl.AddWindowed(failed, attribution.Identity{Cluster: "c1"}, false)
	if len(tl.conns) != 0 {
		t.Errorf("%d whole-run connections kept, want none", len(tl.conns))
	}
	s := tl.Snapshot()
	if s.Total != 0 || s.Unread != 0 || s.Dimensions["cluster"].Total() != 0 {
		t.Errorf("whole run: total %d, unread %d, cluster %v; want all empty", s.Total, s.Unread, s.Dimensions["cluster"])
	}
	if len(s.Windows) != 1 {
		t.Fatalf("%d windows, want 1", len(s.Windows))
	}
	w := s.Windows[0]
	c := w.Dimensions["cluster"]
	if got, want := c.Total(), int64(n-n/10); got != want || c.Units.Units != want || w.Unattributed["cluster"] != n/10 {
		t.Errorf("window: %d answers in %d units, %d unattributed; want %d in %d, %d", got, c.Units.Units, w.Unattributed["cluster"], want, want, n/10)
	}
}

// WindowStarts gives the cut times the windows' counts carry, without
// their counts: what the converge gate looks at every tick.
func TestWindowStarts(t *testing.T) {
	t.Parallel()
	start := time.Unix(1700000000, 0)
	tl := New(start, time.Minute)
	if got := tl.WindowStarts(); len(got) != 0 {
		t.Fatalf("no cut yet: %v, want none", got)
	}
	for _, at := range []time.Duration{0, 3 * time.Second, 7 * time.Second} {
		if _, err := tl.Cut(start.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	ws, _ := tl.Windows()
	got := tl.WindowStarts()
	if len(got) != 3 || len(ws) != 3 {
		t.Fatalf("%d starts, %d windows; want 3 and 3", len(got), len(ws))
	}
	for i := range ws {
		if !got[i].Equal(ws[i].Start) || !got[i].Equal(start.Add([]time.Duration{0, 3 * time.Second, 7 * time.Second}[i])) {
			t.Errorf("window %d: start %v, counts say %v", i, got[i], ws[i].Start)
		}
	}
}
