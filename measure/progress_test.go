package measure

import (
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/tally"
)

// TestRemaining: the progress line's done fraction and ETA follow
// whichever bound ends the attack first (issue 26: no total or ETA).
func TestRemaining(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		done      int64
		el        time.Duration
		rate      float64
		ao        attack.Options
		frac      float64
		left      time.Duration
		ok        bool
		wantShown string
	}{
		{name: "no bound", done: 10, el: time.Second, rate: 10, ao: attack.Options{}, ok: false},
		{name: "duration", done: 100, el: 15 * time.Second, rate: 6.7, ao: attack.Options{Duration: time.Minute}, frac: 0.25, left: 45 * time.Second, ok: true},
		{name: "requests", done: 300, el: 3 * time.Second, rate: 100, ao: attack.Options{Requests: 1000}, frac: 0.3, left: 7 * time.Second, ok: true},
		{name: "requests end first", done: 900, el: 9 * time.Second, rate: 100, ao: attack.Options{Duration: time.Minute, Requests: 1000}, frac: 0.9, left: time.Second, ok: true},
		{name: "duration ends first", done: 100, el: 50 * time.Second, rate: 2, ao: attack.Options{Duration: time.Minute, Requests: 1000}, frac: 50.0 / 60, left: 10 * time.Second, ok: true},
		{name: "past the end", done: 1200, el: 70 * time.Second, rate: 100, ao: attack.Options{Duration: time.Minute, Requests: 1000}, frac: 1, left: 0, ok: true},
		{name: "requests, no rate yet", done: 0, el: 0, rate: 0, ao: attack.Options{Requests: 1000}, ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			frac, left, ok := remaining(tc.done, tc.el, tc.rate, tc.ao)
			if ok != tc.ok || ok && (abs(frac-tc.frac) > 1e-9 || (left-tc.left).Abs() > time.Millisecond) {
				t.Errorf("remaining(%d, %s, %g) = %g, %s, %v; want %g, %s, %v", tc.done, tc.el, tc.rate, frac, left, ok, tc.frac, tc.left, tc.ok)
			}
		})
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// TestProgressLineShowsTotalAndETA: the line itself carries done/total
// and the ETA.
func TestProgressLineShowsTotalAndETA(t *testing.T) {
	t.Parallel()
	start := time.Now().Add(-2 * time.Second)
	tl := tally.New(start, time.Minute)
	for range 50 {
		tl.Add(&attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start}}, attribution.Identity{Cluster: "c1"})
	}
	for _, tc := range []struct {
		ao   attack.Options
		want []string
	}{
		{attack.Options{Requests: 200}, []string{"50/200 requests", "25% ETA"}},
		// Bound by time at an asked rate: the total that rate sends in it.
		{attack.Options{Duration: 8 * time.Second, Rate: vegeta.Rate{Freq: 25, Per: time.Second}}, []string{"50/~200 requests", "(asked 25.0/s)", "% ETA 6s"}},
		// Both bounds: the one that ends the attack first.
		{attack.Options{Requests: 1000, Duration: 8 * time.Second, Rate: vegeta.Rate{Freq: 25, Per: time.Second}}, []string{"50/~200 requests"}},
		// A closed loop bound by time has no total, but its ETA.
		{attack.Options{Duration: 8 * time.Second}, []string{"  50 requests", "% ETA 6s"}},
	} {
		got := line(tl, start, tc.ao)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("progress line %q for %+v, want %q", got, tc.ao, w)
			}
		}
	}
}
