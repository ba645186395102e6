package judge

import (
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/meshconfig"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/tally"
)

// windowCounts is one window of v1/v2 counts starting at off.
func windowCounts(start time.Time, off time.Duration, v1, v2 int64) tally.WindowCounts {
	return tally.WindowCounts{Start: start.Add(off),
		Dimensions: map[string]assert.Counts{"version": {Buckets: []string{"v1", "v2"}, N: []int64{v1, v2}}}}
}

// vsAt is the VirtualService's split at one resourceVersion.
func vsAt(rv string, v2 float64) meshconfig.Expected {
	return meshconfig.Expected{
		Ref: meshconfig.Ref{Kind: meshconfig.KindVirtualService, Namespace: "demo", Name: "reviews"}, By: "version",
		Shares: map[string]float64{"v1": 1 - v2, "v2": v2}, Model: assert.ModelWeights,
		Sources: []meshconfig.Source{{Cluster: "c1", APIVersion: "networking.istio.io/v1", Kind: "VirtualService",
			Namespace: "demo", Name: "reviews", ResourceVersion: rv}},
	}
}

// A split following its VirtualService is judged per window against the
// version in force, the settling window after a change is not judged, the
// change's convergence is timed by the window after it, and a window
// whose routing lags FAILs the split, named with its weight and
// resourceVersion.
func TestWindowsFollowTheObject(t *testing.T) {
	t.Parallel()
	sc := parse(t, meshTestHeader+`expect:
  - split: {by: version, fromMesh: {virtualService: demo/reviews}, windows: {follow: true, settle: 5s}}
`)
	sp := sc.Expect[0].Split
	start := time.Unix(1_800_000_000, 0)
	mesh := []MeshWindow{
		{Start: start, Expected: vsAt("100", 0.1)},
		{Start: start.Add(20 * time.Second), Settling: true, Expected: vsAt("101", 0.5)},
		{Start: start.Add(25 * time.Second), Expected: vsAt("101", 0.5)},
	}
	snap := func(late int64) tally.Snapshot {
		return tally.Snapshot{Start: start, SliceWidth: time.Second, Slices: make([]tally.Slice, 40), Total: 6000,
			Windows: []tally.WindowCounts{
				windowCounts(start, 0, 1800, 200),
				windowCounts(start, 20*time.Second, 700, 300), // settling: anything goes
				windowCounts(start, 25*time.Second, 1500+late, 1500-late),
			}}
	}
	for _, c := range []struct {
		name string
		late int64
		want assert.Verdict
		has  []string
	}{
		{"follows", 0, assert.Pass, []string{"every one of the 2 windows judged PASSes"}},
		{"lags", 900, assert.Fail, []string{"window 3 of 3 (25s–40s, expected v1=50%, v2=50% from VirtualService demo/reviews resourceVersion 101): FAIL"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			j := New(sc, Attack{Connections: 1}).WithMesh(Mesh{sp.FromMesh: {Expected: mesh[0].Expected, Windows: mesh}})
			r := j.Evaluate(fakeEvidence{counts: snap(c.late)}, -1, 0)[0]
			if r.Verdict != c.want {
				t.Fatalf("verdict %s (%s), want %s", r.Verdict, r.Reason, c.want)
			}
			for _, h := range c.has {
				if !strings.Contains(r.Reason, h) {
					t.Errorf("reason lacks %q:\n%s", h, r.Reason)
				}
			}
			w := r.Windows
			if w == nil || w.Judged != 2 || len(w.Windows) != 3 || w.Windows[1].Judged || !w.Windows[1].Settling {
				t.Fatalf("windows %+v: want 3, the settling one not judged", w)
			}
			if w.Windows[0].Source.ResourceVersion != "100" || w.Windows[2].Source.ResourceVersion != "101" || w.Windows[2].Expected["v2"] != 0.5 {
				t.Errorf("windows' sources %+v %+v", w.Windows[0].Source, w.Windows[2].Source)
			}
			if len(w.Converge) != 1 {
				t.Fatalf("convergence %+v, want one change", w.Converge)
			}
			cv := w.Converge[0]
			switch c.want {
			case assert.Pass:
				if !cv.Converged || cv.Within != 5*time.Second || cv.Window != 3 {
					t.Errorf("convergence %+v, want within 5s by window 3", cv)
				}
			case assert.Fail:
				if !cv.NotConverged || cv.Window != 3 || w.Deciding != 3 {
					t.Errorf("convergence %+v (deciding %d), want not converged, window 3", cv, w.Deciding)
				}
			}
			var sb strings.Builder
			if err := reports.WriteJSON(&sb, &reports.Report{Expectation: []reports.Expectation{r}}); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The windows recorded so far do not pair with the tally's: not
	// judged yet, and never settled early.
	j := New(sc, Attack{Connections: 1}).WithMesh(Mesh{sp.FromMesh: {Expected: mesh[0].Expected, Windows: mesh[:1]}})
	ev := fakeEvidence{counts: snap(0)}
	if r := j.Evaluate(ev, -1, 0)[0]; r.Verdict != assert.Inconclusive || !strings.Contains(r.Reason, "still following") {
		t.Errorf("unpaired windows: %s (%s)", r.Verdict, r.Reason)
	}
}

// Fixed windows judge every window against the scenario's weights.
func TestFixedWindows(t *testing.T) {
	t.Parallel()
	sc := parse(t, meshTestHeader+`expect:
  - split: {by: version, weights: {v1: 80, v2: 20}, windows: {every: 10s}}
`)
	start := time.Unix(1_800_000_000, 0)
	snap := tally.Snapshot{Start: start, SliceWidth: time.Second, Slices: make([]tally.Slice, 20), Total: 4000,
		Windows: []tally.WindowCounts{windowCounts(start, 0, 1600, 400), windowCounts(start, 10*time.Second, 1000, 1000)}}
	j := New(sc, Attack{Connections: 1})
	r := j.Evaluate(fakeEvidence{counts: snap}, -1, 0)[0]
	if r.Verdict != assert.Fail || r.Windows == nil || r.Windows.Deciding != 2 || r.Windows.Mode != "every" || !strings.HasPrefix(r.Reason, "window 2 of 2 (10s–20s, expected v1=80%, v2=20%): FAIL") {
		t.Fatalf("%s: %s", r.Verdict, r.Reason)
	}
	if j.Settled(fakeEvidence{counts: snap}, 0, 2) {
		t.Error("a split in windows settled early")
	}
	if r := j.Evaluate(fakeEvidence{counts: tally.Snapshot{Total: 10}}, -1, 0)[0]; r.Verdict != assert.Inconclusive || !strings.Contains(r.Reason, "no windows were counted") {
		t.Errorf("no windows: %s (%s)", r.Verdict, r.Reason)
	}
}

// plan says a split in windows is planned per window.
func TestPlanSaysPerWindow(t *testing.T) {
	t.Parallel()
	sc := parse(t, meshTestHeader+`expect:
  - split: {by: version, weights: {v1: 80, v2: 20}, windows: {every: 10s}}
`)
	j := New(sc, Attack{Connections: 1})
	var sb strings.Builder
	p, err := j.PlanExpectation(&sb, j.Expectations()[0], 0)
	if err != nil || p.Requests == 0 || !strings.Contains(sb.String(), "judged in windows (split.windows): every window needs the requests below") {
		t.Errorf("plan %+v, %v:\n%s", p, err, sb.String())
	}
}
