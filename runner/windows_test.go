package runner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
)

// A real HTTP server that routes per request 50/50 between two clusters
// until shiftAt after its first request, then 90/10 when shift: a split
// that changes mid-run without the scenario knowing.
func shiftingServer(t *testing.T, shiftAt time.Duration, shift bool) *httptest.Server {
	var first atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		p1 := 0.5
		if shift && time.Duration(now-first.Load()) > shiftAt {
			p1 = 0.9
		}
		c := "c2"
		if rand.Float64() < p1 {
			c = "c1"
		}
		fmt.Fprintf(w, "I'm callme-service v1 (pod callme-%s-0 in %s)", c, c)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// A split in fixed windows (split.windows.every) is judged per window by
// the runner: an even split all along PASSes with every window judged; a
// split that drifts in the last window FAILs, naming that window.
func TestFixedWindowsJudgeTheRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		shift   bool
		verdict assert.Verdict
	}{
		{"even all along", false, assert.Pass},
		{"drifts in the last window", true, assert.Fail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := shiftingServer(t, 4200*time.Millisecond, tc.shift)
			sc := load(t, ts.URL, "  rate: 500/s\n  duration: 6s\n  keepAlive: false",
				"  confidence: 0.95", "  - split: {model: equal, margin: 10%, windows: {every: 2s}}")
			rep, err := Run(context.Background(), sc, Options{})
			if err != nil {
				t.Fatal(err)
			}
			e := rep.Expectation[0]
			if e.Verdict != tc.verdict || e.Windows == nil || len(e.Windows.Windows) != 3 {
				t.Fatalf("verdict %s, windows %+v, want %s over 3 windows: %s", e.Verdict, e.Windows, tc.verdict, e.Reason)
			}
			for i, w := range e.Windows.Windows {
				if w.Split.N < 600 || !w.Judged || w.Start != time.Duration(i)*2*time.Second {
					t.Errorf("window %d: %d requests, judged %v, from %s", i+1, w.Split.N, w.Judged, w.Start)
				}
			}
			if tc.verdict == assert.Fail && (e.Windows.Deciding != 3 || !strings.HasPrefix(e.Reason, "window 3 of 3 (4s–6")) {
				t.Errorf("deciding window %d: %s", e.Windows.Deciding, e.Reason)
			}
			if e.Planned != 0 {
				t.Errorf("a split in windows planned %d %s for one block", e.Planned, e.PlannedUnit)
			}
		})
	}
}
