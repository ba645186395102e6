package tally

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
)

// The incremental per-connection sums must equal the sums computed directly
// from the full connection × bucket matrix, whatever order requests arrive in.
func TestUnitStatsMatchDirectComputation(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	clusters := []string{"c1", "c2", "c3"}
	const conns = 40
	x := make([][3]float64, conns+1) // conn id 1..conns
	start := time.Now()
	tl := New(start, time.Minute)
	var loose [3]float64 // requests that never got a connection
	for i := 0; i < 5000; i++ {
		c := rng.IntN(conns + 1) // 0 = no connection
		b := rng.IntN(3)
		if c%7 == 3 { // connections that stick to one cluster
			b = c % 3
		}
		r := &attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start}, ConnID: uint64(c)}
		tl.Add(r, attribution.Identity{Cluster: clusters[b]})
		if c == 0 {
			loose[b]++
		} else {
			x[c][b]++
		}
	}
	// Half the connections end and are forgotten (their sums folded in);
	// the sums must not change.
	for c := 1; c <= conns; c += 2 {
		tl.ConnClosed(uint64(c))
	}
	tl.mu.Lock()
	tl.grace = 0
	tl.sweep(time.Now().Add(time.Second))
	left := len(tl.conns)
	tl.mu.Unlock()
	if left != conns/2 {
		t.Fatalf("%d connections left after the sweep, want %d", left, conns/2)
	}
	got := tl.Snapshot().Dimensions["cluster"]
	var sumMM float64
	var units int64
	sumXX := make([]float64, 3)
	sumXM := make([]float64, 3)
	for c := 1; c <= conns; c++ {
		m := x[c][0] + x[c][1] + x[c][2]
		if m == 0 {
			continue
		}
		units++
		sumMM += m * m
		for b := 0; b < 3; b++ {
			sumXX[b] += x[c][b] * x[c][b]
			sumXM[b] += x[c][b] * m
		}
	}
	for b := 0; b < 3; b++ { // each loose request is a unit with m = 1
		units += int64(loose[b])
		sumMM += loose[b]
		sumXX[b] += loose[b]
		sumXM[b] += loose[b]
	}
	if got.Units.Units != units || got.Units.SumMM != sumMM {
		t.Fatalf("units %d sumMM %v, want %d %v", got.Units.Units, got.Units.SumMM, units, sumMM)
	}
	for i, name := range got.Buckets {
		b := map[string]int{"c1": 0, "c2": 1, "c3": 2}[name]
		if got.Units.SumXX[i] != sumXX[b] || got.Units.SumXM[i] != sumXM[b] {
			t.Errorf("%s: sumXX %v sumXM %v, want %v %v", name, got.Units.SumXX[i], got.Units.SumXM[i], sumXX[b], sumXM[b])
		}
	}
}

func TestFailuresUnattributedAndSlices(t *testing.T) {
	t.Parallel()
	start := time.Now()
	tl := New(start, time.Minute)
	add := func(off time.Duration, code uint16, err string, id attribution.Identity, body string) {
		tl.Add(&attack.Result{Result: &vegeta.Result{Code: code, Error: err, Timestamp: start.Add(off), Body: []byte(body)}, ConnID: 1}, id)
	}
	add(0, 200, "", attribution.Identity{Cluster: "c1", Version: "v1"}, "")
	add(500*time.Millisecond, 200, "", attribution.Identity{}, "who am I")
	add(1500*time.Millisecond, 503, "503 Service Unavailable", attribution.Identity{}, "")
	add(1600*time.Millisecond, 504, "504 Gateway Timeout", attribution.Identity{Cluster: "c2", Pod: "callme-c2-0"}, "Surprise x v1")
	add(1700*time.Millisecond, 504, "504 Gateway Timeout", attribution.Identity{Cluster: "c2"}, "")
	s := tl.Snapshot()
	// Failures are attributed too, apart from the successes' counts.
	if s.Failures["cluster"]["c2"] != 2 || s.Failures["pod"]["c2/callme-c2-0"] != 1 || s.FailuresUnattributed["cluster"] != 1 || s.FailuresUnattributed["pod"] != 2 {
		t.Errorf("failures %v, unattributed %v", s.Failures, s.FailuresUnattributed)
	}
	if c := s.Dimensions["cluster"]; len(c.Buckets) != 1 || c.Buckets[0] != "c1" {
		t.Errorf("failures counted among the successes: %+v", c)
	}
	if s.Total != 5 {
		t.Fatalf("total %d", s.Total)
	}
	if s.Unattributed["cluster"] != 1 || s.Unattributed["pod"] != 2 {
		t.Errorf("unattributed %v: want cluster 1 (failures are not unattributed), pod 2", s.Unattributed)
	}
	if s.Errors["503 Service Unavailable"] != 1 || s.Errors["504 Gateway Timeout"] != 2 {
		t.Errorf("errors %v", s.Errors)
	}
	if len(s.Samples) != 1 || s.Samples[0] != "who am I" {
		t.Errorf("samples %q", s.Samples)
	}
	if len(s.Slices) != 2 || s.Slices[0].Requests != 2 || s.Slices[1].Errors != 3 || s.Slices[0].Clusters["c1"] != 1 || len(s.Slices[1].Clusters) != 0 {
		t.Errorf("slices %+v", s.Slices)
	}
}

func TestTimelineStaysBounded(t *testing.T) {
	t.Parallel()
	start := time.Now()
	tl := New(start, time.Minute)
	for i := 0; i < 3000; i++ {
		tl.Add(&attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start.Add(time.Duration(i) * time.Second)}}, attribution.Identity{Cluster: "c1"})
	}
	s := tl.Snapshot()
	if len(s.Slices) > maxSlices {
		t.Fatalf("%d slices", len(s.Slices))
	}
	var n int64
	for _, sl := range s.Slices {
		n += sl.Requests
	}
	if n != 3000 || s.SliceWidth != 8*time.Second {
		t.Errorf("requests %d width %s", n, s.SliceWidth)
	}
}

func TestClosedConnectionsAreForgotten(t *testing.T) {
	t.Parallel()
	start := time.Now()
	tl := New(start, 0)
	for c := uint64(1); c <= 100; c++ {
		tl.Add(&attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start}, ConnID: c}, attribution.Identity{Cluster: "c1"})
		tl.ConnClosed(c)
	}
	tl.mu.Lock()
	tl.sweep(time.Now().Add(time.Second))
	open := len(tl.conns)
	tl.mu.Unlock()
	if open != 0 {
		t.Errorf("%d closed connections still held", open)
	}
	if u := tl.Snapshot().Dimensions["cluster"].Units.Units; u != 100 {
		t.Errorf("units %d after eviction, want 100", u)
	}
}

// Each pod bucket ("cluster/pod") has its cluster, whether it first
// answered or only failed; a pod never named with a cluster has none.
func TestPodClusters(t *testing.T) {
	t.Parallel()
	start := time.Now()
	tl := New(start, time.Minute)
	add := func(code int, errMsg string, id attribution.Identity) {
		tl.Add(&attack.Result{Result: &vegeta.Result{Code: uint16(code), Error: errMsg, Timestamp: start}}, id)
	}
	add(200, "", attribution.Identity{Cluster: "c1", Pod: "callme-a"})
	add(200, "", attribution.Identity{Cluster: "c1", Pod: "callme-a"})
	add(503, "503 Service Unavailable", attribution.Identity{Cluster: "c2", Pod: "callme-b"})
	add(200, "", attribution.Identity{Cluster: "c2", Pod: "callme-b"})
	add(200, "", attribution.Identity{Pod: "callme-c"})
	got := tl.Snapshot().PodClusters
	want := map[string]string{"c1/callme-a": "c1", "c2/callme-b": "c2"}
	if !maps.Equal(got, want) {
		t.Fatalf("pod clusters %v, want %v", got, want)
	}
}

// A pod name in two clusters (a StatefulSet's web-0 in c1 and c2) is two
// buckets, each with its own count, errors and cluster, in one tally and
// in worker states merged (on main they were one bucket labelled with
// whichever cluster came first).
func TestSamePodNameInTwoClusters(t *testing.T) {
	t.Parallel()
	start := time.Now()
	tally := func(ids ...attribution.Identity) *Tally {
		tl := New(start, time.Minute)
		for i, id := range ids {
			code, errMsg := 200, ""
			if i == 0 || ids[i-1] != id { // each pod's first request fails
				code, errMsg = 503, "503 Service Unavailable"
			}
			tl.Add(&attack.Result{Result: &vegeta.Result{Code: uint16(code), Error: errMsg, Timestamp: start}, ConnID: uint64(i + 1)}, id)
		}
		return tl
	}
	c1 := attribution.Identity{Cluster: "c1", Pod: "web-0"}
	c2 := attribution.Identity{Cluster: "c2", Pod: "web-0"}
	check := func(name string, s Snapshot) {
		t.Helper()
		pods := s.Dimensions["pod"]
		got := map[string]int64{}
		for i, b := range pods.Buckets {
			got[b] = pods.N[i]
		}
		if want := map[string]int64{"c1/web-0": 2, "c2/web-0": 3}; !maps.Equal(got, want) {
			t.Errorf("%s: pod buckets %v, want %v", name, got, want)
		}
		if want := map[string]string{"c1/web-0": "c1", "c2/web-0": "c2"}; !maps.Equal(s.PodClusters, want) {
			t.Errorf("%s: pod clusters %v, want %v", name, s.PodClusters, want)
		}
		if want := map[string]int64{"c1/web-0": 1, "c2/web-0": 1}; !maps.Equal(s.Failures["pod"], want) {
			t.Errorf("%s: pod failures %v, want %v", name, s.Failures["pod"], want)
		}
		for _, b := range pods.Buckets {
			if n := PodName(b, s.PodClusters[b]); n != "web-0" {
				t.Errorf("%s: PodName(%s) = %s", name, b, n)
			}
		}
	}
	check("one tally", tally(c1, c1, c1, c2, c2, c2, c2).Snapshot())
	// Each worker saw one cluster's web-0; merged they are still two.
	check("merged states", Merge(tally(c1, c1, c1).State(), tally(c2, c2, c2, c2).State()).Snapshot())
}

// A rule that captures a per-request value names a new pod with every
// response: the dimension stops at MaxBuckets, the rest is counted as
// Other and said so, and what a request costs does not grow with the
// buckets (BenchmarkAddDistinctPods).
func TestBucketsAreCapped(t *testing.T) {
	t.Parallel()
	start := time.Now()
	tl := New(start, time.Minute)
	const n = 5000
	for i := range n {
		r := &attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start}, ConnID: uint64(1 + i%4)}
		tl.Add(r, attribution.Identity{Cluster: fmt.Sprintf("c-%d", i), Pod: fmt.Sprintf("pod-%d", i)})
	}
	tl.Add(&attack.Result{Result: &vegeta.Result{Code: 503, Timestamp: start, Error: "503"}, ConnID: 1}, attribution.Identity{Pod: "failing-pod-x"})
	s := tl.Snapshot()
	for _, dn := range []string{"cluster", "pod"} {
		d := s.Dimensions[dn]
		if len(d.Buckets) != MaxBuckets+1 || !slices.Contains(d.Buckets, Other) {
			t.Errorf("%s: %d buckets, want %d with %s", dn, len(d.Buckets), MaxBuckets+1, Other)
		}
		var total int64
		for _, v := range d.N {
			total += v
		}
		if total != n || s.Overflow[dn] != n-MaxBuckets {
			t.Errorf("%s: %d counted, %d in %s; want %d and %d", dn, total, s.Overflow[dn], Other, n, n-MaxBuckets)
		}
	}
	if len(s.PodClusters) > MaxBuckets+1 {
		t.Errorf("%d pod clusters kept", len(s.PodClusters))
	}
	for _, sl := range s.Slices {
		if len(sl.Clusters) > MaxBuckets+1 {
			t.Errorf("a slice counts %d clusters", len(sl.Clusters))
		}
	}
}

// BenchmarkAddDistinctPods is the cost of one request when every response
// names a new pod on a few keep-alive connections: it must not grow with
// the buckets already seen (it used to, through every connection's
// per-bucket counts).
func BenchmarkAddDistinctPods(b *testing.B) {
	start := time.Now()
	tl := New(start, time.Minute)
	ids := make([]attribution.Identity, 4096)
	for i := range ids {
		ids[i] = attribution.Identity{Cluster: "c1", Pod: fmt.Sprintf("pod-%d", i)}
	}
	r := &attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start}}
	i := 0
	for b.Loop() {
		r.ConnID = uint64(1 + i%8)
		tl.Add(r, ids[i%len(ids)])
		i++
	}
}

// podKey makes each cluster/pod bucket name once, keeps at most
// maxPodKeys of them, and past the bound still names the bucket right.
func TestPodKeyCacheIsBounded(t *testing.T) {
	tl := New(time.Now(), time.Minute)
	if got := tl.podKey("", "p"); got != "p" || len(tl.podKeys) != 0 {
		t.Fatalf("no cluster: %q, %d kept", got, len(tl.podKeys))
	}
	for i := range maxPodKeys + 10 {
		pod := fmt.Sprintf("callme-%d", i)
		if got, want := tl.podKey("c1", pod), PodKey("c1", pod); got != want {
			t.Fatalf("podKey(c1, %s) = %q, want %q", pod, got, want)
		}
	}
	if len(tl.podKeys) != maxPodKeys {
		t.Fatalf("%d names kept, bound %d", len(tl.podKeys), maxPodKeys)
	}
	allocs := testing.AllocsPerRun(100, func() { tl.podKey("c1", "callme-1") })
	if allocs != 0 {
		t.Errorf("a known pod's bucket name costs %.0f allocations", allocs)
	}
}
