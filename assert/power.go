package assert

import (
	"math"

	"gonum.org/v1/gonum/mathext"
)

// The exact power of the decision rules (docs/statistics.md §5): the
// probability that a verdict comes out PASS (or FAIL) when the truth is a
// given split, from binomial tails over the regions of counts where the
// real per-bucket rule passes (or fails). The regions are found by
// bisection over x on the rule itself, never on a formula standing in
// for it.

// binomCDF is P(X <= k) for X ~ Binomial(n, p), from the regularised
// incomplete Beta function: P(X <= k) = I_{1-p}(n-k, k+1).
func binomCDF(k, n int64, p float64) float64 {
	switch {
	case k < 0:
		return 0
	case k >= n, p <= 0:
		return 1
	case p >= 1:
		return 0
	}
	return mathext.RegIncBeta(float64(n-k), float64(k+1), 1-p)
}

// binomBetween is P(a <= X <= b).
func binomBetween(a, b, n int64, p float64) float64 {
	if a > b {
		return 0
	}
	return math.Max(0, binomCDF(b, n, p)-binomCDF(a-1, n, p))
}

// firstTrue is the smallest x in [lo, hi] with f(x), for f false then
// true over the range; hi+1 when f is false throughout. It gallops out
// from guess, so a good guess costs a few evaluations of f, not log2 of
// the range.
func firstTrue(lo, hi, guess int64, f func(int64) bool) int64 {
	if lo > hi {
		return hi + 1
	}
	guess = min(max(guess, lo), hi)
	// Invariant: f is false below a and true at b (b = hi+1 is "true").
	a, b := lo, hi+1
	if f(guess) {
		b = guess
		for step := int64(1); ; step *= 2 {
			x := b - step
			if x < lo {
				break
			}
			if !f(x) {
				a = x + 1
				break
			}
			b = x
		}
	} else {
		a = guess + 1
		for step := int64(1); ; step *= 2 {
			x := a - 1 + step
			if x > hi {
				break
			}
			if f(x) {
				b = x
				break
			}
			a = x + 1
		}
	}
	for a < b {
		m := a + (b-a)/2
		if f(m) {
			b = m
		} else {
			a = m + 1
		}
	}
	return b
}

// guessX is where a one-sided bound at α of x out of n crosses the share
// q, by the normal approximation: a starting point for firstTrue.
func guessX(n int64, q, alpha float64, above bool) int64 {
	nf := float64(n)
	q = clamp01(q)
	sd := math.Sqrt(nf * q * (1 - q))
	z := zQuantile(1 - alpha)
	if above {
		return int64(nf*q + z*sd)
	}
	return int64(nf*q - z*sd)
}

// passRegion is the range [a, b] of counts out of n draws with which the
// bucket passes; a > b when none does. The lower test holds from some x
// on and the upper one up to some x, since Clopper–Pearson bounds grow
// with x.
func (r BucketRule) passRegion(n int64) (a, b int64) {
	nf := float64(n)
	lo, hi := r.band()
	a = 0
	if lo >= 0 {
		a = firstTrue(0, n, guessX(n, lo, r.Alpha, true), func(x int64) bool { return r.passesLow(float64(x), nf) })
	}
	b = n
	if hi <= 1 {
		b = firstTrue(0, n, guessX(n, hi, r.Alpha, false), func(x int64) bool { return !r.passesHigh(float64(x), nf) }) - 1
	}
	return a, b
}

// failRegion is where the bucket fails with n draws: x <= below, or
// x >= above (below = -1 and above = n+1 when that side cannot fail).
func (r BucketRule) failRegion(n int64) (below, above int64) {
	nf := float64(n)
	a := 1 - r.FailLevel()
	lo, hi := r.band()
	below, above = -1, n+1
	if lo > 0 {
		below = firstTrue(0, n, guessX(n, lo, a/2, false), func(x int64) bool {
			return !(BinomialInterval(r.Method, float64(x), nf, a).Hi < lo)
		}) - 1
	}
	if hi < 1 {
		above = firstTrue(0, n, guessX(n, hi, a/2, true), func(x int64) bool {
			return BinomialInterval(r.Method, float64(x), nf, a).Lo > hi
		})
	}
	return below, above
}

// splitPassProbability is P(every bucket passes) with n draws when the
// true shares are truth: exact for one or two buckets (whose counts
// determine each other), for three or more the Bonferroni bound
// 1 - Σ_i P(bucket i does not pass), never above the true probability.
func splitPassProbability(rules []BucketRule, truth []float64, n int64) float64 {
	switch len(rules) {
	case 1:
		a, b := rules[0].passRegion(n)
		return binomBetween(a, b, n, truth[0])
	case 2:
		a1, b1 := rules[0].passRegion(n)
		a2, b2 := rules[1].passRegion(n)
		return binomBetween(max(a1, n-b2), min(b1, n-a2), n, truth[0])
	}
	miss := 0.0
	for i, r := range rules {
		a, b := r.passRegion(n)
		miss += 1 - binomBetween(a, b, n, truth[i])
	}
	return math.Max(0, 1-miss)
}

// splitFailProbability is a lower bound on P(the split fails) with n
// draws: the largest single bucket's probability of failing.
func splitFailProbability(rules []BucketRule, truth []float64, n int64) float64 {
	best := 0.0
	for i, r := range rules {
		below, above := r.failRegion(n)
		p := binomCDF(below, n, truth[i]) + (1 - binomCDF(above-1, n, truth[i]))
		best = math.Max(best, p)
	}
	return best
}

// planChecks is how many n of the tenth after a planned n are checked:
// every one up to plans of 10,000 draws. Advice on an INCONCLUSIVE
// verdict, an estimate from observed shares, checks adviceChecks.
const (
	planChecks   = 1000
	adviceChecks = 20
)

// maxDraws bounds the planner's searches: beyond ~10^9 draws a plan is
// meaningless.
const maxDraws = int64(1) << 30

// adviceLimit bounds the search for what would settle an INCONCLUSIVE
// verdict: a thousand times the draws so far, at least a million. Beyond
// it the advice is that the observed share sits on (or next to) the edge.
func adviceLimit(draws float64) int64 {
	return int64(math.Min(math.Max(1000*draws, 1e6), float64(maxDraws)))
}

// steadyN is the smallest n >= from with ok(n), preferring one from which
// ok stays true over the next tenth: power over n is saw-toothed (counts
// are whole), so the first n that reaches the target may dip below it
// again. The tenth is checked at every n up to checks of them, in steps
// beyond. 0 when no n up to limit will do.
func steadyN(from, limit, checks int64, ok func(int64) bool) int64 {
	from = max(from, 1)
	lo, hi := from-1, from
	for !ok(hi) {
		if hi >= limit {
			return 0
		}
		lo, hi = hi, min(2*hi, limit)
	}
	// ok(lo) is false (or lo is below from); bisect to a crossing.
	for hi-lo > 1 {
		m := lo + (hi-lo)/2
		if ok(m) {
			hi = m
		} else {
			lo = m
		}
	}
	n := hi
	for range 100 {
		end := n + max(n/10, 1)
		step := max((end-n)/checks, 1)
		dip := int64(-1)
		for m := n + 1; m <= end; m += step {
			if !ok(m) {
				dip = m
				break
			}
		}
		if dip < 0 {
			return n
		}
		// Past the dip, gallop to the next n that reaches the target;
		// overshooting only errs on the safe side.
		n = dip + 1
		for s := int64(1); !ok(n); s *= 2 {
			if n >= limit {
				return 0
			}
			n = min(n+s, limit)
		}
	}
	return n
}
