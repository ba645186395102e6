// Package tally keeps streaming counters of who served what: per bucket of
// every dimension, per connection (as the sufficient statistics the
// cluster-robust variance needs), per time slice, plus latency and status
// metrics. Memory depends on the number of buckets, open connections and
// time slices, never on the number of requests.
package tally

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
)

// Outcome is the pseudo-dimension success/failure, kept like the others so
// the success rate gets the same connection-aware treatment.
const Outcome = "outcome"

// Outcome buckets.
const (
	Success = "success"
	Failure = "failure"
)

const (
	maxErrorKinds = 50
	maxSamples    = 5
	sampleBytes   = 300
	maxSlices     = 600
)

// Tally accumulates results. Safe for concurrent use.
type Tally struct {
	mu    sync.Mutex
	dims  map[string]*dim
	order []string
	conns map[uint64]*connState
	grace time.Duration

	metrics vegeta.Metrics
	// latency is the whole run's mergeable latency histogram (State);
	// vegeta's own estimator cannot be merged across processes.
	latency      LatencyHistogram
	total        int64
	errors       map[string]int64
	errorsOther  int64
	unattributed map[string]int64 // per dimension, among successful responses
	// failures counts failed requests per dimension and bucket, where
	// attribution could tell who failed them: errors per cluster and pod.
	failures             map[string]map[string]int64
	failuresUnattributed map[string]int64
	samples              []string // bodies no rule could attribute, to help fix the rules
	// podCluster is the cluster of each pod bucket (PodKey), noted once
	// per bucket, not per request.
	podCluster map[string]string
	// podKeys holds the pod buckets' names by cluster and pod (podKey),
	// at most maxPodKeys of them.
	podKeys   map[clusterPod]string
	noSamples bool
	// unread counts the results whose body attribution never read
	// (runner's attribution queue was full, or the run was aborted).
	unread, unreadAnswered int64

	start      time.Time
	sliceWidth time.Duration
	slices     []Slice

	lastSweep time.Time
	// windows are the time windows a split is judged in (Cut), in
	// increasing start.
	windows []*window
	// hold, held, heldEarly and committed: answers held back before they
	// are counted in a window (SetHold, windows.go).
	hold      time.Duration
	held      []heldAnswer
	heldHead  int
	heldEarly int64
	committed time.Time
	// now is the tally's clock (holding answers back, the connections'
	// grace): time.Now, or a test's. It is read once per answer.
	now func() time.Time
}

// MaxBuckets bounds the distinct values a dimension keeps (README.md,
// Limits): a rule that captures a per-request value (a request id, a
// timestamp) as a pod or a cluster would otherwise grow memory, CPU and
// every report with each request. Values past it are counted in the
// Other bucket, and Snapshot.Overflow says how many requests went there.
const MaxBuckets = 1000

// dim is one dimension's counters and the per-connection sums of the
// connections already finished; open connections keep their own counts,
// folded in when they are forgotten and added up by Snapshot, so that a
// request costs O(1) however many buckets its connection has seen.
type dim struct {
	index map[string]int
	names []string
	n     []int64
	sumXX []float64
	sumXM []float64
	sumMM float64
	units int64
	// overflow counts the requests put in Other past MaxBuckets.
	overflow int64
}

type connState struct {
	m        map[string]int64         // per dimension: requests counted on this connection
	x        map[string]map[int]int64 // per dimension, per bucket index (only buckets seen)
	closedAt time.Time
}

// Slice counts one time window of the attack.
type Slice struct {
	Start    time.Duration
	Requests int64
	Errors   int64
	// Clusters counts the answered requests per cluster that served them.
	Clusters map[string]int64
	// Latency holds the latencies of the window per serving cluster
	// (Unattributed for answers no rule placed, Failed for failures).
	Latency map[string]*Histogram
}

// Latency series keys that are not clusters.
const (
	Unattributed = "(unattributed)"
	Failed       = "(failed)"
)

// maxLatencySeries bounds the latency series per slice: a rule that
// captures a per-request value as the cluster must not grow the timeline
// with every request; the rest are merged into Other.
const maxLatencySeries = 16

// Other is the latency series of clusters past maxLatencySeries.
const Other = "(other)"

// New returns an empty tally. grace is how long a closed connection's state
// is kept for results still in flight (the request timeout plus a margin).
func New(start time.Time, grace time.Duration) *Tally {
	t := &Tally{
		dims:                 map[string]*dim{},
		conns:                map[uint64]*connState{},
		grace:                grace,
		errors:               map[string]int64{},
		unattributed:         map[string]int64{},
		failures:             map[string]map[string]int64{},
		failuresUnattributed: map[string]int64{},
		podCluster:           map[string]string{},
		start:                start,
		sliceWidth:           time.Second,
		now:                  time.Now,
	}
	for _, f := range attribution.Fields() {
		t.dimension(string(f))
	}
	t.dimension(Outcome)
	return t
}

func (t *Tally) dimension(name string) *dim {
	d, ok := t.dims[name]
	if !ok {
		d = &dim{index: map[string]int{}}
		t.dims[name] = d
		t.order = append(t.order, name)
	}
	return d
}

// bucket returns the index of a bucket, and whether it is new; past
// MaxBuckets distinct values a new name is counted as Other.
func (d *dim) bucket(name string) (int, bool) {
	i, ok := d.index[name]
	if !ok && len(d.names) >= MaxBuckets {
		d.overflow++
		name = Other
		i, ok = d.index[name]
	}
	if !ok {
		i = len(d.names)
		d.index[name] = i
		d.names = append(d.names, name)
		d.n = append(d.n, 0)
		d.sumXX = append(d.sumXX, 0)
		d.sumXM = append(d.sumXM, 0)
	}
	return i, !ok
}

// DisableSamples stops keeping unattributed bodies, for runs whose
// responses are not meant to be attributed.
func (t *Tally) DisableSamples() {
	t.mu.Lock()
	t.noSamples = true
	t.mu.Unlock()
}

// Add counts one result with the identity attribution gave it.
func (t *Tally) Add(r *attack.Result, id attribution.Identity) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.add(r, id, false)
}

// AddUnread counts one result whose body attribution never read: it counts
// for the success rate, latency and connections like any other, is
// unattributed in every dimension, and Snapshot.Unread says how many such
// answers the dimensions lack, so that no share is judged on the rest as if
// they were a fair sample (runner/judge.go).
func (t *Tally) AddUnread(r *attack.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.add(r, attribution.Identity{}, true)
}

// AddWindowed counts one result in the windows only (unread: attribution
// never read its body, as for AddUnread): the whole run's counts, latency,
// failures and connections are left alone. A distributed run's
// coordinator counts only windows in the workers' merged results (the
// workers count the rest) and never learns when their connections close:
// Add would keep every worker connection's state for the whole run.
func (t *Tally) AddWindowed(r *attack.Result, id attribution.Identity, unread bool) {
	if unread {
		id = attribution.Identity{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.Error == "" && len(t.windows) > 0 {
		t.holdWindow(r.Timestamp.Add(r.Latency), r.ConnID, id, t.now())
	}
}

// PodKey is the bucket of a pod in the pod dimension: "cluster/pod" when
// the cluster is known, else the pod's name. Pod names repeat across
// clusters (a StatefulSet's web-0 in c1 and in c2): keyed by name alone,
// two pods became one bucket labelled with whichever cluster came first.
func PodKey(cluster, pod string) string {
	if cluster == "" || pod == "" {
		return pod
	}
	return cluster + "/" + pod
}

// PodName is the pod's name in a pod bucket, given the bucket's cluster
// (Snapshot.PodClusters): PodKey undone.
func PodName(bucket, cluster string) string {
	if cluster == "" {
		return bucket
	}
	if name, ok := strings.CutPrefix(bucket, cluster+"/"); ok {
		return name
	}
	return bucket
}

// value is the bucket of identity id in field f.
func (t *Tally) value(f attribution.Field, id attribution.Identity) string {
	if f == attribution.Pod {
		return t.podKey(id.Cluster, id.Pod)
	}
	return id.Get(f)
}

// maxPodKeys bounds the pod buckets' names Tally keeps made (podKeys):
// past it, PodKey makes each one again, as a run with more pods than the
// pod dimension keeps (MaxBuckets) would only fill it with names counted
// as Other.
const maxPodKeys = 2 * MaxBuckets

type clusterPod struct{ cluster, pod string }

// podKey is PodKey(cluster, pod), made once per pair rather than once
// per request (issue 27: it was an allocation per attributed request).
func (t *Tally) podKey(cluster, pod string) string {
	if cluster == "" || pod == "" {
		return pod
	}
	k := clusterPod{cluster, pod}
	if v, ok := t.podKeys[k]; ok {
		return v
	}
	v := PodKey(cluster, pod)
	if len(t.podKeys) < maxPodKeys {
		if t.podKeys == nil {
			t.podKeys = map[clusterPod]string{}
		}
		t.podKeys[k] = v
	}
	return v
}

func (t *Tally) add(r *attack.Result, id attribution.Identity, unread bool) {
	now := t.now()
	t.total++
	// Errors are counted here, capped; vegeta's own list grows with every
	// distinct message, which a long failing run would turn into a leak.
	e := r.Error
	r.Error = ""
	t.metrics.Add(r.Result)
	r.Error = e
	t.latency.Add(r.Latency)
	ok := r.Error == ""
	outcome := Success
	if !ok {
		outcome = Failure
		t.countError(r.Error)
	}
	cs := t.conn(r.ConnID)
	t.count(Outcome, outcome, cs)
	if !ok {
		for _, f := range attribution.Fields() {
			if v := t.value(f, id); v != "" {
				if t.failures[string(f)] == nil {
					t.failures[string(f)] = map[string]int64{}
				}
				if _, known := t.failures[string(f)][v]; !known && len(t.failures[string(f)]) >= MaxBuckets {
					v = Other
				}
				n, seen := t.failures[string(f)][v]
				t.failures[string(f)][v] = n + 1
				if !seen && f == attribution.Pod {
					t.notePodCluster(v, id.Cluster)
				}
			} else {
				t.failuresUnattributed[string(f)]++
			}
		}
	}
	if unread {
		t.unread++
		if ok {
			t.unreadAnswered++
		}
	}
	if ok {
		for _, f := range attribution.Fields() {
			if v := t.value(f, id); v != "" {
				if t.count(string(f), v, cs) && f == attribution.Pod {
					t.notePodCluster(v, id.Cluster)
				}
			} else {
				t.unattributed[string(f)]++
			}
		}
		if len(t.windows) > 0 {
			t.holdWindow(r.Timestamp.Add(r.Latency), r.ConnID, id, now)
		}
		if id.Empty() && !unread && !t.noSamples && len(t.samples) < maxSamples {
			b := r.Body
			if len(b) > sampleBytes {
				b = b[:sampleBytes]
			}
			t.samples = append(t.samples, string(b))
		}
	}
	served := ""
	if ok && id.Cluster != "" {
		// The timeline shows who served; failures are its errors.
		served = t.bucketName(string(attribution.Cluster), id.Cluster)
	}
	series := served
	switch {
	case !ok:
		series = Failed
	case served == "":
		series = Unattributed
	}
	t.slice(r.Timestamp, ok, served, series, r.Latency)
	if now.Sub(t.lastSweep) > time.Second {
		t.sweep(now)
	}
}

func newConnState() *connState {
	return &connState{m: map[string]int64{}, x: map[string]map[int]int64{}}
}

// conn returns the state of a connection still carrying requests, or nil
// for requests that never got one (each is then its own sampling unit).
func (t *Tally) conn(id uint64) *connState {
	if id == 0 {
		return nil
	}
	cs, ok := t.conns[id]
	if !ok {
		cs = newConnState()
		t.conns[id] = cs
	}
	return cs
}

// count adds one request to bucket b of dimension dn.
func (t *Tally) count(dn, b string, cs *connState) (isNew bool) {
	return countIn(t.dims[dn], dn, b, cs)
}

// countIn adds one request to bucket b of d (dimension dn) and updates the
// per-connection sums incrementally: when m_j and x_ij each grow by one,
// sum m^2 grows by 2m+1, sum x_i^2 by 2x_i+1, and sum x_b*m by x_b for every
// bucket b plus m+1 for bucket i.
func countIn(d *dim, dn, b string, cs *connState) (isNew bool) {
	i, isNew := d.bucket(b)
	d.n[i]++
	if cs == nil {
		// A request without a connection is its own unit, with m = 1.
		d.units++
		d.sumMM++
		d.sumXX[i]++
		d.sumXM[i]++
		return isNew
	}
	if cs.m[dn] == 0 {
		d.units++
	}
	cs.m[dn]++
	x := cs.x[dn]
	if x == nil {
		x = map[int]int64{}
		cs.x[dn] = x
	}
	x[i]++
	return isNew
}

// fold adds a connection's counts to the finished sums of each dimension
// of dims: m² to Σm², and x_b² and x_b·m to Σx², Σxm of every bucket b it
// carried.
func fold(dims map[string]*dim, cs *connState) {
	for dn, m := range cs.m {
		d := dims[dn]
		d.sumMM += float64(m) * float64(m)
		for i, x := range cs.x[dn] {
			d.sumXX[i] += float64(x) * float64(x)
			d.sumXM[i] += float64(x) * float64(m)
		}
	}
}

// bucketName is the name a value is counted under: itself, or Other past
// MaxBuckets.
func (t *Tally) bucketName(dn, b string) string {
	d := t.dims[dn]
	if _, ok := d.index[b]; ok || len(d.names) < MaxBuckets {
		return b
	}
	return Other
}

// notePodCluster keeps the cluster of a pod seen for the first time.
func (t *Tally) notePodCluster(pod, cluster string) {
	if _, ok := t.podCluster[pod]; !ok && cluster != "" {
		t.podCluster[pod] = cluster
	}
}

// ConnClosed marks a connection's state for removal after the grace period.
func (t *Tally) ConnClosed(id uint64) {
	t.mu.Lock()
	now := t.now()
	if cs, ok := t.conns[id]; ok {
		cs.closedAt = now
	}
	t.closeWindowConn(id, now)
	t.mu.Unlock()
}

func (t *Tally) sweep(now time.Time) {
	t.lastSweep = now
	for id, cs := range t.conns {
		if !cs.closedAt.IsZero() && now.Sub(cs.closedAt) > t.grace {
			fold(t.dims, cs)
			delete(t.conns, id)
		}
	}
	t.sweepWindows(now)
}

func (t *Tally) countError(e string) {
	if _, ok := t.errors[e]; ok || len(t.errors) < maxErrorKinds {
		t.errors[e]++
		return
	}
	t.errorsOther++
}

func (t *Tally) slice(ts time.Time, ok bool, cluster, series string, latency time.Duration) {
	off := ts.Sub(t.start)
	if off < 0 {
		off = 0
	}
	i := int(off / t.sliceWidth)
	for i >= maxSlices {
		t.coarsen()
		i = int(off / t.sliceWidth)
	}
	for len(t.slices) <= i {
		t.slices = append(t.slices, Slice{Start: time.Duration(len(t.slices)) * t.sliceWidth})
	}
	s := &t.slices[i]
	s.Requests++
	if !ok {
		s.Errors++
	}
	if cluster != "" {
		if s.Clusters == nil {
			s.Clusters = map[string]int64{}
		}
		s.Clusters[cluster]++
	}
	if s.Latency == nil {
		s.Latency = map[string]*Histogram{}
	}
	h := s.Latency[series]
	if h == nil {
		if len(s.Latency) >= maxLatencySeries {
			series = Other
			h = s.Latency[series]
		}
		if h == nil {
			h = new(Histogram)
			s.Latency[series] = h
		}
	}
	h.Add(latency)
}

// coarsen halves the time resolution so long attacks keep a bounded timeline.
func (t *Tally) coarsen() {
	t.sliceWidth *= 2
	merged := make([]Slice, 0, (len(t.slices)+1)/2)
	for i := 0; i < len(t.slices); i += 2 {
		s := t.slices[i]
		s.Start = time.Duration(i/2) * t.sliceWidth
		if i+1 < len(t.slices) {
			o := t.slices[i+1]
			s.Requests += o.Requests
			s.Errors += o.Errors
			for k, v := range o.Clusters {
				if s.Clusters == nil {
					s.Clusters = map[string]int64{}
				}
				s.Clusters[k] += v
			}
			for k, h := range o.Latency {
				if s.Latency == nil {
					s.Latency = map[string]*Histogram{}
				}
				if mine := s.Latency[k]; mine != nil {
					mine.Merge(h)
				} else {
					s.Latency[k] = h
				}
			}
		}
		merged = append(merged, s)
	}
	t.slices = merged
}

// Snapshot is a consistent copy of everything counted so far.
type Snapshot struct {
	Total        int64
	Metrics      vegeta.Metrics
	Dimensions   map[string]assert.Counts
	Unattributed map[string]int64
	// Failures counts failed requests per dimension and bucket;
	// FailuresUnattributed those attribution could not place.
	Failures             map[string]map[string]int64
	FailuresUnattributed map[string]int64
	Errors               map[string]int64
	ErrorsOther          int64
	// Overflow is, per dimension that reached MaxBuckets distinct values,
	// how many requests were counted in Other.
	Overflow   map[string]int64
	Samples    []string
	SliceWidth time.Duration
	Slices     []Slice
	// Connections is the number of sampling units seen (distinct
	// connections, plus requests that never got one).
	Connections int64
	// PodClusters is the cluster of each pod bucket ("cluster/pod",
	// PodKey) that has one.
	PodClusters map[string]string
	// Unread counts the results whose body attribution never read (see
	// AddUnread), UnreadAnswered those among them that were answered: they
	// are in Unattributed too.
	Unread, UnreadAnswered int64
	// Latency is the whole run's latency histogram; merged snapshots have
	// no vegeta estimator, so quantiles are read with LatencyQuantile.
	Latency *LatencyHistogram
	// Windows are the counts of each time window (Cut), in time order;
	// nil when the run was not cut into windows.
	Windows []WindowCounts
	// WindowsHeldEarly counts the answers counted in a window before
	// their hold was over, because MaxHeld answers were held: a cut
	// later than their answer but in their hold did not move them.
	WindowsHeldEarly int64
	// Start is when the tally started: Slices' and Windows' origin.
	Start time.Time
}

// LatencyQuantile is the q-quantile of the run's latencies from the
// mergeable histogram (within LatencyRelativeError), 0 without latencies.
// Every snapshot has the histogram, one process's and merged workers'
// (State.Validate requires one latency per request).
func (s *Snapshot) LatencyQuantile(q float64) time.Duration {
	if s.Latency == nil {
		return 0
	}
	return s.Latency.Quantile(q)
}

// Snapshot copies the counters; buckets are sorted by name.
func (t *Tally) Snapshot() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Snapshot{
		Total:                t.total,
		Metrics:              t.metrics,
		Dimensions:           map[string]assert.Counts{},
		Unattributed:         copyMap(t.unattributed),
		Failures:             map[string]map[string]int64{},
		FailuresUnattributed: copyMap(t.failuresUnattributed),
		Errors:               copyMap(t.errors),
		ErrorsOther:          t.errorsOther,
		Samples:              append([]string(nil), t.samples...),
		SliceWidth:           t.sliceWidth,
		Connections:          t.dims[Outcome].units,
		PodClusters:          copyMap(t.podCluster),
		Unread:               t.unread,
		UnreadAnswered:       t.unreadAnswered,
		Start:                t.start,
	}
	lat := t.latency
	s.Latency = &lat
	s.Metrics.StatusCodes = map[string]int{}
	for k, v := range t.metrics.StatusCodes {
		s.Metrics.StatusCodes[k] = v
	}
	s.Metrics.Close()
	if lat.Count > 0 {
		// The quantiles a report shows are the ones a latency expectation
		// is judged by, and a merged run's: the histogram's, whose error
		// is bounded (LatencyRelativeError), not the t-digest's.
		l := &s.Metrics.Latencies
		l.P50, l.P90, l.P95, l.P99 = lat.Quantile(0.5), lat.Quantile(0.9), lat.Quantile(0.95), lat.Quantile(0.99)
	}
	for _, sl := range t.slices {
		sl.Clusters = copyMap(sl.Clusters)
		lat := make(map[string]*Histogram, len(sl.Latency))
		for k, h := range sl.Latency {
			c := *h
			lat[k] = &c
		}
		sl.Latency = lat
		s.Slices = append(s.Slices, sl)
	}
	var overflow map[string]int64
	s.Dimensions, overflow = withOpen(t.dims, t.order, t.conns)
	if len(overflow) > 0 {
		s.Overflow = overflow
	}
	s.Windows, s.WindowsHeldEarly = t.windowsNow()
	for name, m := range t.failures {
		s.Failures[name] = copyMap(m)
	}
	return s
}

// withOpen is the counts of every dimension of dims with the open
// connections' counts added to copies of the finished sums: O(the buckets
// each connection saw), once per snapshot; and the requests each
// dimension past MaxBuckets counted in Other.
func withOpen(dims map[string]*dim, order []string, conns map[uint64]*connState) (map[string]assert.Counts, map[string]int64) {
	open := map[string]*dim{}
	overflow := map[string]int64{}
	for _, name := range order {
		d := *dims[name]
		d.sumXX, d.sumXM = slices.Clone(d.sumXX), slices.Clone(d.sumXM)
		open[name] = &d
		if d.overflow > 0 {
			overflow[name] = d.overflow
		}
	}
	for _, cs := range conns {
		fold(open, cs)
	}
	out := make(map[string]assert.Counts, len(order))
	for _, name := range order {
		out[name] = open[name].counts()
	}
	return out, overflow
}

func (d *dim) counts() assert.Counts {
	idx := make([]int, len(d.names))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return d.names[idx[a]] < d.names[idx[b]] })
	c := assert.Counts{Units: &assert.UnitStats{Units: d.units, SumMM: d.sumMM}}
	for _, i := range idx {
		c.Buckets = append(c.Buckets, d.names[i])
		c.N = append(c.N, d.n[i])
		c.Units.SumXX = append(c.Units.SumXX, d.sumXX[i])
		c.Units.SumXM = append(c.Units.SumXM, d.sumXM[i])
	}
	return c
}

func copyMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
