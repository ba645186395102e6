package tally

import (
	"math/rand/v2"
	"slices"
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
		if err := whole.Cut(c); err != nil {
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
	if err := tl.Cut(start.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := tl.Cut(start.Add(time.Second)); err == nil {
		t.Error("a cut at the last cut's time is accepted")
	}
	for i := 2; i <= MaxWindows; i++ {
		if err := tl.Cut(start.Add(time.Duration(i) * time.Second)); err != nil {
			t.Fatalf("cut %d: %v", i, err)
		}
	}
	if err := tl.Cut(start.Add(time.Hour)); err == nil {
		t.Errorf("cut %d accepted, want at most %d", MaxWindows+1, MaxWindows)
	}
	s := tl.Snapshot()
	if len(s.Windows) != MaxWindows || s.Windows[0].Dimensions["cluster"].Total() != 0 || s.Dimensions["cluster"].Total() != 1 {
		t.Errorf("the request before the first cut: windows %d, first window %d, whole run %d", len(s.Windows), s.Windows[0].Dimensions["cluster"].Total(), s.Dimensions["cluster"].Total())
	}
}
