package tally

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
)

// State is the cumulative, mergeable form of a Tally, as a distributed
// worker sends it (docs/architecture.md, Distributed workers: merging):
// counts and the per-connection sums per bucket (open connections folded
// in as Snapshot does), the capped error and sample lists, vegeta's
// totals and timestamps, the time slices aligned to Start, and the whole
// run's latency histogram. Its size depends on buckets and slices, never
// on the number of requests. Several workers' states merge (Merge,
// Accumulator) into the Snapshot one process seeing every result would
// have produced: connections of different workers are different sampling
// units, so their sums add up exactly (docs/statistics.md §3).
type State struct {
	Start      time.Time     `json:"start"`
	SliceWidth time.Duration `json:"sliceWidth"`
	Total      int64         `json:"total"`
	// Dimensions are keyed by dimension name (attribution fields and
	// Outcome); buckets are sorted by name.
	Dimensions           map[string]DimState         `json:"dimensions"`
	Unattributed         map[string]int64            `json:"unattributed,omitempty"`
	Failures             map[string]map[string]int64 `json:"failures,omitempty"`
	FailuresUnattributed map[string]int64            `json:"failuresUnattributed,omitempty"`
	Errors               map[string]int64            `json:"errors,omitempty"`
	ErrorsOther          int64                       `json:"errorsOther,omitempty"`
	Samples              []string                    `json:"samples,omitempty"`
	PodClusters          map[string]string           `json:"podClusters,omitempty"`
	Unread               int64                       `json:"unread,omitempty"`
	UnreadAnswered       int64                       `json:"unreadAnswered,omitempty"`
	// StatusCodes, Successes (status 200–399, as vegeta counts success),
	// bytes and timestamps are what vegeta's Metrics are rebuilt from.
	StatusCodes map[string]int64 `json:"statusCodes,omitempty"`
	Successes   int64            `json:"successes"`
	BytesIn     uint64           `json:"bytesIn"`
	BytesOut    uint64           `json:"bytesOut"`
	Earliest    time.Time        `json:"earliest"`
	Latest      time.Time        `json:"latest"`
	End         time.Time        `json:"end"`
	Latency     HistogramState   `json:"latency"`
	// Slices[i] covers [Start + (SlicesFrom+i)·SliceWidth, ... + SliceWidth).
	Slices []SliceState `json:"slices,omitempty"`
	// SlicesFrom > 0 marks a trimmed state (Trim): the slices before it
	// are as in the contributor's previous state, so a worker's interval
	// record carries the slices that changed, not the whole timeline.
	SlicesFrom int `json:"slicesFrom,omitempty"`
}

// sliceUnchanged says slice b of a contributor's later state is slice a
// of its earlier one: a slice only ever gains results, and every result
// counts in Requests.
func sliceUnchanged(a, b *SliceState) bool { return a.Requests == b.Requests }

// Trim returns s with the leading slices that are the same as in prev
// left out (SlicesFrom says how many). A slice only ever gains results,
// so one whose request count did not change did not change at all. With
// a different start or slice width (the timeline was coarsened) nothing
// is left out. An Accumulator composes a trimmed state with the
// contributor's previous one; a contributor's last state is sent whole.
func (s State) Trim(prev *State) State {
	if prev == nil || prev.SlicesFrom != 0 || !prev.Start.Equal(s.Start) || prev.SliceWidth != s.SliceWidth || s.SlicesFrom != 0 {
		return s
	}
	k := 0
	for k < len(s.Slices) && k < len(prev.Slices) && sliceUnchanged(&prev.Slices[k], &s.Slices[k]) {
		k++
	}
	s.SlicesFrom, s.Slices = k, s.Slices[k:]
	return s
}

// DimState is one dimension's counts and per-connection sums
// (assert.UnitStats), Overflow the requests counted in Other.
type DimState struct {
	Buckets  []string  `json:"buckets"`
	N        []int64   `json:"n"`
	SumXX    []float64 `json:"sumXX"`
	SumXM    []float64 `json:"sumXM"`
	SumMM    float64   `json:"sumMM"`
	Units    int64     `json:"units"`
	Overflow int64     `json:"overflow,omitempty"`
}

// SliceState is one time slice (Slice) with sparse latency histograms.
type SliceState struct {
	Requests int64                     `json:"requests"`
	Errors   int64                     `json:"errors,omitempty"`
	Clusters map[string]int64          `json:"clusters,omitempty"`
	Latency  map[string]HistogramState `json:"latency,omitempty"`
}

// Limits a received State must respect (Validate): the same bounds a
// Tally keeps, plus the number of dimensions and of pods with a cluster.
const (
	maxDimensions  = 16
	maxPodClusters = 2 * (MaxBuckets + 1)
	maxSliceWidth  = time.Second << 30
)

// State is the tally's cumulative state; open connections' counts are
// folded into copies of the sums, the connections stay open.
func (t *Tally) State() State {
	return stateOf(t.Snapshot(), t.start)
}

func stateOf(s Snapshot, start time.Time) State {
	st := State{
		Start:                start.Round(0).UTC(),
		SliceWidth:           s.SliceWidth,
		Total:                s.Total,
		Dimensions:           make(map[string]DimState, len(s.Dimensions)),
		Unattributed:         copyMap(s.Unattributed),
		Failures:             make(map[string]map[string]int64, len(s.Failures)),
		FailuresUnattributed: copyMap(s.FailuresUnattributed),
		Errors:               copyMap(s.Errors),
		ErrorsOther:          s.ErrorsOther,
		Samples:              append([]string(nil), s.Samples...),
		PodClusters:          copyMap(s.PodClusters),
		Unread:               s.Unread,
		UnreadAnswered:       s.UnreadAnswered,
		StatusCodes:          make(map[string]int64, len(s.Metrics.StatusCodes)),
		BytesIn:              s.Metrics.BytesIn.Total,
		BytesOut:             s.Metrics.BytesOut.Total,
		Earliest:             s.Metrics.Earliest.Round(0).UTC(),
		Latest:               s.Metrics.Latest.Round(0).UTC(),
		End:                  s.Metrics.End.Round(0).UTC(),
	}
	for name, c := range s.Dimensions {
		d := DimState{Buckets: c.Buckets, N: c.N, Overflow: s.Overflow[name]}
		if c.Units != nil {
			d.SumXX, d.SumXM, d.SumMM, d.Units = c.Units.SumXX, c.Units.SumXM, c.Units.SumMM, c.Units.Units
		}
		st.Dimensions[name] = d
	}
	for name, m := range s.Failures {
		st.Failures[name] = copyMap(m)
	}
	for code, n := range s.Metrics.StatusCodes {
		st.StatusCodes[code] = int64(n)
		if c, err := strconv.Atoi(code); err == nil && c >= 200 && c < 400 {
			st.Successes += int64(n)
		}
	}
	if s.Latency != nil {
		st.Latency = s.Latency.state()
	}
	for _, sl := range s.Slices {
		ss := SliceState{Requests: sl.Requests, Errors: sl.Errors, Clusters: copyMap(sl.Clusters)}
		if len(sl.Latency) > 0 {
			ss.Latency = make(map[string]HistogramState, len(sl.Latency))
			for k, h := range sl.Latency {
				ss.Latency[k] = h.state()
			}
		}
		st.Slices = append(st.Slices, ss)
	}
	return st
}

// Validate checks a State received from elsewhere against the bounds a
// Tally keeps, so that merging it can neither panic nor grow without
// bound.
func (s *State) Validate() error {
	if s.SliceWidth <= 0 || s.SliceWidth > maxSliceWidth {
		return fmt.Errorf("state: slice width %v out of range (0, %v]", s.SliceWidth, maxSliceWidth)
	}
	if s.Total < 0 || s.ErrorsOther < 0 || s.Unread < 0 || s.UnreadAnswered < 0 || s.Successes < 0 || s.Successes > s.Total {
		return fmt.Errorf("state: negative or inconsistent totals (total %d, successes %d)", s.Total, s.Successes)
	}
	if len(s.Dimensions) > maxDimensions {
		return fmt.Errorf("state: %d dimensions, at most %d", len(s.Dimensions), maxDimensions)
	}
	for name, d := range s.Dimensions {
		if err := d.validate(); err != nil {
			return fmt.Errorf("state: dimension %q: %w", name, err)
		}
	}
	if len(s.Unattributed) > maxDimensions || len(s.FailuresUnattributed) > maxDimensions || len(s.Failures) > maxDimensions {
		return fmt.Errorf("state: more than %d dimensions in unattributed or failures", maxDimensions)
	}
	for name, m := range s.Failures {
		if len(m) > MaxBuckets+1 {
			return fmt.Errorf("state: failures of %q: %d buckets, at most %d", name, len(m), MaxBuckets+1)
		}
		if err := nonNegative(m); err != nil {
			return fmt.Errorf("state: failures of %q: %w", name, err)
		}
	}
	if len(s.Errors) > maxErrorKinds {
		return fmt.Errorf("state: %d error kinds, at most %d", len(s.Errors), maxErrorKinds)
	}
	if len(s.Samples) > maxSamples {
		return fmt.Errorf("state: %d samples, at most %d", len(s.Samples), maxSamples)
	}
	for _, b := range s.Samples {
		if len(b) > sampleBytes {
			return fmt.Errorf("state: a sample of %d bytes, at most %d", len(b), sampleBytes)
		}
	}
	if len(s.PodClusters) > maxPodClusters {
		return fmt.Errorf("state: %d pods with a cluster, at most %d", len(s.PodClusters), maxPodClusters)
	}
	if len(s.StatusCodes) > maxStatusCodes {
		return fmt.Errorf("state: %d status codes, at most %d", len(s.StatusCodes), maxStatusCodes)
	}
	for _, m := range []map[string]int64{s.Unattributed, s.FailuresUnattributed, s.Errors, s.StatusCodes} {
		if err := nonNegative(m); err != nil {
			return fmt.Errorf("state: %w", err)
		}
	}
	if err := s.Latency.validate(fineBuckets); err != nil {
		return fmt.Errorf("state: latency %w", err)
	}
	if s.Latency.Count != s.Total {
		// A tally times every request it counts: a state whose histogram
		// lacks some would judge a latency bound on no data.
		return fmt.Errorf("state: %d latencies for %d requests", s.Latency.Count, s.Total)
	}
	// Not SlicesFrom+len(Slices) > maxSlices: that sum overflows.
	if s.SlicesFrom < 0 || s.SlicesFrom > maxSlices || len(s.Slices) > maxSlices-s.SlicesFrom {
		return fmt.Errorf("state: slices %d to %d, at most %d", s.SlicesFrom, s.SlicesFrom+len(s.Slices), maxSlices)
	}
	for i, sl := range s.Slices {
		if sl.Requests < 0 || sl.Errors < 0 || sl.Errors > sl.Requests {
			return fmt.Errorf("state: slice %d: requests %d, errors %d", i, sl.Requests, sl.Errors)
		}
		if len(sl.Clusters) > MaxBuckets+1 || len(sl.Latency) > maxLatencySeries+1 {
			return fmt.Errorf("state: slice %d: %d clusters, %d latency series, at most %d and %d", i, len(sl.Clusters), len(sl.Latency), MaxBuckets+1, maxLatencySeries+1)
		}
		if err := nonNegative(sl.Clusters); err != nil {
			return fmt.Errorf("state: slice %d: %w", i, err)
		}
		for k, h := range sl.Latency {
			if err := h.validate(histBuckets); err != nil {
				return fmt.Errorf("state: slice %d series %q: %w", i, k, err)
			}
		}
	}
	return nil
}

// maxStatusCodes bounds the distinct status codes (vegeta keeps 0 and the
// HTTP codes 100–999).
const maxStatusCodes = 1000

func (d *DimState) validate() error {
	n := len(d.Buckets)
	if n > MaxBuckets+1 {
		return fmt.Errorf("%d buckets, at most %d", n, MaxBuckets+1)
	}
	if len(d.N) != n || len(d.SumXX) != n || len(d.SumXM) != n {
		return fmt.Errorf("%d buckets but %d counts, %d sumXX, %d sumXM", n, len(d.N), len(d.SumXX), len(d.SumXM))
	}
	if d.Units < 0 || d.Overflow < 0 || !finite(d.SumMM) {
		return fmt.Errorf("units %d, overflow %d, sumMM %v out of range", d.Units, d.Overflow, d.SumMM)
	}
	for i := range n {
		if i > 0 && d.Buckets[i] <= d.Buckets[i-1] {
			return fmt.Errorf("buckets not sorted and distinct at %q", d.Buckets[i])
		}
		if d.N[i] < 0 || !finite(d.SumXX[i]) || !finite(d.SumXM[i]) {
			return fmt.Errorf("bucket %q: n %d, sumXX %v, sumXM %v out of range", d.Buckets[i], d.N[i], d.SumXX[i], d.SumXM[i])
		}
	}
	return nil
}

func finite(f float64) bool { return f >= 0 && !math.IsInf(f, 0) && !math.IsNaN(f) }

func nonNegative(m map[string]int64) error {
	for k, v := range m {
		if v < 0 {
			return fmt.Errorf("%q counted %d", k, v)
		}
	}
	return nil
}

// Merge merges states into the State of one tally that saw all their
// results: see Accumulator. The result does not depend on the order of
// states.
func Merge(states ...State) State {
	a := NewAccumulator(earliestStart(states))
	for i := range states {
		a.Put(i, &states[i])
	}
	return a.State()
}

func earliestStart(states []State) time.Time {
	var start time.Time
	for i, s := range states {
		if i == 0 || s.Start.Before(start) {
			start = s.Start
		}
	}
	return start
}

// Snapshot is the snapshot of a tally in this state. Its vegeta Metrics
// are rebuilt from the totals, the timestamps and the latency histogram
// (quantiles within LatencyRelativeError); it has no vegeta estimator,
// so latency quantiles are read with Snapshot.LatencyQuantile.
func (s State) Snapshot() Snapshot {
	a := NewAccumulator(s.Start)
	a.Put(0, &s)
	return a.Snapshot()
}

// sortByCount orders names by count, highest first, then by name, which
// is how every cap applied to merged counts chooses what to keep: the same
// whatever order the states came in.
func sortByCount(names []string, count func(string) int64) {
	sort.Slice(names, func(i, j int) bool {
		ci, cj := count(names[i]), count(names[j])
		if ci != cj {
			return ci > cj
		}
		return names[i] < names[j]
	})
}
