package assert

import (
	"maps"
	"math"
	"slices"
)

// RequiredN is the number of requests at which Split, with the true split
// equal to the expected one, passes with the given power. DESIGN.md §4:
//
//	n ≥ (z_{1-α/k} + z_{1-β/2})² · p(1-p) / δ²,  max over buckets, × design effect
//
// z_{1-α/k} because each bucket's interval is at level 1-2α/k; z_{1-β/2}
// because with the truth in the middle of the band both one-sided tests
// must succeed. That formula gives the power for the hardest bucket alone,
// which is the whole story for two buckets (their shares mirror each other)
// but not for three or more: every bucket must pass at once and the
// simulation in sim_test.go measured 75% instead of 80% for 50/30/20. So
// for k ≥ 3 n grows until the buckets' miss probabilities,
// 2Φ̄(δ_i√n/σ_i - z_{1-α/k}) each, add up to at most β (Bonferroni on the
// misses).
//
// A bucket expected at 0 or 1 has no sampling variance under the truth,
// but its interval still needs n large enough for the end at an observed 0
// (or n) to clear δ: z²(1-δ)/δ for Wilson, ln(α/k)/ln(1-δ) for
// Clopper–Pearson; the larger is used so the plan holds for both methods.
// Zero margin, confidence or power mean the defaults; a design effect
// below 1 counts as 1. Invalid input returns 0.
func RequiredN(expected map[string]float64, margin float64, relative bool, confidence, power, designEffect float64) int64 {
	s := SplitSpec{Expected: expected, Margin: margin, Relative: relative, Confidence: confidence, Power: power}.withDefaults()
	if s.Validate() != nil || math.IsNaN(designEffect) {
		return 0
	}
	names := slices.Sorted(maps.Keys(expected))
	k := float64(len(names))
	alpha, beta := 1-s.Confidence, 1-s.Power
	za := zQuantile(1 - alpha/k)
	zb := zQuantile(1 - beta/2)
	type bucket struct{ sd, d float64 }
	var varying []bucket
	n := 0.0
	for i, d := range margins(s, names) {
		n = math.Max(n, math.Max(za*za*(1-d)/d, math.Log(alpha/k)/math.Log1p(-d)))
		if p := expected[names[i]]; p > 0 && p < 1 {
			b := bucket{math.Sqrt(p * (1 - p)), d}
			varying = append(varying, b)
			n = math.Max(n, (za+zb)*(za+zb)*b.sd*b.sd/(d*d))
		}
	}
	if len(varying) > 2 {
		miss := func(n float64) float64 {
			m := 0.0
			for _, b := range varying {
				m += 2 * normalSurvival(b.d*math.Sqrt(n)/b.sd-za)
			}
			return m
		}
		lo, hi := n, n
		for miss(hi) > beta && hi < 1e15 {
			lo, hi = hi, 2*hi
		}
		for hi-lo > 0.01 {
			if mid := (lo + hi) / 2; miss(mid) > beta {
				lo = mid
			} else {
				hi = mid
			}
		}
		n = hi
	}
	return ceilN(n * math.Max(designEffect, 1))
}

// SequentialPlan says when to look at the data during a run and at which
// confidence to judge at each look ("stop: early").
type SequentialPlan struct {
	Looks      []int64   `json:"looks"`      // cumulative request counts of the interim looks, last = planned total
	Confidence []float64 `json:"confidence"` // the confidence to use at each look (error spending)
	Rule       string    `json:"rule"`
}

// SequentialRule names the error-spending rule of PlanSequential.
const SequentialRule = "Lan-DeMets O'Brien-Fleming spending, Bonferroni over looks"

// PlanSequential spreads α over equally spaced looks with the Lan–DeMets
// O'Brien–Fleming-type spending function α(t) = 2 - 2Φ(z_{1-α/2}/√t)
// (Lan and DeMets 1983): look j may spend α(t_j) - α(t_{j-1}), and those
// increments sum to α(1) = α. Each look judges with Split at confidence
// 1 - (its increment); since Split's false-FAIL and false-PASS rates are
// each at most the α it is given, the union bound over looks keeps the
// overall false-FAIL and false-PASS rates at most α, whatever the
// correlation between looks, without the recursive integration of exact
// group-sequential boundaries. Early looks get a tiny α, so the run stops
// early only on overwhelming evidence and the last look keeps almost the
// whole α (RequiredN at the last look's confidence gives its total).
//
// looks < 1 counts as 1 and looks above totalN as totalN; confidence 0
// means DefaultConfidence.
func PlanSequential(totalN int64, looks int, confidence float64) SequentialPlan {
	if confidence == 0 {
		confidence = DefaultConfidence
	}
	confidence = math.Min(math.Max(confidence, 0), 1)
	totalN = max(totalN, 0)
	looks = max(looks, 1)
	if int64(looks) > totalN {
		looks = int(max(totalN, 1))
	}
	alpha := 1 - confidence
	zc := zQuantile(1 - alpha/2)
	p := SequentialPlan{Looks: make([]int64, looks), Confidence: make([]float64, looks), Rule: SequentialRule}
	spent := 0.0
	for j := 1; j <= looks; j++ {
		t := float64(j) / float64(looks)
		at := alpha
		if j < looks {
			at = 2 * normalSurvival(zc/math.Sqrt(t))
		}
		p.Looks[j-1] = ceilN(float64(totalN) * t)
		p.Confidence[j-1] = 1 - (at - spent)
		spent = at
	}
	return p
}

// normalSurvival is the upper tail of the standard normal; Erfc keeps
// the precision of the tiny tails that early looks spend.
func normalSurvival(z float64) float64 { return 0.5 * math.Erfc(z/math.Sqrt2) }
