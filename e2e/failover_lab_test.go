package e2e

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/reports"
)

// Failover as a timeline (issue 25 item 3): the catalog's cilium-failover
// scenario attacks from two worker pods in c1 through c1's datapath (the
// lab's stand-in for Cilium's socket load balancer in the client's node)
// and, at the coordinator, follows rebel-base's global Service with local
// affinity and cuts the windows in the workers' merged results, while
// the test scales c1's rebel-base to zero a third of the way into the
// attack and back to two at two thirds, as a user does with kubectl. The
// run judges three windows: before (c1 100%), during (c2 100%) and after
// (c1 100%), each PASS, with the two changes reported as failovers caused
// by c1's ready backends, and the time the traffic took to move measured
// from the requests. Then the lab's fault switch freezes the data plane
// with affinity on while the Service drops it: the Service now spreads
// over both clusters, the data plane still prefers c1, and the same run
// FAILs naming the window before the failover; the window during it
// (only c2 has pods, so both agree) PASSes.
func TestFailoverTimeline(t *testing.T) {
	t.Parallel()
	l := mv.Lab(t, e2etest.LabSpec{Topology: "cilium-failover"})
	applyRBAC(t, l, "cilium-failover", []string{"c1"})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	r := runScaling(t, ctx, l)
	rep, w := followWindows(t, r)
	var judged []reports.Window
	for _, x := range w.Windows {
		if x.Judged {
			judged = append(judged, x)
		}
	}
	if rep.Verdict != assert.Pass || r.Code != 0 {
		t.Fatalf("verdict %s (exit %d): %s, want PASS\n%s\n%s", rep.Verdict, r.Code, rep.Expectation[0].Reason, r.Stdout, r.Stderr)
	}
	if len(judged) != 3 || judged[0].Expected["c1"] != 1 || judged[1].Expected["c2"] != 1 || judged[2].Expected["c1"] != 1 {
		t.Fatalf("judged windows %+v, want three: c1 100%%, c2 100%%, c1 100%%", judged)
	}
	for _, x := range judged {
		if x.Split.N < 100 {
			t.Errorf("window %d judged %d requests, want at least 100 (the scale landed too near an end)", x.Index, x.Split.N)
		}
	}
	if judged[0].Phase != "before" || judged[1].Phase != "during" || judged[2].Phase != "after" {
		t.Errorf("phases %q, %q, %q; want before, during, after", judged[0].Phase, judged[1].Phase, judged[2].Phase)
	}
	if len(w.Converge) != 2 || !w.Converge[0].Converged || !w.Converge[1].Converged {
		t.Fatalf("convergence %+v, want both changes converged", w.Converge)
	}
	for i, c := range w.Converge {
		t.Logf("change: %s", c.Text)
		whys, from, to := []string{"c1 has no ready backend of Service default/rebel-base (2 → 0)"}, "c1", "c2"
		if i == 1 {
			// Scaled back to 2, c1's pods become ready one by one: the
			// read that first sees the change may see one of them or both
			// (CI saw "0 → 1" on a loaded machine); either is what the
			// read saw, and a later 1 → 2 moves no share.
			whys, from, to = []string{"c1 has ready backends of Service default/rebel-base again (0 → 2)",
				"c1 has ready backends of Service default/rebel-base again (0 → 1)"}, "c2", "c1"
		}
		if c.Cause != "backends" || !slices.Contains(whys, c.Why) {
			t.Errorf("change %d: cause %q (%s), want backends: one of %q", i+1, c.Cause, c.Why, whys)
		}
		m := c.Moved
		if m == nil || !m.Moved || len(m.From) != 1 || m.From[0] != from || len(m.To) != 1 || m.To[0] != to {
			t.Errorf("change %d: moved %+v, want the traffic measured moving from %s to %s", i+1, m, from, to)
			continue
		}
		// The move lies between the window before the change and the
		// end of the settling window.
		chw := w.Windows[c.Change-1]
		if m.LastFrom <= w.Windows[c.Change-2].Start || m.LastFrom > chw.End+m.Resolution || m.Within > chw.End-chw.Start+m.Resolution {
			t.Errorf("change %d: moved %+v outside the change's window %s–%s", i+1, m, chw.Start, chw.End)
		}
	}
	if !strings.Contains(r.Stdout, "1 (before)") || !strings.Contains(r.Stdout, "c1 has no ready backend of Service default/rebel-base") {
		t.Errorf("the terminal report does not show the timeline's phases and causes\n%s", r.Stdout)
	}

	// The fault switch: the data plane keeps the route it has (local
	// affinity) while the Service in c1 drops the annotation, so the
	// Service expects both clusters' pods alike.
	e2etest.Kubectl(t, l, "c1", "annotate", "service", "rebel-base", daemon.FreezeAnnotation+"=true", "service.cilium.io/affinity-")
	r = runScaling(t, ctx, l)
	rep, w = followWindows(t, r)
	e := rep.Expectation[0]
	if rep.Verdict != assert.Fail || r.Code != 1 || w.Deciding == 0 {
		t.Fatalf("frozen data plane: verdict %s (exit %d): %s, want FAIL naming a window\n%s", rep.Verdict, r.Code, e.Reason, r.Stdout)
	}
	// The deciding window is the one furthest outside its band, before
	// or after the failover.
	d := w.Windows[w.Deciding-1]
	if !d.Judged || d.Expected["c1"] != 0.5 || !strings.Contains(e.Reason, "window "+strconv.Itoa(d.Index)+" of") {
		t.Errorf("the FAIL names window %d expecting %v: %s; want a window with c1's pods, expecting c1 50%%", d.Index, d.Expected, e.Reason)
	}
	var verdicts []string
	for _, x := range w.Windows {
		if x.Judged {
			verdicts = append(verdicts, x.Phase+" "+x.Verdict.String())
		}
	}
	// During the failover only c2 has pods, so the Service and the data
	// plane agree: that window must not FAIL (it may be INCONCLUSIVE when
	// a loaded lab's controller scaled late and left it short).
	if v := strings.Join(verdicts, ", "); v != "before FAIL, during PASS, after FAIL" && v != "before FAIL, during INCONCLUSIVE, after FAIL" {
		t.Errorf("judged windows %q, want before FAIL, during PASS (or INCONCLUSIVE), after FAIL", verdicts)
	}
	t.Logf("frozen: %s", e.Reason)
}

// runScaling runs the catalog's cilium-failover scenario and, once the
// lab's datapath routes its requests, scales c1's rebel-base to zero 14 s
// into the 45 s attack and back to two at 29 s.
func runScaling(t *testing.T, ctx context.Context, l *lab.Lab) e2etest.Result {
	t.Helper()
	done := make(chan e2etest.Result, 1)
	earlier := workerPods(t, l)
	go func() {
		done <- mv.Run(t, e2etest.Cmd{Context: ctx}, "run", "cilium-failover", "--kubeconfig", l.Kubeconfig)
	}()
	// The attack has started when this run's worker pods' datapath counts
	// requests (the lab publishes its counts every second).
	var started time.Time
	for started.IsZero() {
		select {
		case r := <-done:
			t.Fatalf("the run ended before its attack was seen (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
		case <-time.After(200 * time.Millisecond):
		}
		if routedBy(t, l, earlier) > 0 {
			started = time.Now()
		}
	}
	for _, s := range []struct {
		at       time.Duration
		replicas int
	}{{14 * time.Second, 0}, {29 * time.Second, 2}} {
		select {
		case r := <-done:
			t.Fatalf("the run ended before the scale to %d (exit %d)\n%s\n%s", s.replicas, r.Code, r.Stdout, r.Stderr)
		case <-time.After(time.Until(started.Add(s.at))):
		}
		e2etest.Kubectl(t, l, "c1", "scale", "deployment", "rebel-base", "--replicas", strconv.Itoa(s.replicas))
	}
	return <-done
}

// workerPods are the worker pods the lab runs or ran, by key.
func workerPods(t *testing.T, l *lab.Lab) map[string]bool {
	t.Helper()
	st, err := daemon.ReadStatus(l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, j := range st.Jobs {
		out[j.Key()] = true
	}
	return out
}

// routedBy is what the datapath of the worker pods not in earlier (an
// earlier run's) routed so far.
func routedBy(t *testing.T, l *lab.Lab, earlier map[string]bool) int64 {
	t.Helper()
	st, err := daemon.ReadStatus(l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, j := range st.Jobs {
		if earlier[j.Key()] {
			continue
		}
		for _, p := range j.Planes {
			if p.Routed != nil {
				n += p.Routed.Requests
			}
		}
	}
	return n
}

// followWindows is a run's report and its first expectation's windows.
func followWindows(t *testing.T, r e2etest.Result) (*reports.Report, *reports.Windows) {
	t.Helper()
	rep := r.Report()
	if rep == nil || len(rep.Expectation) == 0 || rep.Expectation[0].Windows == nil {
		t.Fatalf("no windows in the report (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	w := rep.Expectation[0].Windows
	for _, x := range w.Windows {
		t.Logf("window %d (%s) %s–%s settling=%v expected %v: %s n=%d %s", x.Index, x.Phase, x.Start, x.End, x.Settling, x.Expected, x.Verdict, x.Split.N, x.Reason)
	}
	return rep, w
}
