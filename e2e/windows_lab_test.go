package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/reports"
)

// followScenario is fromMeshScenario (the kuma-canary scenario judging
// the split by zone against the TrafficRoute) in windows that follow the
// route (split.windows.follow), over an attack long enough to patch the
// route in its middle.
var followScenario = strings.NewReplacer(
	// 64 spread connections: a window of a frozen data plane, 50/50 against
	// an expected 90/10, then FAILs; over the ~20 uneven connections an
	// open loop opens by itself CI saw it INCONCLUSIVE (the design effect
	// evaluated at the expected share grows with the distance from it:
	// docs/statistics.md §10).
	"attack: {rate: 400/s, requests: 2000}", "attack: {rate: 150/s, duration: 36s, connections: 64}",
	"      margin: 6%\n", "      margin: 8%\n      windows: {follow: true, poll: 1s, settle: 6s}\n",
).Replace(fromMeshScenario)

// patchAfter is how long after the run starts the test patches the
// route: the run's setup (port-forward, inventory, first read) takes a
// few seconds, so this lands in the attack's first half; the report's
// windows show where it landed, and the test fails if not inside.
const patchAfter = 14 * time.Second

// TestWindowsFollowThePatchedTrafficRoute: during one run, the test
// patches the TrafficRoute 90/10 → 50/50 with kubectl; the run follows
// the object and PASSes with two judged windows, the first naming
// weight 90 and the resourceVersion before, the last 50 and the one
// after, with the change's convergence. Then, with the lab's fault switch
// on (its data plane keeps the route it has: daemon.FreezeAnnotation),
// the same run while the route is patched back to 90/10 FAILs, naming
// the window after the change.
func TestWindowsFollowThePatchedTrafficRoute(t *testing.T) {
	t.Parallel()
	if !strings.Contains(followScenario, "duration: 36s") || !strings.Contains(followScenario, "follow: true") {
		t.Fatalf("followScenario no longer derives from fromMeshScenario:\n%s", followScenario)
	}
	l, f := fromMeshLab(t, "kuma-canary", followScenario)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	patch := func(c1, c2 int) []string {
		return []string{"patch", "trafficroute", "test-server", "--type", "json", "-p",
			`[{"op":"replace","path":"/spec/conf/split/0/weight","value":` + strconv.Itoa(c1) + `},{"op":"replace","path":"/spec/conf/split/1/weight","value":` + strconv.Itoa(c2) + `}]`}
	}
	// run runs the scenario and patches the route patchAfter into it.
	run := func(c1, c2 int) e2etest.Result {
		t.Helper()
		done := make(chan e2etest.Result, 1)
		go func() { done <- mv.Run(t, e2etest.Cmd{Context: ctx}, "run", f, "--kubeconfig", l.Kubeconfig) }()
		select {
		case r := <-done:
			t.Fatalf("the run ended before the patch (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
		case <-time.After(patchAfter):
		}
		e2etest.Kubectl(t, l, "c1", patch(c1, c2)...)
		return <-done
	}
	windows := func(r e2etest.Result) (*reports.Report, *reports.Windows) {
		t.Helper()
		rep := r.Report()
		if rep == nil || len(rep.Expectation) == 0 || rep.Expectation[0].Windows == nil {
			t.Fatalf("no windows in the report (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
		}
		return rep, rep.Expectation[0].Windows
	}

	// Following: PASS, two judged windows, each with its weight and
	// resourceVersion.
	r := run(50, 50)
	rep, w := windows(r)
	e := rep.Expectation[0]
	var judged []reports.Window
	for _, x := range w.Windows {
		if x.Judged {
			judged = append(judged, x)
		}
	}
	if rep.Verdict != assert.Pass || len(judged) != 2 {
		t.Fatalf("verdict %s with %d judged windows (%s), want PASS with 2\n%s", rep.Verdict, len(judged), e.Reason, r.Stdout)
	}
	first, last := judged[0], judged[1]
	if first.Expected["c1"] != 0.9 || last.Expected["c1"] != 0.5 || first.Source == nil || last.Source == nil || first.Source.ResourceVersion == last.Source.ResourceVersion {
		t.Errorf("windows' expectations %v (%+v) then %v (%+v), want c1 90%% then 50%% at two resourceVersions", first.Expected, first.Source, last.Expected, last.Source)
	}
	if len(w.Converge) != 1 || !w.Converge[0].Converged {
		t.Errorf("convergence %+v, want the change converged", w.Converge)
	}
	for _, x := range w.Windows {
		t.Logf("window %d %s–%s settling=%v expected %v rv %v: %s n=%d", x.Index, x.Start, x.End, x.Settling, x.Expected, x.Source, x.Verdict, x.Split.N)
	}
	if !strings.Contains(r.Stdout+r.Stderr, "TrafficRoute test-server changed") {
		t.Errorf("the run did not print the change it followed\n%s", r.Stdout)
	}

	// Not following: the lab's data plane keeps 50/50 while the route
	// says 90/10.
	e2etest.Kubectl(t, l, "c1", "annotate", "trafficroute", "test-server", daemon.FreezeAnnotation+"=true")
	r = run(90, 10)
	rep, w = windows(r)
	e = rep.Expectation[0]
	if rep.Verdict != assert.Fail || w.Deciding == 0 {
		t.Fatalf("frozen data plane: verdict %s (%s), want FAIL naming a window\n%s", rep.Verdict, e.Reason, r.Stdout)
	}
	d := w.Windows[w.Deciding-1]
	if d.Expected["c1"] != 0.9 || d.Source == nil || !strings.Contains(e.Reason, "window "+strconv.Itoa(d.Index)+" of") || !strings.Contains(e.Reason, "resourceVersion "+d.Source.ResourceVersion) {
		t.Errorf("the FAIL names window %d expecting %v (%+v): %s", d.Index, d.Expected, d.Source, e.Reason)
	}
	t.Logf("frozen: %s", e.Reason)
}
