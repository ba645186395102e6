package tally

import (
	"math/bits"
	"time"
)

// Histogram is a fixed-size log-linear latency histogram: four buckets per
// power of two from 1.024µs, so a quantile read from it is within ±12.5%
// of the true value, up to about 18 minutes (longer latencies land in the
// last bucket). It costs 1 KB, whatever the number of requests, and two
// merge by adding their counts — what a per-window, per-cluster latency
// series needs; the run's overall percentiles come from vegeta's exact
// metrics.
type Histogram struct {
	Count  int64
	Max    time.Duration
	counts [histBuckets]int64
}

const (
	histSub     = 2 // log2 of the buckets per power of two
	histMinExp  = 10
	histMaxExp  = 40
	histBuckets = (histMaxExp-histMinExp)<<histSub + 2 // below 2^min, the log-linear range, at or above 2^max
)

// histIndex is the bucket of a latency: bucket 0 holds everything below
// 2^histMinExp ns.
func histIndex(ns int64) int {
	if ns < 1<<histMinExp {
		return 0
	}
	e := bits.Len64(uint64(ns)) - 1
	if e >= histMaxExp {
		return histBuckets - 1
	}
	sub := int(uint64(ns)>>(e-histSub)) & (1<<histSub - 1)
	return (e-histMinExp)<<histSub + sub + 1
}

// histUpper is the exclusive upper bound of bucket i in ns.
func histUpper(i int) int64 {
	if i == 0 {
		return 1 << histMinExp
	}
	i--
	e := i>>histSub + histMinExp
	sub := int64(i&(1<<histSub-1)) + 1
	return 1<<e + sub<<(e-histSub)
}

// Add counts one latency.
func (h *Histogram) Add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[histIndex(int64(d))]++
	h.Count++
	if d > h.Max {
		h.Max = d
	}
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.Count += o.Count
	h.Max = max(h.Max, o.Max)
}

// Quantile is the q-quantile (0 < q ≤ 1): the midpoint of the bucket that
// holds the ⌈q·Count⌉-th smallest latency, never above Max.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	i := rankBucket(h.counts[:], h.Count, q)
	if i == histBuckets-1 {
		return h.Max // the open-ended bucket has no midpoint
	}
	lo := int64(0)
	if i > 0 {
		lo = histUpper(i - 1)
	}
	return min(time.Duration((lo+histUpper(i))/2), h.Max)
}

// rankBucket is the bucket holding the ⌈q·count⌉-th smallest value
// (count > 0), the last one if the counts fall short.
func rankBucket(counts []int64, count int64, q float64) int {
	rank := int64(q*float64(count) + 0.999999999)
	rank = min(max(rank, 1), count)
	var seen int64
	for i, c := range counts {
		seen += c
		if seen >= rank {
			return i
		}
	}
	return len(counts) - 1
}
