package tally

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attribution"
)

// Accumulator keeps the sum of several contributors' cumulative States and
// replaces one contributor's State by a newer one at the cost of that
// State's size, not of all of them: a coordinator ingests a worker's
// record by subtracting what the worker sent before and adding what it
// sends now. Buckets are kept by name without caps; the caps (MaxBuckets,
// maxErrorKinds, maxSamples, maxLatencySeries) are applied when a Snapshot
// or State is read, keeping the highest counts (ties by name) so that the
// result does not depend on the order contributions came in. Buckets a
// merge folds into Other add their SumXX: a lower bound, as one connection
// may have carried several of them; Overflow counts their requests.
//
// States are cumulative, so a time slice's maximum latency never goes down
// from one State of a contributor to the next; the accumulator keeps the
// largest it saw per slice rather than recomputing it. Not safe for
// concurrent use.
type Accumulator struct {
	start time.Time
	width time.Duration
	parts map[int]*part

	total, errorsOther, unread, unreadAnswered, successes int64
	bytesIn, bytesOut                                     uint64
	dims                                                  map[string]*accDim
	unattributed, failuresUnattributed, errors, codes     map[string]int64
	failures                                              map[string]map[string]int64
	samples                                               map[string]int
	podClusters                                           map[string]map[string]int
	latency                                               LatencyHistogram
	slices                                                []accSlice
}

type accDim struct {
	index        map[string]int
	names        []string
	n            []int64
	sumXX, sumXM []float64
	sumMM        float64
	units        int64
	overflow     int64
}

type accSlice struct {
	requests, errors int64
	clusters         map[string]int64
	latency          map[string]*Histogram
}

type part struct {
	st *State
	// idx maps, per dimension, a bucket's position in st to the
	// accumulator's index, reused while the next State lists the same
	// buckets.
	idx map[string][]int
	// slices is the contributor's whole timeline, owned by the
	// accumulator and updated in place: a trimmed State brings only the
	// slices that changed (State.Trim), the earlier ones are these. start
	// and width are its shape, a State's Start and SliceWidth.
	slices []SliceState
	start  time.Time
	width  time.Duration
}

// NewAccumulator returns an empty accumulator whose slices start at
// start (the start the workers share); a zero start is taken from the
// first State put.
func NewAccumulator(start time.Time) *Accumulator {
	return &Accumulator{
		start: start, width: time.Second, parts: map[int]*part{},
		dims: map[string]*accDim{}, unattributed: map[string]int64{}, failuresUnattributed: map[string]int64{},
		errors: map[string]int64{}, codes: map[string]int64{}, failures: map[string]map[string]int64{},
		samples: map[string]int{}, podClusters: map[string]map[string]int{},
	}
}

// Put makes s the contribution of id, replacing the one id made before.
// s must be valid (State.Validate) and is kept: the caller must not
// change it afterwards.
func (a *Accumulator) Put(id int, s *State) {
	if a.start.IsZero() && len(a.parts) == 0 {
		a.start = s.Start
	}
	p := a.parts[id]
	if p == nil {
		p = &part{idx: map[string][]int{}}
		a.parts[id] = p
	}
	old := p.st
	if old != nil {
		a.scalars(old, -1)
	}
	a.scalars(s, 1)
	a.putDims(p, old, s)
	p.st = s
	a.putSlices(p, s)
}

// putSlices makes s's slices part of p's timeline: each slice s brings
// replaces p's (a slice whose request count did not change did not change
// at all, and is skipped), and the slices before s.SlicesFrom stay. With
// another start or width than p's (the contributor coarsened its
// timeline) the timeline starts anew from s; a trimmed State's earlier
// slices are then empty until a whole State comes: only the timeline is
// affected, every other count is whole in every State. So is it after a
// lost record, for the slices that record would have brought.
func (a *Accumulator) putSlices(p *part, s *State) {
	n := s.SlicesFrom + len(s.Slices)
	// A wider accumulator slice adds every contributor's timeline anew
	// (rebuildSlices): p's is only brought up to date here.
	rebuild := false
	if w := a.neededWidth(s.Start, s.SliceWidth, n); w != a.width {
		a.width, rebuild = w, true
	}
	add := func(j int, sl *SliceState, sign int64) {
		if !rebuild {
			a.addSlice(a.sliceIndex(p.start, p.width, j, a.width), sl, sign)
		}
	}
	if p.slices == nil || !p.start.Equal(s.Start) || p.width != s.SliceWidth {
		for j := range p.slices {
			add(j, &p.slices[j], -1)
		}
		p.slices, p.start, p.width = p.slices[:0], s.Start, s.SliceWidth
	}
	if s.SlicesFrom == 0 {
		for j := n; j < len(p.slices); j++ { // a whole State is the whole timeline
			add(j, &p.slices[j], -1)
		}
		p.slices = p.slices[:min(n, len(p.slices))]
	}
	for k := range s.Slices {
		j, ns := s.SlicesFrom+k, &s.Slices[k]
		for len(p.slices) < j {
			p.slices = append(p.slices, SliceState{})
		}
		if j < len(p.slices) {
			if sliceUnchanged(&p.slices[j], ns) {
				continue
			}
			add(j, &p.slices[j], -1)
			p.slices[j] = *ns
		} else {
			p.slices = append(p.slices, *ns)
		}
		add(j, ns, 1)
	}
	if rebuild {
		a.rebuildSlices()
	}
}

// Remove takes id's contribution out.
func (a *Accumulator) Remove(id int) {
	p := a.parts[id]
	if p == nil {
		return
	}
	a.scalars(p.st, -1)
	a.putDims(p, p.st, nil)
	delete(a.parts, id)
	// A slice's maximum cannot be taken out: the slices are added up again
	// from the remaining contributors.
	a.rebuildSlices()
}

func addMap(dst, src map[string]int64, sign int64) {
	for k, v := range src {
		if n := dst[k] + sign*v; n != 0 {
			dst[k] = n
		} else {
			delete(dst, k)
		}
	}
}

// scalars adds (sign 1) or removes (sign -1) everything but the
// dimensions and the slices.
func (a *Accumulator) scalars(s *State, sign int64) {
	a.total += sign * s.Total
	a.errorsOther += sign * s.ErrorsOther
	a.unread += sign * s.Unread
	a.unreadAnswered += sign * s.UnreadAnswered
	a.successes += sign * s.Successes
	a.bytesIn += uint64(sign) * s.BytesIn // modular: a removal undoes an addition exactly
	a.bytesOut += uint64(sign) * s.BytesOut
	addMap(a.unattributed, s.Unattributed, sign)
	addMap(a.failuresUnattributed, s.FailuresUnattributed, sign)
	addMap(a.errors, s.Errors, sign)
	addMap(a.codes, s.StatusCodes, sign)
	for dn, m := range s.Failures {
		f := a.failures[dn]
		if f == nil {
			f = map[string]int64{}
			a.failures[dn] = f
		}
		addMap(f, m, sign)
	}
	for _, b := range s.Samples {
		if a.samples[b] += int(sign); a.samples[b] == 0 {
			delete(a.samples, b)
		}
	}
	for pod, c := range s.PodClusters {
		m := a.podClusters[pod]
		if m == nil {
			m = map[string]int{}
			a.podClusters[pod] = m
		}
		if m[c] += int(sign); m[c] == 0 {
			delete(m, c)
			if len(m) == 0 {
				delete(a.podClusters, pod)
			}
		}
	}
	s.Latency.addTo(a.latency.counts[:], sign)
	a.latency.Count += sign * s.Latency.Count
	a.latency.Total += time.Duration(sign) * s.Latency.Total
}

func (a *Accumulator) dim(name string) *accDim {
	d := a.dims[name]
	if d == nil {
		d = &accDim{index: map[string]int{}}
		a.dims[name] = d
	}
	return d
}

func (d *accDim) bucket(name string) int {
	i, ok := d.index[name]
	if !ok {
		i = len(d.names)
		d.index[name] = i
		d.names = append(d.names, name)
		d.n = append(d.n, 0)
		d.sumXX = append(d.sumXX, 0)
		d.sumXM = append(d.sumXM, 0)
	}
	return i
}

// putDims replaces old's dimensions (nil: none) by s's (nil: none).
func (a *Accumulator) putDims(p *part, old, s *State) {
	if old != nil {
		for name, od := range old.Dimensions {
			d, idx := a.dims[name], p.idx[name]
			for k, i := range idx {
				d.n[i] -= od.N[k]
				d.sumXX[i] -= od.SumXX[k]
				d.sumXM[i] -= od.SumXM[k]
			}
			d.sumMM -= od.SumMM
			d.units -= od.Units
			d.overflow -= od.Overflow
		}
	}
	if s == nil {
		clear(p.idx)
		return
	}
	for name, nd := range s.Dimensions {
		d := a.dim(name)
		var prev []string
		if old != nil {
			prev = old.Dimensions[name].Buckets
		}
		prevIdx := p.idx[name]
		idx := prevIdx
		if len(idx) != len(nd.Buckets) {
			idx = make([]int, len(nd.Buckets))
		}
		for k, b := range nd.Buckets {
			// The same bucket at the same position as last time keeps its
			// index: no lookup by name in the common case.
			if k >= len(prev) || k >= len(prevIdx) || prev[k] != b {
				idx[k] = d.bucket(b)
			} else {
				idx[k] = prevIdx[k]
			}
			i := idx[k]
			d.n[i] += nd.N[k]
			d.sumXX[i] += nd.SumXX[k]
			d.sumXM[i] += nd.SumXM[k]
		}
		d.sumMM += nd.SumMM
		d.units += nd.Units
		d.overflow += nd.Overflow
		p.idx[name] = idx
	}
	for name := range p.idx {
		if _, ok := s.Dimensions[name]; !ok {
			delete(p.idx, name)
		}
	}
}

// neededWidth is the accumulator's slice width once a timeline of n
// slices of width from start is in: the wider of its own and the
// timeline's, doubled while its last slice would fall past maxSlices. The
// other contributors' slices already fit, and fit better at a coarser
// width.
func (a *Accumulator) neededWidth(start time.Time, width time.Duration, n int) time.Duration {
	w := max(a.width, width)
	for n > 0 && a.sliceIndex(start, width, n-1, w) >= maxSlices && w < maxSliceWidth {
		w *= 2
	}
	return w
}

// sliceIndex is the accumulator slice at width w that slice j of a
// timeline of width from start falls in: slices are aligned to the shared
// start, so one of a narrower width lies wholly inside one of w.
func (a *Accumulator) sliceIndex(start time.Time, width time.Duration, j int, w time.Duration) int {
	off := start.Sub(a.start) + time.Duration(j)*width
	return int(max(off, 0) / w)
}

func (a *Accumulator) rebuildSlices() {
	a.slices = a.slices[:0]
	for _, p := range a.parts {
		for j := range p.slices {
			a.addSlice(a.sliceIndex(p.start, p.width, j, a.width), &p.slices[j], 1)
		}
	}
}

func (a *Accumulator) addSlice(i int, sl *SliceState, sign int64) {
	for len(a.slices) <= i {
		a.slices = append(a.slices, accSlice{})
	}
	as := &a.slices[i]
	as.requests += sign * sl.Requests
	as.errors += sign * sl.Errors
	if len(sl.Clusters) > 0 {
		if as.clusters == nil {
			as.clusters = map[string]int64{}
		}
		addMap(as.clusters, sl.Clusters, sign)
	}
	for k, hs := range sl.Latency {
		if as.latency == nil {
			as.latency = map[string]*Histogram{}
		}
		h := as.latency[k]
		if h == nil {
			h = new(Histogram)
			as.latency[k] = h
		}
		hs.addTo(h.counts[:], sign)
		h.Count += sign * hs.Count
		if sign > 0 {
			h.Max = max(h.Max, hs.Max)
		}
		if h.Count == 0 {
			delete(as.latency, k)
		}
	}
}

// Total is the requests of the states put, without a merge.
func (a *Accumulator) Total() int64 { return a.total }

// State is the merged state, caps applied.
func (a *Accumulator) State() State {
	return stateOf(a.Snapshot(), a.start)
}

// Snapshot is the merged snapshot, caps applied, with vegeta's Metrics
// rebuilt from the merged totals (see State.Snapshot).
func (a *Accumulator) Snapshot() Snapshot {
	s := Snapshot{
		Total:                a.total,
		Dimensions:           map[string]assert.Counts{},
		Unattributed:         copyMap(a.unattributed),
		Failures:             map[string]map[string]int64{},
		FailuresUnattributed: copyMap(a.failuresUnattributed),
		Errors:               map[string]int64{},
		ErrorsOther:          a.errorsOther,
		SliceWidth:           a.width,
		// The slices' origin, and the windows' a distributed run's
		// coordinator counts (fleet): a report times them from it. As a
		// State carries it, so that merges compare equal.
		Start:          a.start.Round(0).UTC(),
		PodClusters:    map[string]string{},
		Unread:         a.unread,
		UnreadAnswered: a.unreadAnswered,
	}
	kept := map[string]map[string]bool{} // per dimension, when it was capped
	for name, d := range a.dims {
		c, keep, over := d.counts()
		s.Dimensions[name] = c
		if keep != nil {
			kept[name] = keep
		}
		if over > 0 {
			if s.Overflow == nil {
				s.Overflow = map[string]int64{}
			}
			s.Overflow[name] = over
		}
	}
	if u := s.Dimensions[Outcome].Units; u != nil {
		s.Connections = u.Units
	}
	for name, m := range a.failures {
		if len(m) > 0 {
			s.Failures[name] = capMap(m, MaxBuckets, nil)
		}
	}
	var other int64
	s.Errors = capMap(a.errors, maxErrorKinds, &other)
	s.ErrorsOther += other
	samples := slices.Sorted(maps.Keys(a.samples))
	s.Samples = samples[:min(len(samples), maxSamples)]
	pods := map[string]bool{}
	for _, b := range s.Dimensions[string(attribution.Pod)].Buckets {
		pods[b] = true
	}
	for b := range s.Failures[string(attribution.Pod)] {
		pods[b] = true
	}
	for pod, cs := range a.podClusters {
		if pods[pod] && len(cs) > 0 {
			s.PodClusters[pod] = slices.Min(slices.Collect(maps.Keys(cs)))
		}
	}
	a.metrics(&s)
	clusterKept := kept[string(attribution.Cluster)]
	last := len(a.slices)
	for last > 0 && a.slices[last-1].requests == 0 {
		last--
	}
	for i, as := range a.slices[:last] {
		sl := Slice{Start: time.Duration(i) * a.width, Requests: as.requests, Errors: as.errors}
		if len(as.clusters) > 0 {
			sl.Clusters = make(map[string]int64, len(as.clusters))
			for c, n := range as.clusters {
				if clusterKept != nil && !clusterKept[c] {
					c = Other
				}
				sl.Clusters[c] += n
			}
		}
		if len(as.latency) > 0 {
			sl.Latency = make(map[string]*Histogram, len(as.latency))
			series := slices.Collect(maps.Keys(as.latency))
			sortByCount(series, func(k string) int64 { return as.latency[k].Count })
			n := 0
			for _, k := range series {
				name := k
				if clusterKept != nil && k != Failed && k != Unattributed && !clusterKept[k] {
					name = Other
				}
				if _, ok := sl.Latency[name]; !ok && name != Other && n >= maxLatencySeries {
					name = Other
				}
				if h := sl.Latency[name]; h != nil {
					h.Merge(as.latency[k])
					continue
				}
				c := *as.latency[k]
				sl.Latency[name] = &c
				if name != Other {
					n++
				}
			}
		}
		s.Slices = append(s.Slices, sl)
	}
	return s
}

// metrics rebuilds vegeta's Metrics and the latency histogram; the
// extremes are the contributors' extremes.
func (a *Accumulator) metrics(s *Snapshot) {
	lat := a.latency
	first := true
	var earliest, latest, end time.Time
	for _, p := range a.parts {
		st := p.st
		if st.Latency.Count > 0 {
			if lat.Min > st.Latency.Min || first {
				lat.Min = st.Latency.Min
			}
			lat.Max = max(lat.Max, st.Latency.Max)
			first = false
		}
		if st.Total > 0 {
			if earliest.IsZero() || st.Earliest.Before(earliest) {
				earliest = st.Earliest
			}
			if st.Latest.After(latest) {
				latest = st.Latest
			}
			if st.End.After(end) {
				end = st.End
			}
		}
	}
	if lat.Count == 0 {
		lat.Min, lat.Max = 0, 0
	}
	s.Latency = &lat
	m := &s.Metrics
	m.Requests = uint64(max(a.total, 0))
	m.StatusCodes = make(map[string]int, len(a.codes))
	for c, n := range a.codes {
		m.StatusCodes[c] = int(n)
	}
	m.Errors = slices.Sorted(maps.Keys(s.Errors))
	m.BytesIn.Total, m.BytesOut.Total = a.bytesIn, a.bytesOut
	m.Earliest, m.Latest, m.End = earliest, latest, end
	if m.Requests == 0 {
		return
	}
	// The same arithmetic as vegeta's Metrics.Close.
	m.Rate = float64(m.Requests)
	m.Throughput = float64(a.successes)
	m.Duration = m.Latest.Sub(m.Earliest)
	m.Wait = m.End.Sub(m.Latest)
	if secs := m.Duration.Seconds(); secs > 0 {
		m.Rate /= secs
		m.Throughput /= (m.Duration + m.Wait).Seconds()
	}
	m.BytesIn.Mean = float64(m.BytesIn.Total) / float64(m.Requests)
	m.BytesOut.Mean = float64(m.BytesOut.Total) / float64(m.Requests)
	m.Success = float64(a.successes) / float64(m.Requests)
	l := &m.Latencies
	l.Total, l.Min, l.Max = lat.Total, lat.Min, lat.Max
	l.Mean = time.Duration(float64(lat.Total) / float64(m.Requests))
	l.P50, l.P90, l.P95, l.P99 = lat.Quantile(0.5), lat.Quantile(0.9), lat.Quantile(0.95), lat.Quantile(0.99)
}

// counts is the dimension's Counts, sorted by bucket name; past
// MaxBuckets names (Other aside) the smaller buckets are folded into
// Other. keep lists the names kept when that happened (nil otherwise),
// overflow counts the requests in Other beyond what workers already put
// there themselves.
func (d *accDim) counts() (c assert.Counts, keep map[string]bool, overflow int64) {
	names := make([]string, 0, len(d.names))
	for i, b := range d.names {
		if d.n[i] > 0 && b != Other {
			names = append(names, b)
		}
	}
	overflow = d.overflow
	other := -1
	if i, ok := d.index[Other]; ok && d.n[i] > 0 {
		other = i
	}
	var fold []string
	if len(names) > MaxBuckets {
		sortByCount(names, func(b string) int64 { return d.n[d.index[b]] })
		fold = names[MaxBuckets:]
		names = names[:MaxBuckets]
		keep = make(map[string]bool, len(names))
		for _, b := range names {
			keep[b] = true
		}
	}
	sort.Strings(names)
	c.Units = &assert.UnitStats{Units: d.units, SumMM: d.sumMM}
	var on int64
	var oxx, oxm float64
	if other >= 0 {
		on, oxx, oxm = d.n[other], d.sumXX[other], d.sumXM[other]
	}
	for _, b := range fold {
		i := d.index[b]
		on += d.n[i]
		oxx += d.sumXX[i]
		oxm += d.sumXM[i]
		overflow += d.n[i]
	}
	add := func(b string, n int64, xx, xm float64) {
		c.Buckets = append(c.Buckets, b)
		c.N = append(c.N, n)
		c.Units.SumXX = append(c.Units.SumXX, xx)
		c.Units.SumXM = append(c.Units.SumXM, xm)
	}
	otherDone := on == 0
	for _, b := range names {
		if !otherDone && Other < b {
			add(Other, on, oxx, oxm)
			otherDone = true
		}
		i := d.index[b]
		add(b, d.n[i], d.sumXX[i], d.sumXM[i])
	}
	if !otherDone {
		add(Other, on, oxx, oxm)
	}
	return c, keep, overflow
}

// capMap keeps the limit highest counts (ties by name) and sums the rest
// into Other, or into *rest when rest is not nil.
func capMap(m map[string]int64, limit int, rest *int64) map[string]int64 {
	names := make([]string, 0, len(m))
	for k, v := range m {
		if v != 0 && (rest != nil || k != Other) {
			names = append(names, k)
		}
	}
	out := make(map[string]int64, min(len(names), limit+1))
	if len(names) > limit {
		sortByCount(names, func(k string) int64 { return m[k] })
	}
	for i, k := range names {
		switch {
		case i < limit:
			out[k] += m[k]
		case rest != nil:
			*rest += m[k]
		default:
			out[Other] += m[k]
		}
	}
	if rest == nil && m[Other] != 0 {
		out[Other] += m[Other]
	}
	return out
}
