package tally

import (
	"fmt"
	"math/bits"
	"time"
)

// LatencyHistogram is the whole run's latency distribution, kept so that
// distributed workers' latencies merge exactly (docs/architecture.md,
// Distributed workers: merging): 64 buckets per power of two, so a
// quantile read from it is within LatencyRelativeError of the exact order
// statistic for latencies below 2^40 ns (about 18 minutes; longer ones land
// in one open bucket read as Max). Latencies below 128 ns are counted
// exactly. It costs 18 KB whatever the number of requests, and two merge
// by adding their counts.
type LatencyHistogram struct {
	Count int64
	// Total is the sum of the latencies (for the mean), Min and Max the
	// extremes; Min is 0 when Count is 0.
	Total    time.Duration
	Min, Max time.Duration
	counts   [fineBuckets]int64
}

// LatencyRelativeError bounds |Quantile(q) - exact|/exact: half a bucket's
// width over its lower bound, 2^-(fineSub+1).
const LatencyRelativeError = 1.0 / (1 << (fineSub + 1))

const (
	fineSub     = 6 // log2 of the buckets per power of two
	fineMaxExp  = 40
	fineBuckets = 1<<fineSub + (fineMaxExp-fineSub)<<fineSub + 1 // exact below 2^fineSub, log-linear, open last bucket
)

func fineIndex(ns int64) int {
	if ns < 1<<fineSub {
		return int(max(ns, 0))
	}
	e := bits.Len64(uint64(ns)) - 1
	if e >= fineMaxExp {
		return fineBuckets - 1
	}
	sub := int(uint64(ns)>>(e-fineSub)) & (1<<fineSub - 1)
	return 1<<fineSub + (e-fineSub)<<fineSub + sub
}

// fineBounds is the range [lo, hi) of bucket i in ns.
func fineBounds(i int) (lo, hi int64) {
	if i < 1<<fineSub {
		return int64(i), int64(i) + 1
	}
	j := i - 1<<fineSub
	e := j>>fineSub + fineSub
	w := int64(1) << (e - fineSub)
	lo = 1<<e + int64(j&(1<<fineSub-1))*w
	return lo, lo + w
}

// Add counts one latency; negative latencies count as 0.
func (h *LatencyHistogram) Add(d time.Duration) {
	d = max(d, 0)
	h.counts[fineIndex(int64(d))]++
	if h.Count == 0 || d < h.Min {
		h.Min = d
	}
	h.Max = max(h.Max, d)
	h.Count++
	h.Total += d
}

// Merge adds o to h.
func (h *LatencyHistogram) Merge(o *LatencyHistogram) {
	if o.Count == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.Count == 0 || o.Min < h.Min {
		h.Min = o.Min
	}
	h.Max = max(h.Max, o.Max)
	h.Count += o.Count
	h.Total += o.Total
}

// Quantile is the q-quantile (0 < q ≤ 1): the midpoint of the bucket that
// holds the ⌈q·Count⌉-th smallest latency, kept within [Min, Max].
func (h *LatencyHistogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	i := rankBucket(h.counts[:], h.Count, q)
	if i == fineBuckets-1 {
		return h.Max
	}
	lo, hi := fineBounds(i)
	return min(max(time.Duration((lo+hi)/2), h.Min), h.Max)
}

// HistogramState is a histogram as sent between processes: only the
// non-empty buckets, as pairs (index, count) in increasing index order.
// The same form carries a slice's coarse Histogram (Total and Min unused)
// and the whole run's LatencyHistogram.
type HistogramState struct {
	Count int64         `json:"count"`
	Total time.Duration `json:"total,omitempty"`
	Min   time.Duration `json:"min,omitempty"`
	Max   time.Duration `json:"max"`
	Bins  []int64       `json:"bins"`
}

func sparse(counts []int64) []int64 {
	var out []int64
	for i, c := range counts {
		if c != 0 {
			out = append(out, int64(i), c)
		}
	}
	return out
}

func (h *Histogram) state() HistogramState {
	return HistogramState{Count: h.Count, Max: h.Max, Bins: sparse(h.counts[:])}
}

func (h *LatencyHistogram) state() HistogramState {
	return HistogramState{Count: h.Count, Total: h.Total, Min: h.Min, Max: h.Max, Bins: sparse(h.counts[:])}
}

// validate checks what a merge relies on: pairs in increasing index order
// within nBuckets, positive counts adding up to Count.
func (s *HistogramState) validate(nBuckets int) error {
	if len(s.Bins)%2 != 0 {
		return fmt.Errorf("histogram: %d bin numbers, want (index, count) pairs", len(s.Bins))
	}
	if s.Count < 0 || s.Max < 0 || s.Min < 0 || s.Total < 0 || s.Min > s.Max {
		return fmt.Errorf("histogram: count %d, min %v, max %v, total %v out of range", s.Count, s.Min, s.Max, s.Total)
	}
	var sum int64
	last := int64(-1)
	for k := 0; k < len(s.Bins); k += 2 {
		i, c := s.Bins[k], s.Bins[k+1]
		if i <= last || i >= int64(nBuckets) || c <= 0 {
			return fmt.Errorf("histogram: bin %d count %d: want increasing indices below %d and positive counts", i, c, nBuckets)
		}
		last = i
		sum += c
		if sum < 0 {
			return fmt.Errorf("histogram: counts overflow")
		}
	}
	if sum != s.Count {
		return fmt.Errorf("histogram: bins add up to %d, count is %d", sum, s.Count)
	}
	return nil
}

// addTo adds (sign 1) or removes (sign -1) the bins to counts.
func (s *HistogramState) addTo(counts []int64, sign int64) {
	for k := 0; k+1 < len(s.Bins); k += 2 {
		counts[s.Bins[k]] += sign * s.Bins[k+1]
	}
}
