package tally

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The histogram's quantiles are checked against the exact order statistic
// of the same sample (sorted), not against its own bucket arithmetic.
func TestHistogramQuantileWithinBucketError(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		draw func() time.Duration
	}{
		{"lognormal ms", func() time.Duration { return time.Duration(float64(time.Millisecond) * (0.2 + rng.ExpFloat64()*3)) }},
		{"sub-µs and seconds", func() time.Duration {
			if rng.IntN(2) == 0 {
				return time.Duration(rng.IntN(1000))
			}
			return time.Duration(rng.Float64() * float64(5*time.Second))
		}},
		{"constant", func() time.Duration { return 3 * time.Millisecond }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Histogram
			var all []time.Duration
			for range 20000 {
				d := tc.draw()
				h.Add(d)
				all = append(all, d)
			}
			slices.Sort(all)
			for _, q := range []float64{0.5, 0.9, 0.99, 1} {
				exact := all[int(q*float64(len(all))+0.999999999)-1]
				got := h.Quantile(q)
				if exact < 1024 {
					if got >= 1024 {
						t.Errorf("q%.2f = %v, exact %v: both should be in the lowest bucket", q, got, exact)
					}
					continue
				}
				if r := float64(got) / float64(exact); r < 0.875 || r > 1.125 {
					t.Errorf("q%.2f = %v, exact %v: off by %.1f%%, beyond the 12.5%% a bucket allows", q, got, exact, 100*(r-1))
				}
			}
			if h.Max != all[len(all)-1] || h.Count != int64(len(all)) {
				t.Errorf("max %v count %d, want %v %d", h.Max, h.Count, all[len(all)-1], len(all))
			}
		})
	}
}

func TestHistogramMergeEqualsOneHistogram(t *testing.T) {
	t.Parallel()
	var a, b, both Histogram
	for i := range 5000 {
		d := time.Duration(i*i) * time.Microsecond / 7
		both.Add(d)
		if i%3 == 0 {
			a.Add(d)
		} else {
			b.Add(d)
		}
	}
	a.Merge(&b)
	if a != both {
		t.Fatalf("merged histogram differs from the histogram of all values")
	}
}

func TestHistogramHugeLatencyIsInTheLastBucket(t *testing.T) {
	t.Parallel()
	var h Histogram
	h.Add(2 * time.Hour)
	h.Add(-time.Second)
	if got := h.Quantile(1); got != 2*time.Hour {
		t.Fatalf("q1 = %v, want the max 2h", got)
	}
	if got := h.Quantile(0.5); got >= 1024 {
		t.Fatalf("a negative latency counts as 0, q0.5 = %v", got)
	}
}
