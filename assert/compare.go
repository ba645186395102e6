package assert

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// Comparing the shares of two runs, bucket by bucket (docs/statistics.md
// §9): the difference of each share with its confidence interval, and a
// two-proportion test whose variance is connection-aware in the same way
// as the effective n of the verdicts (§3), corrected with Holm's method
// over the buckets of a dimension.

// ChangeStatus is what the comparison of one bucket concluded.
type ChangeStatus string

// Change statuses.
const (
	// ChangeIncrease and ChangeDecrease are significant changes of the
	// share from run A to run B, after Holm's correction.
	ChangeIncrease ChangeStatus = "increase"
	ChangeDecrease ChangeStatus = "decrease"
	// ChangeNotSignificant: tested, and the data do not show a change.
	ChangeNotSignificant ChangeStatus = "not-significant"
	// ChangeNone: both runs have the same share and nothing varied (every
	// connection split exactly that way, or the bucket had every request
	// in both runs), so there is nothing to test and no change.
	ChangeNone ChangeStatus = "no-change"
	// ChangeUntestable: a run's variance cannot be estimated (no requests,
	// or all of them on one connection).
	ChangeUntestable ChangeStatus = "untestable"
)

// Significant reports a significant increase or decrease.
func (s ChangeStatus) Significant() bool { return s == ChangeIncrease || s == ChangeDecrease }

// VarianceMethod is how the sampling variance of one run's shares was
// estimated.
type VarianceMethod string

// Variance methods.
const (
	// VarianceClustered is the cluster-robust variance of the ratio
	// estimator over the run's connections, from its UnitStats.
	VarianceClustered VarianceMethod = "cluster-robust"
	// VarianceIndependent: no connection carried more than one request, so
	// the requests are independent draws and the variance is binomial,
	// whatever the balancing (what the verdicts use then too, n* = n).
	VarianceIndependent VarianceMethod = "independent"
	// VarianceBinomial: the run has no per-connection statistics; each
	// request is taken as an independent draw, which understates the
	// variance if connections were reused under per-connection balancing.
	VarianceBinomial VarianceMethod = "binomial"
	// VarianceNone: nothing to estimate it from (no requests, or every
	// request on one connection).
	VarianceNone VarianceMethod = "none"
)

// RunSample says what one run's counts were worth in a comparison.
type RunSample struct {
	N           int64          `json:"n"`
	Connections int64          `json:"connections,omitempty"`
	Variance    VarianceMethod `json:"variance"`
}

// Describe says, in words, how the run's variance was estimated.
func (r RunSample) Describe() string {
	switch r.Variance {
	case VarianceClustered:
		return fmt.Sprintf("%d requests on %d connections, cluster-robust variance over the connections", r.N, r.Connections)
	case VarianceIndependent:
		return fmt.Sprintf("%d requests, each on its own connection: independent draws, binomial variance", r.N)
	case VarianceBinomial:
		return fmt.Sprintf("%d requests without per-connection counts: binomial variance, each request taken as an independent draw (too small if connections were reused under per-connection balancing)", r.N)
	}
	if r.N == 0 {
		return "no requests: nothing to compare"
	}
	return fmt.Sprintf("%d requests on one connection: its variance cannot be estimated", r.N)
}

// ShareChange is one bucket's share in two runs and the test of its change.
type ShareChange struct {
	Bucket string  `json:"bucket"`
	CountA int64   `json:"countA"`
	CountB int64   `json:"countB"`
	ShareA float64 `json:"shareA"`
	ShareB float64 `json:"shareB"`
	// Diff is ShareB - ShareA.
	Diff float64 `json:"diff"`
	// SE is the standard error of Diff, each run's variance at its own
	// share (unpooled), and CI the Wald interval Diff ± z·SE at the
	// comparison's level, clamped to [-1, 1], not adjusted for the
	// number of buckets; nil when untestable.
	SE float64   `json:"se"`
	CI *Interval `json:"ci,omitempty"`
	// Z is the test statistic: Diff over the standard error under the
	// hypothesis of no change, each run's variance at the common share of
	// both runs (a score test, docs/statistics.md §9.2). PValue is its
	// two-sided p-value and AdjustedP the p-value after Holm's correction
	// over the dimension's buckets. Both are 1 when nothing was tested.
	Z         float64      `json:"z"`
	PValue    float64      `json:"p"`
	AdjustedP float64      `json:"adjustedP"`
	Status    ChangeStatus `json:"status"`
}

// Comparison compares the split of one dimension in two runs.
type Comparison struct {
	// Level is the confidence level: the CIs' coverage and 1 - the
	// family-wise error rate of the dimension's tests.
	Level float64   `json:"level"`
	A     RunSample `json:"a"`
	B     RunSample `json:"b"`
	// Buckets are those of run A in its order, then those only in B.
	Buckets []ShareChange `json:"buckets"`
	// Hypotheses is the number of tests Holm's method corrected for: the
	// tested buckets, or 1 for two buckets, whose shares are complements
	// and whose two tests are one.
	Hypotheses int `json:"hypotheses"`
	// Significant is set when any bucket changed significantly.
	Significant bool `json:"significant"`
}

// Tested reports whether any bucket could be judged: tested, or the same
// in both runs with nothing varying.
func (c Comparison) Tested() bool {
	for _, b := range c.Buckets {
		if b.Status != ChangeUntestable {
			return true
		}
	}
	return false
}

// runVariance is the variance of one run's bucket shares as a function of
// the share p it is evaluated at (docs/statistics.md §9.1).
type runVariance struct {
	RunSample
	n   float64
	u   *UnitStats
	idx map[string]int
}

func newRunVariance(c Counts) runVariance {
	r := runVariance{RunSample: RunSample{N: c.Total()}, n: float64(c.Total()), idx: map[string]int{}}
	for i, b := range c.Buckets {
		r.idx[b] = i
	}
	u := c.Units
	switch {
	case r.N == 0:
		r.Variance = VarianceNone
	case u == nil || len(u.SumXX) != len(c.N) || len(u.SumXM) != len(c.N) || !(u.SumMM > 0):
		r.Variance = VarianceBinomial
	// Σ m_j² = Σ m_j = n exactly when every m_j is 1 (whole numbers).
	case u.SumMM <= r.n+0.5:
		r.Variance, r.Connections = VarianceIndependent, u.Units
	case u.Units < 2:
		r.Variance, r.Connections = VarianceNone, u.Units
	default:
		r.Variance, r.Connections, r.u = VarianceClustered, u.Units, u
	}
	return r
}

// at is the variance of the share of bucket b evaluated at share p:
// p(1-p)/n for independent draws, else the cluster-robust
// C/(C-1) · Σ_j (x_bj - p m_j)² / n², with
// Σ_j (x_bj - p m_j)² = SumXX - 2p SumXM + p² SumMM (0 for a bucket the
// run never saw: x_bj = 0 leaves p² SumMM).
func (r runVariance) at(b string, p float64) float64 {
	if r.u == nil {
		return p * (1 - p) / r.n
	}
	var xx, xm float64
	if i, ok := r.idx[b]; ok {
		xx, xm = r.u.SumXX[i], r.u.SumXM[i]
	}
	ss := xx - 2*p*xm + p*p*r.u.SumMM
	// Round-off of the three sums, which are of the order of SumMM.
	if ss <= 1e-12*r.u.SumMM {
		return 0
	}
	c := float64(r.u.Units)
	return c / (c - 1) * ss / (r.n * r.n)
}

// CompareShares compares the split of one dimension in run a with run b
// (docs/statistics.md §9). level is the confidence level (default 0.95
// outside (0,1)). Every bucket of either run is compared; a bucket one run
// never saw has share 0 there. Counts whose buckets and counts disagree
// are an error.
func CompareShares(a, b Counts, level float64) (Comparison, error) {
	for _, c := range []struct {
		name string
		c    Counts
	}{{"run A", a}, {"run B", b}} {
		if err := c.c.Validate(); err != nil {
			return Comparison{}, fmt.Errorf("%s: %w", c.name, err)
		}
	}
	if !(level > 0 && level < 1) {
		level = DefaultConfidence
	}
	va, vb := newRunVariance(a), newRunVariance(b)
	out := Comparison{Level: level, A: va.RunSample, B: vb.RunSample}
	names := slices.Clone(a.Buckets)
	for _, n := range b.Buckets {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	z := zQuantile(1 - (1-level)/2)
	var tested []int
	for _, name := range names {
		s := ShareChange{Bucket: name, CountA: a.Count(name), CountB: b.Count(name), PValue: 1, AdjustedP: 1,
			Status: ChangeUntestable}
		if va.N > 0 {
			s.ShareA = float64(s.CountA) / va.n
		}
		if vb.N > 0 {
			s.ShareB = float64(s.CountB) / vb.n
		}
		s.Diff = s.ShareB - s.ShareA
		if va.Variance == VarianceNone || vb.Variance == VarianceNone {
			out.Buckets = append(out.Buckets, s)
			continue
		}
		s.SE = math.Sqrt(va.at(name, s.ShareA) + vb.at(name, s.ShareB))
		s.CI = &Interval{Lo: math.Max(s.Diff-z*s.SE, -1), Hi: math.Min(s.Diff+z*s.SE, 1)}
		common := float64(s.CountA+s.CountB) / (va.n + vb.n)
		v0 := va.at(name, common) + vb.at(name, common)
		if v0 > 0 {
			s.Z = s.Diff / math.Sqrt(v0)
			s.PValue = math.Erfc(math.Abs(s.Z) / math.Sqrt2)
			s.AdjustedP = s.PValue
			s.Status = ChangeNotSignificant
			tested = append(tested, len(out.Buckets))
		} else {
			// A zero variance at the common share means each run's share
			// is that share (every residual vanishes): no change.
			s.Status = ChangeNone
		}
		out.Buckets = append(out.Buckets, s)
	}
	out.Hypotheses = len(tested)
	if len(names) == 2 && len(tested) == 2 {
		// Two buckets: the shares are complements in both runs, the
		// differences opposite and the variances equal, so the two tests
		// are one hypothesis and one statistic.
		out.Hypotheses = 1
	} else {
		p := make([]float64, len(tested))
		for k, i := range tested {
			p[k] = out.Buckets[i].PValue
		}
		for k, adj := range holm(p) {
			out.Buckets[tested[k]].AdjustedP = adj
		}
	}
	for _, i := range tested {
		s := &out.Buckets[i]
		if s.AdjustedP <= 1-level {
			s.Status = ChangeIncrease
			if s.Diff < 0 {
				s.Status = ChangeDecrease
			}
			out.Significant = true
		}
	}
	return out, nil
}

// holm returns Holm's (1979) adjusted p-values, in the order given: with
// p_(1) <= … <= p_(m) sorted, p̃_(j) = max over i <= j of min(1, (m-i+1)·p_(i)).
// Rejecting where p̃ <= α keeps the family-wise error rate at α under any
// dependence between the tests.
func holm(p []float64) []float64 {
	m := len(p)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return p[order[i]] < p[order[j]] })
	adj := make([]float64, m)
	running := 0.0
	for rank, i := range order {
		running = math.Max(running, math.Min(1, float64(m-rank)*p[i]))
		adj[i] = running
	}
	return adj
}
