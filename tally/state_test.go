package tally

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
)

type streamItem struct {
	r      *attack.Result
	id     attribution.Identity
	unread bool
}

// stream builds n real attack results: random connections (0 is a request
// without one), clusters, pods, versions, failures, latencies and bodies,
// over span from start.
func stream(rng *rand.Rand, start time.Time, n int, span time.Duration) []streamItem {
	clusters := []string{"c1", "c2", "c3", "c4"}
	out := make([]streamItem, 0, n)
	for range n {
		c := rng.IntN(4)
		conn := uint64(rng.IntN(61))
		if conn%5 == 2 { // connections that stick to one cluster
			c = int(conn) % 4
		}
		lat := time.Duration(float64(time.Millisecond) * math.Exp(rng.NormFloat64()))
		if rng.IntN(50) == 0 {
			lat = time.Duration(rng.IntN(100)) // sub-µs answers, counted exactly
		}
		ts := start.Add(time.Duration(rng.Int64N(int64(span))))
		r := &attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: ts, Latency: lat, BytesIn: uint64(rng.IntN(500)), BytesOut: 10,
			Body: []byte("ok")}, ConnID: conn}
		id := attribution.Identity{Cluster: clusters[c], Pod: fmt.Sprintf("%s-pod-%d", clusters[c], rng.IntN(5)), Version: fmt.Sprintf("v%d", rng.IntN(3))}
		switch k := rng.IntN(100); {
		case k < 6:
			r.Code, r.Error = 503, "503 Service Unavailable"
		case k < 8:
			r.Code, r.Error = 0, fmt.Sprintf("dial tcp: connection refused #%d", rng.IntN(4))
			id = attribution.Identity{}
		case k < 11:
			id = attribution.Identity{}
			r.Body = fmt.Appendf(nil, "unknown body %d", rng.IntN(1000))
		case k < 13:
			id.Pod = ""
		}
		out = append(out, streamItem{r: r, id: id, unread: rng.IntN(40) == 0})
	}
	return out
}

func feed(tl *Tally, it streamItem) {
	if it.unread {
		tl.AddUnread(it.r)
	} else {
		tl.Add(it.r, it.id)
	}
}

// closeSome marks every third connection closed and folds it in at once,
// so that both finished and open connections are merged.
func closeSome(tl *Tally) {
	for c := uint64(1); c <= 60; c += 3 {
		tl.ConnClosed(c)
	}
	tl.mu.Lock()
	tl.grace = 0
	tl.sweep(time.Now().Add(time.Second))
	tl.mu.Unlock()
}

// One stream fed to one tally and, split by connection, to k tallies: the
// merged states must give what the single tally counted.
func TestMergeEqualsOneTally(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		n, k int
		span time.Duration
	}{
		{"4 workers 30s", 20000, 4, 30 * time.Second},
		{"7 workers, timeline coarsened", 15000, 7, 1500 * time.Second},
		{"1 worker", 3000, 1, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(tc.n)))
			start := time.Now()
			items := stream(rng, start, tc.n, tc.span)
			one := New(start, time.Minute)
			parts := make([]*Tally, tc.k)
			for i := range parts {
				parts[i] = New(start, time.Minute)
			}
			var lats []time.Duration
			for i, it := range items {
				feed(one, it)
				w := int(it.r.ConnID) % tc.k
				if it.r.ConnID == 0 {
					w = i % tc.k // requests without a connection are units of their own anywhere
				}
				feed(parts[w], it)
				lats = append(lats, max(it.r.Latency, 0))
			}
			closeSome(one)
			states := make([]State, tc.k)
			for i, p := range parts {
				closeSome(p)
				states[i] = p.State()
			}
			want := one.Snapshot()
			got := Merge(states...).Snapshot()
			compareSnapshots(t, got, want)
			slices.Sort(lats)
			for _, q := range []float64{0.5, 0.9, 0.95, 0.99, 1} {
				exact := lats[int(q*float64(len(lats))+0.999999999)-1]
				checkQuantile(t, fmt.Sprintf("q%.2f", q), got.LatencyQuantile(q), exact)
			}
			m := got.Metrics.Latencies
			// vegeta's own Min skips a latency of 0 now and then (it takes 0
			// as unset), so the merged one is checked against the sample.
			if m.Min != lats[0] || m.Max != lats[len(lats)-1] {
				t.Errorf("latency min %v max %v, exact %v %v", m.Min, m.Max, lats[0], lats[len(lats)-1])
			}
			checkQuantile(t, "P99", m.P99, lats[int(0.99*float64(len(lats))+0.999999999)-1])
			checkQuantile(t, "P50", m.P50, lats[int(0.5*float64(len(lats))+0.999999999)-1])
			// One process's snapshot reports (and judges by) the same
			// bounded-error quantiles as a merged one.
			checkQuantile(t, "one tally's P99", want.Metrics.Latencies.P99, lats[int(0.99*float64(len(lats))+0.999999999)-1])
			checkQuantile(t, "one tally's P95", want.Metrics.Latencies.P95, lats[int(0.95*float64(len(lats))+0.999999999)-1])
		})
	}
}

func checkQuantile(t *testing.T, what string, got, exact time.Duration) {
	t.Helper()
	if exact < 1<<fineSub+1<<fineSub {
		if got != exact {
			t.Errorf("%s = %v, exact %v: below 128ns the histogram is exact", what, got, exact)
		}
		return
	}
	if r := math.Abs(float64(got-exact)) / float64(exact); r > LatencyRelativeError {
		t.Errorf("%s = %v, exact %v: off by %.3f%%, beyond %.3f%%", what, got, exact, 100*r, 100*LatencyRelativeError)
	}
}

func compareSnapshots(t *testing.T, got, want Snapshot) {
	t.Helper()
	if got.Total != want.Total || got.Connections != want.Connections || got.Unread != want.Unread || got.UnreadAnswered != want.UnreadAnswered {
		t.Errorf("total %d conns %d unread %d/%d, want %d %d %d/%d", got.Total, got.Connections, got.Unread, got.UnreadAnswered,
			want.Total, want.Connections, want.Unread, want.UnreadAnswered)
	}
	if len(got.Dimensions) != len(want.Dimensions) {
		t.Errorf("%d dimensions, want %d", len(got.Dimensions), len(want.Dimensions))
	}
	for name, w := range want.Dimensions {
		g := got.Dimensions[name]
		if !slices.Equal(g.Buckets, w.Buckets) || !slices.Equal(g.N, w.N) || g.Units.Units != w.Units.Units {
			t.Errorf("%s: buckets %v n %v units %d, want %v %v %d", name, g.Buckets, g.N, g.Units.Units, w.Buckets, w.N, w.Units.Units)
			continue
		}
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
		if !near(g.Units.SumMM, w.Units.SumMM) {
			t.Errorf("%s: sumMM %v, want %v", name, g.Units.SumMM, w.Units.SumMM)
		}
		for i := range w.Buckets {
			if !near(g.Units.SumXX[i], w.Units.SumXX[i]) || !near(g.Units.SumXM[i], w.Units.SumXM[i]) {
				t.Errorf("%s/%s: sumXX %v sumXM %v, want %v %v", name, w.Buckets[i], g.Units.SumXX[i], g.Units.SumXM[i], w.Units.SumXX[i], w.Units.SumXM[i])
			}
		}
	}
	for what, pair := range map[string][2]any{
		"unattributed":          {got.Unattributed, want.Unattributed},
		"failures":              {got.Failures, want.Failures},
		"failures unattributed": {got.FailuresUnattributed, want.FailuresUnattributed},
		"errors":                {got.Errors, want.Errors},
		"errors other":          {got.ErrorsOther, want.ErrorsOther},
		"status codes":          {got.Metrics.StatusCodes, want.Metrics.StatusCodes},
		"pod clusters":          {got.PodClusters, want.PodClusters},
		"slice width":           {got.SliceWidth, want.SliceWidth},
		"slices":                {got.Slices, want.Slices},
		"overflow":              {len(got.Overflow), len(want.Overflow)},
		"latency histogram":     {*got.Latency, *want.Latency},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s: got %v\nwant %v", what, pair[0], pair[1])
		}
	}
	gm, wm := got.Metrics, want.Metrics
	if gm.Requests != wm.Requests || gm.Success != wm.Success || gm.Rate != wm.Rate || gm.Throughput != wm.Throughput ||
		gm.Duration != wm.Duration || gm.Wait != wm.Wait || gm.BytesIn != wm.BytesIn || gm.BytesOut != wm.BytesOut ||
		!gm.Earliest.Equal(wm.Earliest) || !gm.Latest.Equal(wm.Latest) || !gm.End.Equal(wm.End) ||
		gm.Latencies.Total != wm.Latencies.Total || gm.Latencies.Max != wm.Latencies.Max || gm.Latencies.Mean != wm.Latencies.Mean {
		t.Errorf("metrics\n got %+v\nwant %+v", gm, wm)
	}
	// Each worker keeps its first samples and the merge the first of their
	// sorted union, so only where they come from and how many is checked.
	if len(got.Samples) != min(len(want.Samples), maxSamples) {
		t.Errorf("%d samples, want %d", len(got.Samples), len(want.Samples))
	}
	for _, s := range got.Samples {
		if !strings.HasPrefix(s, "unknown body ") {
			t.Errorf("sample %q is not an unattributed body", s)
		}
	}
}

func workerStates(t *testing.T, k, n int, seed uint64) (mid, final []State) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	start := time.Now()
	items := stream(rng, start, n, 20*time.Second)
	parts := make([]*Tally, k)
	for i := range parts {
		parts[i] = New(start, time.Minute)
	}
	for i, it := range items {
		feed(parts[(int(it.r.ConnID)+i)%k], it)
		if i == n/2 {
			for _, p := range parts {
				mid = append(mid, p.State())
			}
		}
	}
	for _, p := range parts {
		final = append(final, p.State())
	}
	return mid, final
}

// diffJSON names where two encodings part, without printing kilobytes.
func diffJSON(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(i-200, 0)
	return fmt.Sprintf("at byte %d:\n got ...%s\nwant ...%s", i, a[lo:min(i+100, len(a))], b[lo:min(i+100, len(b))])
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Merging does not depend on the order of the states, and replacing each
// worker's earlier state by its later one gives what merging the later
// ones does.
func TestMergeOrderAndReplacement(t *testing.T) {
	t.Parallel()
	mid, final := workerStates(t, 5, 8000, 11)
	want := mustJSON(t, Merge(final...))
	rng := rand.New(rand.NewPCG(5, 5))
	for range 5 {
		perm := slices.Clone(final)
		rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		if got := mustJSON(t, Merge(perm...)); got != want {
			t.Fatalf("merge depends on order: %s", diffJSON(got, want))
		}
	}
	a := NewAccumulator(final[0].Start)
	for i := range mid {
		a.Put(i, &mid[i])
	}
	if got := mustJSON(t, a.State()); got == want {
		t.Fatalf("the mid-run merge already equals the final one: the test cannot tell")
	}
	for i := len(final) - 1; i >= 0; i-- {
		a.Put(i, &final[i])
	}
	if got := mustJSON(t, a.State()); got != want {
		t.Fatalf("incremental merge differs: %s", diffJSON(got, want))
	}
	a.Remove(0)
	if got, want := mustJSON(t, a.State()), mustJSON(t, Merge(final[1:]...)); got != want {
		t.Fatalf("after removing a worker: %s", diffJSON(got, want))
	}
}

// Workers' states as a coordinator gets them: every round each worker
// sends its cumulative state trimmed to the slices that changed (one
// record is lost on the way), the timeline is coarsened midway (1,500 s
// of results, more than maxSlices one-second slices), and the last states
// are whole. The accumulator's merge must give what one tally that
// counted every result gives, and midway what merging the whole states
// from scratch gives.
func TestAccumulatorFollowsTrimmedStates(t *testing.T) {
	t.Parallel()
	// The timeline coarsens at 600 s, in round 8; the record is lost after.
	const k, rounds, lostRound = 5, 20, 15
	rng := rand.New(rand.NewPCG(11, 12))
	start := time.Now()
	items := stream(rng, start, 12000, 1500*time.Second)
	slices.SortFunc(items, func(a, b streamItem) int { return a.r.Timestamp.Compare(b.r.Timestamp) })
	one := New(start, time.Minute)
	parts := make([]*Tally, k)
	for i := range parts {
		parts[i] = New(start, time.Minute)
	}
	acc := NewAccumulator(start)
	whole := make([]State, k) // each worker's last whole state
	widths := map[time.Duration]bool{}
	trimmed := 0
	send := func(w int, final bool, lost bool) {
		st := parts[w].State()
		sent := st
		if !final && whole[w].Total > 0 {
			sent = st.Trim(&whole[w])
		}
		if sent.SlicesFrom > 0 {
			trimmed++
		}
		whole[w] = st
		widths[st.SliceWidth] = true
		if !lost {
			acc.Put(w, &sent)
		}
	}
	for r := range rounds {
		for i := r * len(items) / rounds; i < (r+1)*len(items)/rounds; i++ {
			it := items[i]
			feed(one, it)
			feed(parts[int(it.r.ConnID)%k], it)
		}
		for w := range k {
			send(w, false, r == lostRound && w == 2)
		}
		if r == lostRound {
			continue // the lost record
		}
		// After the lost record, worker 2's timeline lacks the slices that
		// record brought until its whole last state: only the counts match.
		got, want := acc.Snapshot(), Merge(whole...).Snapshot()
		if !reflect.DeepEqual(got.Dimensions, want.Dimensions) || got.Total != want.Total ||
			(r < lostRound && (!reflect.DeepEqual(got.Slices, want.Slices) || got.SliceWidth != want.SliceWidth)) {
			t.Fatalf("round %d: the trimmed states merge to %d requests in %d slices of %v, the whole ones to %d in %d of %v",
				r, got.Total, len(got.Slices), got.SliceWidth, want.Total, len(want.Slices), want.SliceWidth)
		}
	}
	if trimmed < k*rounds/2 || len(widths) < 2 || !widths[time.Second] {
		t.Fatalf("%d trimmed states, slice widths %v: the test does not exercise trimming and coarsening", trimmed, widths)
	}
	closeSome(one)
	for w := range k {
		closeSome(parts[w])
		send(w, true, false)
	}
	compareSnapshots(t, acc.Snapshot(), one.Snapshot())
}

// A state survives JSON unchanged, and a merged state merges on.
func TestStateJSONRoundTrip(t *testing.T) {
	t.Parallel()
	_, final := workerStates(t, 3, 5000, 13)
	for i, s := range append(final, Merge(final...)) {
		b := mustJSON(t, s)
		var back State
		if err := json.Unmarshal([]byte(b), &back); err != nil {
			t.Fatal(err)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("state %d: %v", i, err)
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("state %d changed through JSON: %s", i, diffJSON(mustJSON(t, back), mustJSON(t, s)))
		}
	}
	if a, b := mustJSON(t, Merge(Merge(final[:2]...), final[2])), mustJSON(t, Merge(final...)); a != b {
		t.Fatalf("merging a merge differs: %s", diffJSON(a, b))
	}
}

// Buckets past MaxBuckets across workers go to Other with Overflow
// counted, keeping the largest; the counts still add up.
func TestMergeCapsBuckets(t *testing.T) {
	t.Parallel()
	start := time.Now()
	var states []State
	for w := range 2 {
		tl := New(start, time.Minute)
		for i := range MaxBuckets {
			for range 1 + w {
				tl.Add(&attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start}, ConnID: uint64(i + 1)},
					attribution.Identity{Cluster: fmt.Sprintf("c-%d-%04d", w, i)})
			}
		}
		states = append(states, tl.State())
	}
	s := Merge(states...).Snapshot()
	c := s.Dimensions["cluster"]
	if len(c.Buckets) != MaxBuckets+1 || !slices.Contains(c.Buckets, Other) {
		t.Fatalf("%d buckets, want %d with %s", len(c.Buckets), MaxBuckets+1, Other)
	}
	var total int64
	for i, b := range c.Buckets {
		total += c.N[i]
		if b != Other && !strings.HasPrefix(b, "c-1-") {
			t.Errorf("kept %s, a bucket of 1 request, over worker 1's buckets of 2", b)
		}
	}
	if total != 3*MaxBuckets || s.Overflow["cluster"] != MaxBuckets {
		t.Errorf("counted %d, overflow %d; want %d and %d", total, s.Overflow["cluster"], 3*MaxBuckets, MaxBuckets)
	}
	for _, sl := range s.Slices {
		if len(sl.Clusters) > MaxBuckets+1 || len(sl.Latency) > maxLatencySeries+1 {
			t.Errorf("slice keeps %d clusters, %d latency series", len(sl.Clusters), len(sl.Latency))
		}
	}
}

// Every bound of a received state is enforced.
func TestStateValidate(t *testing.T) {
	t.Parallel()
	_, final := workerStates(t, 1, 500, 17)
	base := mustJSON(t, final[0])
	fresh := func() State {
		var s State
		if err := json.Unmarshal([]byte(base), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := fresh(); s.Validate() != nil {
		t.Fatalf("a tally's own state is invalid: %v", s.Validate())
	}
	many := func(n int) map[string]int64 {
		m := map[string]int64{}
		for i := range n {
			m[fmt.Sprint(i)] = 1
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		break_ func(*State)
	}{
		{"zero slice width", func(s *State) { s.SliceWidth = 0 }},
		{"slice width too wide", func(s *State) { s.SliceWidth = maxSliceWidth + 1 }},
		{"negative total", func(s *State) { s.Total = -1 }},
		{"successes above total", func(s *State) { s.Successes = s.Total + 1 }},
		{"requests without a latency", func(s *State) { s.Latency = HistogramState{} }},
		{"more requests than latencies", func(s *State) { s.Total++ }},
		{"too many dimensions", func(s *State) {
			for i := range maxDimensions + 1 {
				s.Dimensions[fmt.Sprint(i)] = DimState{}
			}
		}},
		{"counts shorter than buckets", func(s *State) { d := s.Dimensions["cluster"]; d.N = d.N[1:]; s.Dimensions["cluster"] = d }},
		{"unsorted buckets", func(s *State) { d := s.Dimensions["cluster"]; d.Buckets[0] = "zzz"; s.Dimensions["cluster"] = d }},
		{"NaN sum", func(s *State) { d := s.Dimensions["cluster"]; d.SumXX[0] = math.NaN(); s.Dimensions["cluster"] = d }},
		{"too many buckets", func(s *State) {
			d := DimState{}
			for i := range MaxBuckets + 2 {
				d.Buckets = append(d.Buckets, fmt.Sprintf("%05d", i))
				d.N, d.SumXX, d.SumXM = append(d.N, 1), append(d.SumXX, 1), append(d.SumXM, 1)
			}
			s.Dimensions["pod"] = d
		}},
		{"too many error kinds", func(s *State) { s.Errors = many(maxErrorKinds + 1) }},
		{"too many samples", func(s *State) { s.Samples = make([]string, maxSamples+1) }},
		{"long sample", func(s *State) { s.Samples = []string{strings.Repeat("x", sampleBytes+1)} }},
		{"too many status codes", func(s *State) { s.StatusCodes = many(maxStatusCodes + 1) }},
		{"negative code count", func(s *State) { s.StatusCodes["200"] = -1 }},
		{"histogram bins do not add up", func(s *State) { s.Latency.Count++ }},
		{"histogram index out of range", func(s *State) { s.Latency.Bins = []int64{fineBuckets, s.Latency.Count} }},
		{"histogram odd bins", func(s *State) { s.Latency.Bins = s.Latency.Bins[1:] }},
		{"too many slices", func(s *State) { s.Slices = make([]SliceState, maxSlices+1) }},
		{"slice errors above requests", func(s *State) { s.Slices[0].Errors = s.Slices[0].Requests + 1 }},
		{"too many latency series", func(s *State) {
			s.Slices[0].Latency = map[string]HistogramState{}
			for i := range maxLatencySeries + 2 {
				s.Slices[0].Latency[fmt.Sprint(i)] = HistogramState{}
			}
		}},
		{"too many pod clusters", func(s *State) {
			s.PodClusters = map[string]string{}
			for i := range maxPodClusters + 1 {
				s.PodClusters[fmt.Sprint(i)] = "c"
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fresh()
			tc.break_(&s)
			if err := s.Validate(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// The whole-run histogram's quantiles are within LatencyRelativeError of
// the exact order statistic, across six decades.
func TestLatencyHistogramQuantiles(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	var h LatencyHistogram
	var all []time.Duration
	for range 50000 {
		d := time.Duration(math.Exp(rng.Float64() * math.Log(1e10))) // 1ns .. 10s, log-uniform
		h.Add(d)
		all = append(all, d)
	}
	slices.Sort(all)
	for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 1} {
		checkQuantile(t, fmt.Sprintf("q%v", q), h.Quantile(q), all[int(q*float64(len(all))+0.999999999)-1])
	}
	if h.Min != all[0] || h.Max != all[len(all)-1] || h.Count != int64(len(all)) {
		t.Errorf("min %v max %v count %d", h.Min, h.Max, h.Count)
	}
	for i := range fineBuckets - 1 {
		lo, hi := fineBounds(i)
		if fineIndex(lo) != i || fineIndex(hi-1) != i || fineIndex(hi) != i+1 {
			t.Fatalf("bucket %d [%d,%d) does not match fineIndex", i, lo, hi)
		}
	}
}

// BenchmarkAdd is what a request costs the tally, the whole-run histogram
// included, once connections and buckets are known. Its one allocation
// is vegeta's (Metrics.Add formats the status code).
func BenchmarkAdd(b *testing.B) {
	start := time.Now()
	tl := New(start, time.Minute)
	ids := []attribution.Identity{{Cluster: "c1", Pod: "p1"}, {Cluster: "c2", Pod: "p2"}}
	r := &attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start, Latency: time.Millisecond}}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		r.ConnID = uint64(1 + i%8)
		r.Latency = time.Duration(i%5000) * time.Microsecond
		tl.Add(r, ids[i%2])
		i++
	}
}
