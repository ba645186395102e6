package converge

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/reports"
)

// windows builds judged windows from a script: P, F, I a judged window's
// verdict, S a settling window (a change), C a judged PASS window whose
// expected shares changed without a settling window, - a window without
// requests. Each is a second long.
func windows(script string) []reports.Window {
	var out []reports.Window
	v1 := map[string]float64{"v1": 1}
	v2 := map[string]float64{"v1": 0.5, "v2": 0.5}
	exp := v1
	for i, c := range script {
		w := reports.Window{Index: i + 1, Start: time.Duration(i) * time.Second, End: time.Duration(i+1) * time.Second, Judged: true}
		switch c {
		case 'P':
			w.Verdict = assert.Pass
		case 'F':
			w.Verdict = assert.Fail
		case 'I':
			w.Verdict = assert.Inconclusive
		case 'S':
			exp = v2
			w.Settling, w.Judged = true, false
		case 'C':
			if len(exp) == len(v1) {
				exp = v2
			} else {
				exp = v1
			}
			w.Verdict = assert.Pass
		case '-':
			w.Judged = false
		}
		w.Expected = exp
		out = append(out, w)
	}
	return out
}

func TestDecide(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script    string
		need      int
		looks     int
		converged bool
		window    int
		change    int
		failed    []int
		spent     bool
		streak    int
	}{
		{"PP", 2, 10, true, 1, -1, nil, false, 2},
		{"PFPP", 2, 10, true, 3, -1, []int{1}, false, 2},
		{"PPP", 4, 10, false, -1, -1, nil, false, 3},
		{"PSPP", 2, 10, true, 3, 1, nil, false, 2},
		// A change after a pass restarts the count; fails before it are
		// forgotten.
		{"FPSFPIP", 2, 10, false, -1, 2, []int{3}, false, 1},
		{"PSP-P", 2, 10, true, 4, 1, nil, false, 2},
		{"PFCP", 2, 10, true, 3, 2, nil, false, 2},
		// Looks bound the windows the gate judges: the third is past them.
		{"FFPP", 2, 3, false, -1, -1, []int{0, 1}, true, 1},
		{"FFP", 2, 3, false, -1, -1, []int{0, 1}, true, 1},
		{"", 1, 3, false, -1, -1, nil, false, 0},
		// A change after the gate converged voids the convergence: the
		// passes must follow the last change.
		{"PPSP", 2, 10, false, -1, 2, nil, false, 1},
		{"PPCP", 2, 10, true, 3, 2, nil, false, 2},
		{"PPFSP", 2, 10, false, -1, 3, nil, false, 1},
		// Windows after a convergence are no look: a fail there is not
		// the gate's.
		{"PPF", 2, 10, true, 1, -1, nil, false, 2},
		// The looks spent before a change stay spent.
		{"PPSP", 2, 2, false, -1, 2, nil, true, 0},
	} {
		d := Decide(windows(tc.script), tc.need, tc.looks)
		if d.Converged != tc.converged || d.Window != tc.window || d.Change != tc.change || !slices.Equal(d.Failed, tc.failed) || d.Spent != tc.spent || d.Streak != tc.streak {
			t.Errorf("%q need %d looks %d: %+v; want converged %v at %d, change %d, failed %v, spent %v, streak %d",
				tc.script, tc.need, tc.looks, d, tc.converged, tc.window, tc.change, tc.failed, tc.spent, tc.streak)
		}
	}
}

// Look, the live rule, decides after each newly sealed window in turn
// and stops at the first decision, but not at a convergence a later
// change voids, sealed or pending.
func TestGateLook(t *testing.T) {
	t.Parallel()
	g := Gate{Need: 2, Within: 10 * time.Second, Window: time.Second}
	for _, tc := range []struct {
		script   string
		from     int
		pending  bool
		looked   int
		decided  bool
		streakAt int // the last decision's streak
	}{
		{"PP", 0, false, 2, true, 2},
		{"PPP", 0, false, 2, true, 2},
		{"PP", 1, false, 1, true, 2},
		{"PP", 0, true, 2, false, 2},
		{"PPSP", 0, false, 4, false, 1},
		{"PPSPP", 0, false, 5, true, 2},
		{"FI", 0, false, 2, false, 0},
		{"FFFFFFFFFFP", 0, false, 10, true, 0},
	} {
		ds, decided := g.Look(windows(tc.script), tc.from, tc.pending)
		if len(ds) != tc.looked || decided != tc.decided || ds[len(ds)-1].Streak != tc.streakAt {
			t.Errorf("%q from %d pending %v: %d decisions %+v, decided %v; want %d, %v, streak %d", tc.script, tc.from, tc.pending, len(ds), ds, decided, tc.looked, tc.decided, tc.streakAt)
		}
	}
}

func TestCheckWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		within, window time.Duration
		want           string
	}{
		{time.Minute, 10 * time.Second, ""},
		{time.Minute, 5 * time.Second, ""},
		{time.Minute, time.Minute, ""},
		{time.Minute, 500 * time.Millisecond, "want at least 1s"},
		{time.Minute, 2 * time.Minute, "longer than --within"},
		{1000 * time.Second, 5 * time.Second, "200 looks, at most 100"},
		{time.Minute, 4 * time.Second, "shorter than split.windows.poll 5s"},
	} {
		err := CheckWindow(tc.within, tc.window, 5*time.Second)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("within %s window %s: %v, want %q", tc.within, tc.window, err, tc.want)
		}
	}
	if Looks(time.Minute, 7*time.Second) != 9 || Looks(time.Minute, 0) != 0 {
		t.Errorf("looks: %d", Looks(time.Minute, 7*time.Second))
	}
}

// Finish puts the gate's decision in the report: converged with the time
// to converge after the last change; FAIL naming the windows that failed
// after it; INCONCLUSIVE without a failed window; and it warns when the
// final windows decide otherwise than the live look that stopped the
// attack.
func TestGateFinish(t *testing.T) {
	t.Parallel()
	g := Gate{Need: 2, Within: 10 * time.Second, Window: time.Second, Expectation: "half"}
	for _, tc := range []struct {
		name    string
		script  string
		stopped string
		live    *Decision
		verdict assert.Verdict
		reason  string
		warn    bool
	}{
		{"converged", "PSPP", StopConverged, &Decision{Converged: true, Window: 3}, assert.Pass,
			"converge gate: 2 consecutive windows PASS after the change at 1s (window 2) (windows 3, 4, each at 99.5%): converged at 4s, 3s after it", false},
		{"deadline with a failed window", "PSFPIP", StopDeadline, nil, assert.Fail,
			"not 2 consecutive passes after the change at 1s (window 2) by --within 10s: window 3 FAILed", false},
		{"deadline, nothing failed", "PSIP", StopDeadline, nil, assert.Inconclusive,
			"1 consecutive passes of 2 after the change at 1s (window 2) by --within 10s, no window FAILed (3 of 10 looks judged)", false},
		{"the live look decided otherwise", "PSPF", StopConverged, &Decision{Converged: true, Window: 3}, assert.Fail, "window 4 FAILed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := &reports.Report{Expectation: []reports.Expectation{{Name: "half", Confidence: 0.95, Windows: &reports.Windows{Windows: windows(tc.script)}}}}
			g.Finish(rep, tc.stopped, tc.live)
			c, e := rep.Converge, rep.Expectation[0]
			if e.Verdict != tc.verdict || !strings.Contains(e.Reason, tc.reason) || c.Reason != e.Reason {
				t.Fatalf("%s: %q; want %s, %q", e.Verdict, e.Reason, tc.verdict, tc.reason)
			}
			if c.Mode != reports.ConvergeWindows || c.Looks != 10 || c.Level != 0.995 || c.Stopped != tc.stopped || !c.Done || c.LastChange != 2 || *c.ChangeAt != time.Second {
				t.Errorf("converge record %+v", c)
			}
			if tc.verdict == assert.Pass && (!c.Converged || *c.ConvergedAt != 4*time.Second || *c.TimeToConverge != 3*time.Second || !slices.Equal(c.Windows, []int{3, 4})) {
				t.Errorf("converged record %+v", c)
			}
			if tc.verdict == assert.Fail && len(c.FailedWindows) == 0 {
				t.Errorf("no failed windows listed: %+v", c)
			}
			if got := len(rep.Warnings) > 0; got != tc.warn {
				t.Errorf("warnings %q", rep.Warnings)
			}
		})
	}
}
