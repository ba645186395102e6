package runner

import (
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/tally"
)

// A split in windows counted from the logs: each second of log time goes
// to the window its middle falls in, a second across a cut to the
// settling window beside it, and the log's timeline is rebuilt per
// second and cluster (a failover's move is measured from it).
func TestWindowLogs(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	// Windows: 0–14.7 s, settling 14.7–18 s, 18 s– (judged).
	body := tally.Snapshot{Start: start, SliceWidth: time.Second, Slices: make([]tally.Slice, 30),
		Windows: []tally.WindowCounts{{Start: at(0)}, {Start: at(14700 * time.Millisecond)}, {Start: at(18 * time.Second)}}}
	body.Metrics.Latest = at(29 * time.Second)
	settling := []bool{false, true, false}
	secs := map[string]map[int64]int{"c3": {}, "c2": {}}
	for s := range 30 {
		c := "c3"
		if s >= 14 {
			c = "c2"
		}
		secs[c][start.Unix()+int64(s)] = 10
	}
	secs["c3"][start.Unix()-5] = 7 // before the attack: no window
	var logs tally.Snapshot
	windowLogs(&logs, secs, body, settling)
	if len(logs.Windows) != 3 {
		t.Fatalf("%d windows, want 3", len(logs.Windows))
	}
	// Second 14 (14–15 s, its middle before the cut at 14.7 s) goes to the
	// settling window; seconds 15–17 too; 18–29 to the last.
	want := [][]int64{{0, 140}, {40, 0}, {120, 0}} // buckets c2, c3
	for i, w := range logs.Windows {
		c := w.Dimensions["cluster"]
		if len(c.Buckets) != 2 || c.Buckets[0] != "c2" || c.N[0] != want[i][0] || c.N[1] != want[i][1] || c.Units != nil || !w.Start.Equal(body.Windows[i].Start) {
			t.Errorf("window %d: %+v from %s, want c2 %d, c3 %d as independent draws", i+1, c, w.Start.Sub(start), want[i][0], want[i][1])
		}
	}
	if len(logs.Slices) != 30 || logs.Slices[13].Clusters["c3"] != 10 || logs.Slices[14].Clusters["c2"] != 10 || !logs.Metrics.Latest.Equal(body.Metrics.Latest) {
		t.Errorf("log timeline %d slices (13: %v, 14: %v), latest %s", len(logs.Slices), logs.Slices[13].Clusters, logs.Slices[14].Clusters, logs.Metrics.Latest)
	}
	// Without settling windows (fixed windows) the middle decides.
	if i := logWindow([]time.Time{at(0), at(14700 * time.Millisecond)}, nil, at(14*time.Second)); i != 0 {
		t.Errorf("second 14 in window %d without settling, want 0 (its middle is before the cut)", i)
	}
}
