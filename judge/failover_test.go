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

// ciliumAt is rebel-base's global Service with local affinity as read
// with c1Pods ready pods in c1 and two in c2, both Services at
// resourceVersion rv.
func ciliumAt(rv string, c1Pods int) meshconfig.Expected {
	shares := map[string]float64{"c1": 1, "c2": 0}
	if c1Pods == 0 {
		shares = map[string]float64{"c1": 0, "c2": 1}
	}
	e := meshconfig.Expected{
		Ref: meshconfig.Ref{Kind: meshconfig.KindService, Namespace: "default", Name: "rebel-base"}, By: "cluster",
		Shares: shares, Model: assert.ModelEqualPerPod,
		Backends: map[string]int{"c1": c1Pods, "c2": 2}, BackendsOf: "Service default/rebel-base",
	}
	for _, c := range []string{"c1", "c2"} {
		e.Sources = append(e.Sources, meshconfig.Source{Cluster: c, APIVersion: "v1", Kind: "Service", Namespace: "default", Name: "rebel-base", ResourceVersion: rv})
	}
	return e
}

func clusterWindow(start time.Time, off time.Duration, c1, c2 int64) tally.WindowCounts {
	return tally.WindowCounts{Start: start.Add(off),
		Dimensions: map[string]assert.Counts{"cluster": {Buckets: []string{"c1", "c2"}, N: []int64{c1, c2}}}}
}

// A failover judged as a timeline: c1's rebel-base scaled to zero at
// 15 s and back at 30 s (the Service's resourceVersion unchanged). The
// judged windows are before, during and after; each change names its
// cause, and the time the traffic took to move is measured from the
// timeline's per-second slices. A data plane that keeps sending to c1
// while it has no ready pod FAILs the window during the failover, and
// the move is reported as not made.
func TestFailoverTimeline(t *testing.T) {
	t.Parallel()
	sc := parse(t, meshTestHeader+`expect:
  - split: {by: cluster, fromMesh: {ciliumService: default/rebel-base}, windows: {follow: true, settle: 3s}}
`)
	sp := sc.Expect[0].Split
	start := time.Unix(1_800_000_000, 0)
	mesh := []MeshWindow{
		{Start: start, Expected: ciliumAt("290", 2)},
		{Start: start.Add(15 * time.Second), Settling: true, Expected: ciliumAt("290", 0)},
		{Start: start.Add(18 * time.Second), Expected: ciliumAt("290", 0)},
		{Start: start.Add(30 * time.Second), Settling: true, Expected: ciliumAt("290", 2)},
		{Start: start.Add(33 * time.Second), Expected: ciliumAt("290", 2)},
	}
	// slices: 40 requests a second, served by c1 until moveAt, by c2
	// until backAt, then by c1 again.
	slices := func(moveAt, backAt int) []tally.Slice {
		out := make([]tally.Slice, 45)
		for i := range out {
			c := "c1"
			if i >= moveAt && i < backAt {
				c = "c2"
			}
			out[i] = tally.Slice{Start: time.Duration(i) * time.Second, Requests: 40, Clusters: map[string]int64{c: 40}}
		}
		return out
	}
	for _, c := range []struct {
		name           string
		moveAt, backAt int
		during         [2]int64
		want           assert.Verdict
	}{
		// The traffic moves at 16 s (c1's last request in 15–16 s) and
		// back at 31 s.
		{"fails over", 16, 31, [2]int64{0, 480}, assert.Pass},
		// c1 keeps its traffic: nothing moves.
		{"stays", 45, 45, [2]int64{480, 0}, assert.Fail},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			snap := tally.Snapshot{Start: start, SliceWidth: time.Second, Slices: slices(c.moveAt, c.backAt), Total: 1800,
				Windows: []tally.WindowCounts{
					clusterWindow(start, 0, 600, 0),
					clusterWindow(start, 15*time.Second, 40, 80),
					clusterWindow(start, 18*time.Second, c.during[0], c.during[1]),
					clusterWindow(start, 30*time.Second, 40, 80),
					clusterWindow(start, 33*time.Second, 480, 0),
				}}
			j := New(sc, Attack{Connections: 1}).WithMesh(Mesh{sp.FromMesh: {Expected: mesh[0].Expected, Windows: mesh}})
			r := j.Evaluate(fakeEvidence{counts: snap}, -1, 0)[0]
			if r.Verdict != c.want {
				t.Fatalf("verdict %s (%s), want %s", r.Verdict, r.Reason, c.want)
			}
			w := r.Windows
			var phases []string
			for _, x := range w.Windows {
				phases = append(phases, x.Phase)
			}
			if strings.Join(phases, ",") != "before,,during,,after" {
				t.Errorf("phases %q, want before, during and after around the settling windows", phases)
			}
			if len(w.Converge) != 2 {
				t.Fatalf("changes %+v, want two", w.Converge)
			}
			for i, want := range []string{"c1 has no ready backend of Service default/rebel-base (2 → 0)", "c1 has ready backends of Service default/rebel-base again (0 → 2)"} {
				cv := w.Converge[i]
				if cv.Cause != causeBackends || cv.Why != want || cv.Change != 2+2*i || !strings.Contains(cv.Text, want) {
					t.Errorf("change %d: %+v, want caused by the backends: %s", i+1, cv, want)
				}
			}
			m := w.Converge[0].Moved
			if m == nil {
				t.Fatal("the failover's move was not measured")
			}
			switch c.want {
			case assert.Pass:
				back := w.Converge[1].Moved
				if !m.Moved || m.LastFrom != 16*time.Second || m.FirstTo != 16*time.Second || m.Within != time.Second || m.Resolution != time.Second ||
					m.From[0] != "c1" || m.To[0] != "c2" || back == nil || !back.Moved || back.LastFrom != 31*time.Second || back.Within != time.Second || back.From[0] != "c2" {
					t.Errorf("moves %+v then %+v; want c1→c2 within 1s (last c1 request before 16s), c2→c1 within 1s", m, back)
				}
				if !strings.Contains(w.Converge[0].Text, "traffic moved from c1 to c2 within 1s") {
					t.Errorf("change text %q does not say when the traffic moved", w.Converge[0].Text)
				}
			case assert.Fail:
				if m.Moved || !strings.Contains(w.Converge[0].Text, "c2 served no request after the change") || w.Deciding != 3 {
					t.Errorf("move %+v (%s), deciding %d; want not moved, window 3 deciding", m, w.Converge[0].Text, w.Deciding)
				}
			}
			var sb strings.Builder
			if err := reports.WriteJSON(&sb, &reports.Report{Expectation: []reports.Expectation{r}}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// What changed between two reads: an object's new resourceVersion is an
// edit; the same objects with other ready pods behind them a failover.
func TestChangeOf(t *testing.T) {
	t.Parallel()
	edited := ciliumAt("291", 0)
	for _, c := range []struct {
		name      string
		prev, cur meshconfig.Expected
		cause     string
		why       string
	}{
		{"scaled to zero", ciliumAt("290", 2), ciliumAt("290", 0), causeBackends, "c1 has no ready backend of Service default/rebel-base (2 → 0)"},
		{"scaled down", ciliumAt("290", 2), ciliumAt("290", 1), causeBackends, "c1: 2 → 1 ready backends of Service default/rebel-base"},
		{"edited and scaled", ciliumAt("290", 2), edited, causeSpec, "Service default/rebel-base in c1 resourceVersion 290 → 291"},
		{"istio pods", vsAt("100", 0.5), vsAt("100", 0), causeBackends, "the ready pods behind the objects changed"},
		{"istio weights", vsAt("100", 0.5), vsAt("101", 0.1), causeSpec, "VirtualService demo/reviews in c1 resourceVersion 100 → 101"},
	} {
		ch, ok := changeOf(c.prev, c.cur)
		if !ok || ch.cause != c.cause || !strings.Contains(ch.why, c.why) {
			t.Errorf("%s: %+v %v, want %s: %s", c.name, ch, ok, c.cause, c.why)
		}
	}
	if ch, ok := changeOf(ciliumAt("290", 2), ciliumAt("290", 2)); ok {
		t.Errorf("the same read: %+v, want no change", ch)
	}
}
