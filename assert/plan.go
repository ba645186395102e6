package assert

import (
	"maps"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// RequiredDraws is the planner (docs/statistics.md §5): the smallest number
// of effective draws at which Split, with the true split equal to the
// expected one, passes with probability at least s.Power, and keeps doing
// so over the next tenth (power is saw-toothed in n). The probability is
// exact for two buckets and a lower bound (Bonferroni over the buckets'
// misses) for three or more, computed from the same BucketRule that Split
// applies. Under per-request balancing the draws are requests; under
// per-connection balancing they are connections. Invalid input returns 0.
func RequiredDraws(s SplitSpec) int64 {
	s = s.withDefaults()
	if s.Validate() != nil {
		return 0
	}
	names := slices.Sorted(maps.Keys(s.Expected))
	rules := bucketRules(s, names)
	truth := make([]float64, len(names))
	for i, b := range names {
		truth[i] = s.Expected[b]
	}
	return steadyN(1, maxDraws, planChecks, func(n int64) bool { return splitPassProbability(rules, truth, n) >= s.Power })
}

// SplitPassProbability is the probability that Split passes with n
// effective draws when the true shares are truth (a bucket left out has
// share 0): exact for up to two buckets, a lower bound for more.
func SplitPassProbability(s SplitSpec, truth map[string]float64, n int64) float64 {
	s = s.withDefaults()
	if s.Validate() != nil || n < 1 {
		return 0
	}
	names := slices.Sorted(maps.Keys(s.Expected))
	for _, b := range slices.Sorted(maps.Keys(truth)) {
		if !slices.Contains(names, b) {
			names = append(names, b)
		}
	}
	t := make([]float64, len(names))
	for i, b := range names {
		t[i] = truth[b]
	}
	return splitPassProbability(bucketRules(s, names), t, n)
}

// CleanDraws is the number of effective draws at which a clean run (no
// request outside, to, or failed) passes a bound on a share: successRate
// (bound 1-atLeast), only and never (their margin). Bound 0 is zero
// tolerance, which needs the clean run to show the share below evidence
// (statistics.margin; 0 means DefaultMargin). 1-α^{1/n} <= bound gives
// n >= ln α / ln(1-bound).
func CleanDraws(bound, confidence, evidence float64) int64 {
	s := ShareSpec{Confidence: confidence, Evidence: evidence}.withDefaults()
	if s.validate() != nil || !(bound >= 0 && bound <= 1) {
		return 0
	}
	return shareRule{bound: bound, alpha: 1 - s.Confidence, evidence: s.Evidence}.cleanDraws()
}

// ReachedDraws is the number of effective draws at which every bucket, with
// the given shares, is seen at least once with probability at least power:
// 1 - Σ_i (1-s_i)^n >= power (Bonferroni, so never optimistic).
func ReachedDraws(shares []float64, power float64) int64 {
	if power == 0 {
		power = DefaultPower
	}
	if len(shares) == 0 || !(power > 0 && power < 1) {
		return 0
	}
	for _, s := range shares {
		if !(s > 0 && s <= 1) {
			return 0
		}
	}
	return steadyN(1, maxDraws, planChecks, func(n int64) bool {
		miss := 0.0
		for _, s := range shares {
			miss += math.Pow(1-s, float64(n))
		}
		return 1-miss >= power
	})
}

// ReachedFailDraws is the number of effective draws after which reached
// calls an unseen bucket missing: the one-sided upper bound at 1-α/k of
// its share, from 0 of n, falls below minShare.
func ReachedFailDraws(k int, minShare, confidence float64) int64 {
	if confidence == 0 {
		confidence = DefaultConfidence
	}
	if k < 1 || !(minShare > 0 && minShare <= 1) || !(confidence > 0 && confidence < 1) {
		return 0
	}
	a := (1 - confidence) / float64(k)
	return steadyN(1, maxDraws, planChecks, func(n int64) bool { return cpUpper(0, float64(n), a) < minShare })
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

// PlanSequential spreads α over equally spaced looks (docs/statistics.md
// §6) with the Lan–DeMets O'Brien–Fleming-type spending function
// α(t) = 2 - 2Φ(z_{1-α/2}/√t) (Lan and DeMets 1983): look j may spend
// α(t_j) - α(t_{j-1}), and those increments sum to α(1) = α. Each look
// judges every expectation at confidence 1 - (its increment), the last
// look included; since each verdict's false-FAIL and false-PASS rates are
// at most the α it is given, the union bound over looks keeps the overall
// rates at most α, whatever the correlation between looks. Early looks
// get a tiny α, so a run stops early only on overwhelming evidence.
//
// looks < 1 counts as 1 and looks above totalN as totalN; confidence 0
// means DefaultConfidence.
func PlanSequential(totalN int64, looks int, confidence float64) SequentialPlan {
	totalN = max(totalN, 0)
	looks = max(looks, 1)
	if int64(looks) > totalN {
		looks = int(max(totalN, 1))
	}
	p := SequentialPlan{Looks: make([]int64, looks), Confidence: SpendingLevels(looks, confidence), Rule: SequentialRule}
	for j := 1; j <= looks; j++ {
		p.Looks[j-1] = ceilN(float64(totalN) * float64(j) / float64(looks))
	}
	return p
}

// SpendingLevels is the confidence of each of looks equally spaced looks
// under PlanSequential's spending: it depends only on the number of looks
// and α, so each expectation gets the levels of its own confidence.
func SpendingLevels(looks int, confidence float64) []float64 {
	if confidence == 0 {
		confidence = DefaultConfidence
	}
	confidence = math.Min(math.Max(confidence, 0), 1)
	looks = max(looks, 1)
	alpha := 1 - confidence
	zc := zQuantile(1 - alpha/2)
	levels := make([]float64, looks)
	spent := 0.0
	for j := 1; j <= looks; j++ {
		at := alpha
		if j < looks {
			at = 2 * normalSurvival(zc/math.Sqrt(float64(j)/float64(looks)))
		}
		levels[j-1] = 1 - (at - spent)
		spent = at
	}
	return levels
}

// normalSurvival is the upper tail of the standard normal; Erfc keeps
// the precision of the tiny tails that early looks spend.
func normalSurvival(z float64) float64 { return 0.5 * math.Erfc(z/math.Sqrt2) }

// Plan is what an expectation needs under the effective-n rule of
// docs/statistics.md §3.3, in the units an attack controls.
type Plan struct {
	// Draws is the independent draws the rule needs (RequiredDraws,
	// CleanDraws or ReachedDraws at the power the plan gives the test).
	Draws int64 `json:"draws"`
	// Requests is the requests to send; 0 when connections, not requests,
	// limit the evidence (see Connections).
	Requests int64 `json:"requests,omitempty"`
	// Connections is the keep-alive connections the attack must hold: the
	// draws under declared per-connection balancing, MinEstimateConnections
	// when the attack holds fewer; 0 when the attack's connections do not
	// limit the evidence.
	Connections int64 `json:"connections,omitempty"`
	// Allowance is the factor Requests exceeds Draws by: the upper quantile
	// of the design effect's estimate under independent routing over the
	// attack's connections. 1 when no connection is reused.
	Allowance float64 `json:"allowance"`
}

// PlanDraws turns the draws a rule needs into what an attack must send
// (docs/statistics.md §5). draws(power) is the draws at which the test
// passes with that power; tests is the number of design-effect estimates
// the verdict takes the largest of (k for a split of k > 2 buckets, 1 for
// two).
//
//   - Declared per-connection balancing over fixed keep-alive connections:
//     each connection is one draw, so draws(power) connections.
//   - No keep-alive (s.FixedConnections 0): every request is its own
//     connection and an independent draw, draws(power) requests.
//   - Keep-alive under per-request balancing: the effective n is n over the
//     estimated design effect, which under independent routing over C
//     equal connections is about χ²_{C-1}/(C-1) for each bucket. The plan splits
//     1-power in two: the test gets power' = 1-(1-power)/2, and the
//     requests are draws(power')·q, with q the 1-(1-power)/(2·tests)
//     quantile of χ²_{C-1}/(C-1); by the union bound a correct mesh then
//     passes with probability at least power. When the draws do not
//     depend on the power (a clean run passes from a fixed n), q is the
//     1-(1-power)/tests quantile. With fewer than
//     MinEstimateConnections connections the data cannot show
//     independence: MinEstimateConnections connections, and the requests at
//     that many.
func PlanDraws(s Sampling, power float64, tests int, draws func(power float64) int64) Plan {
	if power == 0 {
		power = DefaultPower
	}
	conns := s.FixedConnections
	if s.balancing() == PerConnection || conns <= 0 {
		n := draws(power)
		p := Plan{Draws: n, Requests: n, Allowance: 1}
		if s.balancing() == PerConnection && conns > 0 {
			p.Requests, p.Connections = 0, n
		}
		return p
	}
	miss := (1 - power) / 2
	n := draws(1 - miss)
	if n == draws(power) {
		// The test's draws do not depend on the power (a clean run passes
		// from a fixed n): the design effect's estimate gets all of 1-power.
		miss = 1 - power
	}
	p := Plan{Draws: n}
	if conns < MinEstimateConnections {
		p.Connections, conns = MinEstimateConnections, MinEstimateConnections
	}
	p.Allowance = DependenceAllowance(conns, tests, miss)
	p.Requests = max(ceilN(float64(n)*p.Allowance), n)
	return p
}

// DependenceAllowance is the 1-miss/tests quantile of χ²_{C-1}/(C-1), the
// design effect's estimate over C equal connections under independent
// routing: what PlanDraws multiplies the draws by.
func DependenceAllowance(connections int64, tests int, miss float64) float64 {
	if connections < 2 {
		return math.Inf(1)
	}
	df := float64(connections - 1)
	return distuv.ChiSquared{K: df}.Quantile(1-miss/float64(max(tests, 1))) / df
}

// PlanSplit is PlanDraws for a split: RequiredDraws at each power, the
// largest of k buckets' design effects (one for two buckets).
func PlanSplit(s SplitSpec) Plan {
	s = s.withDefaults()
	if s.Validate() != nil {
		return Plan{}
	}
	// Two buckets' design effects are one (their residuals are equal).
	tests := len(s.Expected)
	if tests <= 2 {
		tests = 1
	}
	return PlanDraws(s.Sampling, s.Power, tests, func(power float64) int64 {
		t := s
		t.Power = power
		return RequiredDraws(t)
	})
}
