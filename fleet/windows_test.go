package fleet

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// kept copies every result a ResultWriter writes (a test's sink).
type kept struct {
	res []attack.Result
	ids []attribution.Identity
}

func (k *kept) Record(r *attack.Result, id attribution.Identity, _ bool) {
	c := *r
	v := *r.Result
	c.Result = &v
	k.res, k.ids = append(k.res, c), append(k.ids, id)
}

func (k *kept) RecordUnread(r *attack.Result, ok bool) { k.Record(r, attribution.Identity{}, ok) }

// A distributed run's windows are counted at the coordinator in the
// workers' merged results (windowSink): with the writer holding only a
// few results, so that they reach the tally out of order and late, and
// the tally holding answers back (SetHold), windows cut in the past,
// after half the results were fed, count what a tally cut before any
// result and fed every result in any order counts, per connection too;
// the results also reach the run directory's sink. Without the hold the
// later cuts would start after the answers already counted.
func TestWindowsFromMergedResults(t *testing.T) {
	t.Parallel()
	const runID = "r1"
	// The real clock times the hold: the answers are from now on, held
	// for MaxHold, far longer than the test takes.
	start := time.Now()
	per := [][]Record{workerResults(t, runID, 0, 500, 70, start), workerResults(t, runID, 1, 400, 90, start), workerResults(t, runID, 2, 300, 1000, start)}
	cuts := []time.Time{start, start.Add(400 * time.Millisecond), start.Add(900 * time.Millisecond)}
	most := 0
	for _, recs := range per {
		most = max(most, len(recs))
	}
	// feed adds the records from..to-1 of every worker, in turn.
	feed := func(w *ResultWriter, from, to int) {
		for i := from; i < to; i++ {
			for wk, recs := range per {
				if i < len(recs) {
					if err := w.Add(wk, recs[i].Results); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	// Every result, as the writer numbers its connections, fed to a
	// tally cut before any of them, in a shuffled order.
	all := &kept{}
	aw := NewResultWriter(all, runID, 0)
	feed(aw, 0, most)
	aw.Flush()
	want := tally.New(start, time.Minute)
	for _, c := range cuts {
		if _, err := want.Cut(c); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(25, 3))
	for _, i := range rng.Perm(len(all.res)) {
		if all.ids[i].Empty() && all.res[i].Error == "" {
			want.AddUnread(&all.res[i])
			continue
		}
		want.Add(&all.res[i], all.ids[i])
	}

	got := tally.New(start, time.Minute)
	if err := got.SetHold(tally.MaxHold); err != nil {
		t.Fatal(err)
	}
	if _, err := got.Cut(cuts[0]); err != nil {
		t.Fatal(err)
	}
	rec := &kept{}
	w := NewResultWriter(windowSink{tl: got, next: rec}, runID, 10)
	feed(w, 0, most/2)
	if len(rec.res) == 0 || !rec.res[len(rec.res)-1].Timestamp.After(cuts[2]) {
		t.Fatalf("%d results fed before the late cuts, want some answered after the last cut", len(rec.res))
	}
	for _, c := range cuts[1:] {
		if used, err := got.Cut(c); err != nil || !used.Equal(c) {
			t.Fatalf("the cut at %s started at %s (%v): the answers after it were not held back", c.Sub(start), used.Sub(start), err)
		}
	}
	feed(w, most/2, most)
	w.Flush()
	got.ReleaseHeld()
	if len(rec.res) != len(all.res) || w.stats.OutOfOrder == 0 {
		t.Fatalf("the run directory's sink got %d results, want %d; %d out of order, want some", len(rec.res), len(all.res), w.stats.OutOfOrder)
	}
	gw, _ := got.Windows()
	ww, _ := want.Windows()
	if len(gw) != len(cuts) || len(ww) != len(cuts) {
		t.Fatalf("%d and %d windows, want %d", len(gw), len(ww), len(cuts))
	}
	for i := range gw {
		g, x := gw[i].Dimensions["cluster"], ww[i].Dimensions["cluster"]
		if g.Total() == 0 || !slices.Equal(g.Buckets, x.Buckets) || !slices.Equal(g.N, x.N) || g.Units.Units != x.Units.Units || !slices.Equal(g.Units.SumXX, x.Units.SumXX) {
			t.Errorf("window %d: %v %v %+v, want %v %v %+v", i, g.Buckets, g.N, *g.Units, x.Buckets, x.N, *x.Units)
		}
	}
}

// Only a scenario with a split in windows has the coordinator count the
// merged results in the runner's tally.
func TestWindowTally(t *testing.T) {
	t.Parallel()
	tl := tally.New(time.Now(), time.Minute)
	split := &scenarios.Scenario{Expect: []scenarios.Expectation{{Split: &scenarios.Split{}}}}
	windowed := &scenarios.Scenario{Expect: []scenarios.Expectation{{Split: &scenarios.Split{Windows: &scenarios.Windows{Follow: true}}}}}
	if windowTally(split, tl) != nil || windowTally(windowed, tl) != tl {
		t.Error("the tally is fed without windows, or not with them")
	}
}
