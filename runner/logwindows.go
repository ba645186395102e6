package runner

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// windowLogs cuts the logs' evidence into the windows the run cut the
// answers into (body's), for a split by cluster in windows counted from
// the pods' logs (source: logs; Skupper's sample app names no cluster in
// its answer). Only the served lines per cluster and second of log time
// exist per window (logSource.perSecond), so:
//
//   - a second goes to the window its middle falls in, except a second
//     across a cut beside a settling window, which goes to the settling
//     window: a line logged around a change is described, never judged
//     against the wrong version (settling[i] says whether window i
//     settles; nil for fixed windows);
//   - the lines are independent draws, as the whole run's lines without a
//     request id are (docs/statistics.md §3), and are not reduced by the
//     pods' background rate, which is estimated for the whole run: a
//     workload that logs served lines by itself counts them in its
//     windows (docs/statistics.md §10);
//   - the log's timeline (Slices, by log time) is what a failover's move
//     is measured from.
func windowLogs(logs *tally.Snapshot, secs map[string]map[int64]int, body tally.Snapshot, settling []bool) {
	cuts := make([]time.Time, len(body.Windows))
	for i, w := range body.Windows {
		cuts[i] = w.Start
	}
	if len(cuts) == 0 || len(secs) == 0 {
		return
	}
	clusters := slices.Sorted(maps.Keys(secs))
	n := make([][]int64, len(cuts))
	for i := range n {
		n[i] = make([]int64, len(clusters))
	}
	width := cmp.Or(body.SliceWidth, time.Second)
	var sl []tally.Slice
	for k, c := range clusters {
		for sec, lines := range secs[c] {
			from := time.Unix(sec, 0)
			if i := logWindow(cuts, settling, from); i >= 0 {
				n[i][k] += int64(lines)
			}
			off := from.Sub(body.Start.Truncate(time.Second))
			if off < 0 || lines == 0 {
				continue
			}
			j := int(off / width)
			if j > len(body.Slices)+1 {
				continue // long after the attack: background, not the run
			}
			for len(sl) <= j {
				sl = append(sl, tally.Slice{Start: time.Duration(len(sl)) * width, Clusters: map[string]int64{}})
			}
			sl[j].Clusters[c] += int64(lines)
			sl[j].Requests += int64(lines)
		}
	}
	logs.Windows = make([]tally.WindowCounts, len(cuts))
	for i := range cuts {
		logs.Windows[i] = tally.WindowCounts{Start: cuts[i],
			Dimensions: map[string]assert.Counts{string(attribution.Cluster): {Buckets: clusters, N: n[i]}}}
	}
	logs.Start, logs.SliceWidth, logs.Slices = body.Start, width, sl
	logs.Metrics.Latest = body.Metrics.Latest
}

// logWindow is the window the second from..from+1s of log time counts in
// (-1: before the first).
func logWindow(cuts []time.Time, settling []bool, from time.Time) int {
	mid := from.Add(500 * time.Millisecond)
	i := -1
	for k, c := range cuts {
		if !c.After(mid) {
			i = k
		}
	}
	settles := func(k int) bool { return k >= 0 && k < len(settling) && settling[k] }
	// A cut inside the second: the settling side takes it.
	if i+1 < len(cuts) && cuts[i+1].Before(from.Add(time.Second)) && settles(i+1) {
		return i + 1
	}
	if i >= 0 && cuts[i].After(from) && settles(i-1) {
		return i - 1
	}
	return i
}

// logsWindowed says whether the scenario's split in windows is by cluster
// and counted from the logs.
func logsWindowed(sc *scenarios.Scenario) bool {
	for _, e := range sc.Expect {
		if sp := e.Split; sp != nil && sp.Windows != nil {
			return sp.CountedFrom() == scenarios.SourceLogs && sp.By == string(attribution.Cluster)
		}
	}
	return false
}
