package podlogs

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// addAt counts one id-less line of tg at second sec after base.
func addAt(c *Counter, tg Target, base time.Time, sec float64, text string) {
	at := base.Add(time.Duration(sec * float64(time.Second)))
	c.Add(Match{Line: Line{Target: tg, Time: at, Text: text}})
}

// Hand-computed background: a probe line every second before and during
// the attack, plus a burst of 50 lines in one 5 s bin before it (the tail
// of the previous run), plus 100 request lines in the window.
func TestWindowTakesOutTheBackground(t *testing.T) {
	from := time.Unix(1_800_000_000, 0).UTC()
	w := Window{From: from, To: from.Add(19 * time.Second), Background: 30 * time.Second}
	c := NewCounter(CounterOptions{RunID: "run"})
	pod := target("rebel-base-0")
	for s := -30; s < 20; s++ {
		addAt(c, pod, from, float64(s)+0.5, "probe")
	}
	for i := range 50 {
		addAt(c, pod, from, -12+float64(i)/50, "previous run")
	}
	for i := range 100 {
		addAt(c, pod, from, float64(i)/5, "request")
	}
	addAt(c, pod, from, 25, "after the window")
	addAt(c, pod, from, -40, "before the background")
	got := c.Pods(w)[pod]
	// Bins of 1 line, one of 51: the quiet level is 1, the 51 (above
	// 1+3+3) is left out with the bin on each side of it: 27 lines in
	// 27 s, 1/s. The window is 20 whole seconds: 20 expected, variance
	// 1·20·(1+20/27).
	want := ClassCount{Window: 120, Background: 80, Rate: 1, Expected: 20, Variance: 20 * (1 + 20.0/27)}
	if !near(got.Served, want) {
		t.Errorf("served %+v, want %+v", got.Served, want)
	}
	if got.Served.Net() != 100 || got.OutsideWindow != 2 || got.BackgroundSeconds != 30 {
		t.Errorf("net %v outside %d background %vs", got.Served.Net(), got.OutsideWindow, got.BackgroundSeconds)
	}
	if tol := Tolerance(36, 2); tol != 20 {
		t.Errorf("tolerance %v, want 3·6+2", tol)
	}

	// A pod started 7.5 s before the window: 7 whole seconds of
	// background, 7 lines.
	young := target("rebel-base-1")
	for s := -7; s < 20; s++ {
		addAt(c, young, from, float64(s)+0.5, "probe")
	}
	w.Since = func(tg Target) time.Time {
		if tg == young {
			return from.Add(-7500 * time.Millisecond)
		}
		return time.Time{}
	}
	got = c.Pods(w)[young]
	want = ClassCount{Window: 20, Background: 7, Rate: 1, Expected: 20, Variance: 20 * (1 + 20.0/7)}
	if !near(got.Served, want) || got.BackgroundSeconds != 7 {
		t.Errorf("young pod: %+v over %vs, want %+v over 7s", got.Served, got.BackgroundSeconds, want)
	}

	// No background period: nothing is taken out.
	w.Background = 0
	if got := c.Pods(w)[pod].Served; got.Expected != 0 || got.Window != 120 {
		t.Errorf("without background: %+v", got)
	}
	// An open window ends at the last line: 26 s for pod's line at 25.
	w.To = time.Time{}
	w.Background = 30 * time.Second
	w.Since = nil
	if got := c.Pods(w)[pod].Served; got.Window != 121 || got.Expected != 26 {
		t.Errorf("open window: %+v", got)
	}
}

func near(a, b ClassCount) bool {
	close := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return a.Window == b.Window && a.Background == b.Background && close(a.Rate, b.Rate) &&
		close(a.Expected, b.Expected) && close(a.Variance, b.Variance)
}

// Statuses split served from failed lines, with or without the run's
// ids; the data plane's own ids join copies to primaries in the window.
func TestCounterStatusesAndDataPlaneIDs(t *testing.T) {
	from := time.Unix(1_800_000_000, 0).UTC()
	w := Window{From: from, To: from.Add(10 * time.Second)}
	v1, v2 := target("callme-v1"), target("callme-v2")
	c := NewCounter(CounterOptions{RunID: "run", Success: func(s int) bool { return s >= 200 && s < 300 }})
	line := func(tg Target, sec float64, id, authority string, status int) {
		c.Add(Match{Line: Line{Target: tg, Time: from.Add(time.Duration(sec * float64(time.Second)))},
			RequestID: id, Shadow: IsShadowHost(authority), Status: status})
	}
	for i := range 10 {
		id := fmt.Sprintf("dp-%d", i)
		line(v1, float64(i), id, "callme:8080", 200)
		if i%2 == 0 {
			line(v2, float64(i)+0.1, id, "callme-shadow:8080", 200)
		}
	}
	line(v2, 3, "dp-99", "callme-shadow:8080", 200) // a copy whose primary is not logged
	line(v1, 4, "dp-50", "callme:8080", 503)        // failed: not a primary
	line(v1, 5, "run-7", "callme:8080", 500)        // one of ours, failed
	line(v1, 6, "run-8", "callme:8080", 200)
	line(v1, 30, "dp-late", "callme:8080", 200) // outside the window
	tot := c.Totals(w)
	if tot.DataPlanePrimaries != 10 || tot.DataPlaneCopies != 6 || tot.DataPlaneBoth != 5 || tot.Requests != 1 || tot.DataPlaneOverflow {
		t.Errorf("totals %+v", tot)
	}
	p := c.Pods(w)
	if got := p[v1]; got.Served.Window != 10 || got.Errors.Window != 1 || got.Failed != 1 || got.Requests != 1 || got.OutsideWindow != 1 {
		t.Errorf("v1 %+v", got)
	}
	if got := p[v2]; got.Copies.Window != 6 || got.Served.Window != 0 {
		t.Errorf("v2 %+v", got)
	}

	small := NewCounter(CounterOptions{RunID: "run", MaxDataPlaneIDs: 3})
	for i := range 5 {
		small.Add(Match{Line: Line{Target: v1, Time: from}, RequestID: fmt.Sprint("id-", i)})
	}
	if tot := small.Totals(w); tot.DataPlanePrimaries != 3 || !tot.DataPlaneOverflow {
		t.Errorf("limit of 3 ids: %+v", tot)
	}
}

// A rule that matches none of a workload's lines is a miss only when the
// pods logged more in the window than their background explains.
func TestRuleCheckMissed(t *testing.T) {
	from := time.Unix(1_800_000_000, 0).UTC()
	w := Window{From: from, To: from.Add(9 * time.Second), Background: 30 * time.Second}
	note := func(c *RuleCheck, sec float64, text string, matched bool) {
		l := Line{Time: from.Add(time.Duration(sec * float64(time.Second))), Text: text}
		c.Note(l, Match{Line: l}, matched)
	}
	probesOnly := NewRuleCheck(from)
	for s := -30; s < 10; s++ {
		note(probesOnly, float64(s), "probe", false)
	}
	missing := NewRuleCheck(from)
	for s := -30; s < 10; s++ {
		note(missing, float64(s), "probe", false)
	}
	for i := range 40 {
		note(missing, float64(i)/4, fmt.Sprintf("Ping: name=callme-service, version=v1 #%d", i), false)
	}
	matching := NewRuleCheck(from)
	note(matching, 1, "served", true)
	for i := range 40 {
		note(matching, float64(i)/4, "other", false)
	}
	// A fresh pod that got no request: its start-up lines, 40 in one
	// second of the window, and nothing since.
	startUp := NewRuleCheck(from)
	for i := range 40 {
		note(startUp, 0.5+float64(i)/100, fmt.Sprintf("Starting CallmeApplication step %d", i), false)
	}
	// A short attack (600 requests in 1.8 s, from x.05 to x+1.85): its
	// lines fill two seconds, every second it touched.
	short := NewRuleCheck(from)
	for i := range 600 {
		note(short, 0.05+1.8*float64(i)/600, fmt.Sprintf("Ping: name=callme-service, version=v1 #%d", i), false)
	}
	shortNeeds := MissedNeeds(from.Add(50*time.Millisecond), from.Add(1850*time.Millisecond))
	for _, c := range []struct {
		name  string
		rc    *RuleCheck
		needs int
		want  bool
	}{{"probes only", probesOnly, MissedSeconds, false}, {"request lines missed", missing, MissedSeconds, true},
		{"matches some", matching, MissedSeconds, false}, {"start-up lines only", startUp, MissedSeconds, false},
		{"a short attack's lines missed", short, shortNeeds, true},
		{"start-up lines only, short attack", startUp, shortNeeds, false}} {
		st := c.rc.Stats(w)
		if got := st.Missed(5, c.needs); got != c.want {
			t.Errorf("%s: missed %v, want %v (needs %d seconds; %+v)", c.name, got, c.want, c.needs, st)
		}
	}
	st := missing.Stats(w)
	if len(st.Samples) != MaxSamples || st.Samples[0] != "probe" || st.Read != 80 {
		t.Errorf("samples %q read %d: want the window's first lines", st.Samples, st.Read)
	}
}

func TestMissedNeeds(t *testing.T) {
	at := func(sec float64) time.Time {
		return time.Unix(1_800_000_000, 0).Add(time.Duration(sec * float64(time.Second)))
	}
	for _, c := range []struct {
		name       string
		start, end float64
		want       int
	}{
		{"within one second", 0.1, 0.9, 2},
		{"two seconds touched", 0.05, 1.85, 2},
		{"three seconds touched by 1.2 s", 0.9, 2.1, 3},
		{"long attack", 0, 60, MissedSeconds},
		{"end unknown", 5, 0, MissedSeconds},
	} {
		if got := MissedNeeds(at(c.start), at(c.end)); got != c.want {
			t.Errorf("%s: %d seconds, want %d", c.name, got, c.want)
		}
	}
}

// The mirror target's own primaries do not join its copies.
func TestDataPlanePrimariesExcludeTheTarget(t *testing.T) {
	from := time.Unix(1_800_000_000, 0).UTC()
	v1, v2 := target("callme-v1"), target("callme-v2")
	c := NewCounter(CounterOptions{RunID: "run", Primary: func(m Match) bool { return m.Line.Target != v2 }})
	add := func(tg Target, id string, shadow bool) {
		c.Add(Match{Line: Line{Target: tg, Time: from}, RequestID: id, Shadow: shadow})
	}
	add(v1, "a", false)
	add(v2, "a", true)
	add(v2, "b", false) // routed to v2 as a primary: not in the join
	add(v1, "c", false)
	if tot := c.Totals(Window{From: from, To: from.Add(time.Second)}); tot.DataPlanePrimaries != 2 || tot.DataPlaneBoth != 1 || tot.DataPlaneCopies != 1 {
		t.Errorf("%+v", tot)
	}
}

// A pod younger than the background period, right after another run: the
// other run's burst fills most of its short history and is still not
// taken for background; with fewer than three seconds, the plain mean.
func TestBackgroundOfAYoungPodAfterAnotherRun(t *testing.T) {
	from := time.Unix(1_800_000_000, 0).UTC()
	c := NewCounter(CounterOptions{RunID: "run"})
	pod := target("callme-v2-0")
	for i := range 300 { // the previous run's copies, 8 of the pod's 12 s
		addAt(c, pod, from, -11+float64(i)/37.5, "copy")
	}
	for i := range 300 {
		addAt(c, pod, from, 2+float64(i)/30, "copy")
	}
	w := Window{From: from, To: from.Add(17 * time.Second), Background: 30 * time.Second,
		Since: func(Target) time.Time { return from.Add(-12 * time.Second) }}
	got := c.Pods(w)[pod].Served
	if got.Window != 300 || got.Background != 300 || got.Expected != 0 || got.Net() != 300 {
		t.Errorf("%+v, want the 300 lines of the window, none background", got)
	}
	w.Since = func(Target) time.Time { return from.Add(-2 * time.Second) }
	if got := c.Pods(w)[pod].Served; got.Background != 0 || got.Rate != 0 {
		t.Errorf("2 s of quiet history: %+v", got)
	}
}

// The demo's case: a pod 18 s old whose history is 15 s of the previous
// run's requests (16 a second) and then the 3 s gap before this run's
// window, with a kubelet-like probe line every second all along. Only the
// probes are background: a lower quartile of the bins would sit inside
// the burst (it covers more than three quarters of them) and take 16/s
// for background.
func TestBackgroundIgnoresABurstFillingMostOfTheHistory(t *testing.T) {
	from := time.Unix(1_800_000_000, 0).UTC()
	c := NewCounter(CounterOptions{RunID: "run"})
	pod := target("persons-c3-0")
	for s := -18; s < 0; s++ {
		addAt(c, pod, from, float64(s)+0.5, "probe")
	}
	for i := range 15 * 16 {
		addAt(c, pod, from, -18+float64(i)/16, "previous run")
	}
	w := Window{From: from, To: from.Add(10 * time.Second), Background: 30 * time.Second,
		Since: func(Target) time.Time { return from.Add(-18 * time.Second) }}
	got := c.Pods(w)[pod].Served
	if got.Rate < 0.5 || got.Rate > 1.5 {
		t.Errorf("background rate %.2f/s from %+v, want the probes' 1/s", got.Rate, got)
	}
}

// The other demo case: a pod 25 s old, quiet for its first 10 s, then the
// previous run's 15 s ending just 2 s before the window (its last lines
// still in the last seconds before it). The quiet start sets the level.
func TestBackgroundIgnoresABurstRightBeforeTheWindow(t *testing.T) {
	from := time.Unix(1_800_000_000, 0).UTC()
	c := NewCounter(CounterOptions{RunID: "run"})
	pod := target("callme-v1-0")
	for i := range 15 * 30 {
		addAt(c, pod, from, -16+float64(i)/30, "previous run")
	}
	w := Window{From: from, To: from.Add(10 * time.Second), Background: 30 * time.Second,
		Since: func(Target) time.Time { return from.Add(-25 * time.Second) }}
	if got := c.Pods(w)[pod].Served; got.Rate != 0 || got.Expected != 0 {
		t.Errorf("background %+v, want none: the lines are the previous run's", got)
	}
}

// The skupper-2-per-pod demo case: a young pod's history is the previous
// run (20 lines a second for 12 s), the second it only partly filled (its
// last 3 requests finishing) and a 4 s gap. The last 3 lines are the run's,
// not background.
func TestBackgroundLeavesOutABurstsLastSecond(t *testing.T) {
	from := time.Unix(1_800_000_000, 0).UTC()
	c := NewCounter(CounterOptions{RunID: "run"})
	pod := target("persons-c3-1")
	for i := range 12 * 20 {
		addAt(c, pod, from, -17+float64(i)/20, "previous run")
	}
	for k := range 3 {
		addAt(c, pod, from, -5+float64(k)/4, "last requests")
	}
	w := Window{From: from, To: from.Add(10 * time.Second), Background: 30 * time.Second,
		Since: func(Target) time.Time { return from.Add(-17 * time.Second) }}
	if got := c.Pods(w)[pod].Served; got.Rate != 0 || got.Expected != 0 {
		t.Errorf("background %+v, want none: every line before the window is the previous run's", got)
	}
}
