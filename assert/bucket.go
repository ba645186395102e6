package assert

import "math"

// BucketRule is how one bucket of a split is judged (docs/statistics.md
// §2). Split applies it to every bucket; the planner and the calibration
// tests use the same rule, so what they promise is what Split does.
type BucketRule struct {
	Expected float64 // p_i
	Margin   float64 // δ_i > 0
	Alpha    float64 // 1 - confidence
	K        int     // buckets in the split: FAIL is Bonferroni over them
	// Method is the FAIL interval; "" means Clopper–Pearson.
	Method IntervalMethod
}

// BucketJudgement is a bucket's verdict with the two intervals behind it.
type BucketJudgement struct {
	Verdict Verdict
	// Pass is the Clopper–Pearson interval at PassLevel: both ends are
	// exact one-sided bounds at α.
	Pass Interval
	// Fail is the Method's interval at FailLevel.
	Fail Interval
}

// PassLevel is the two-sided level of the PASS interval, 1-2α: each end
// is a one-sided test at α (two one-sided tests).
func (r BucketRule) PassLevel() float64 { return 1 - 2*r.Alpha }

// FailLevel is the level of the FAIL interval, 1-α/k: Bonferroni over the
// k buckets, both sides included, so a correct split fails with
// probability at most α.
func (r BucketRule) FailLevel() float64 { return 1 - r.Alpha/float64(max(r.K, 1)) }

// band is [p-δ, p+δ] as the tests see it: unclipped, so an end beyond 0 or
// 1 says that side has no null hypothesis to reject. Ends within round-off
// of 0 or 1 are snapped there, where the null hypothesis is one point.
func (r BucketRule) band() (lo, hi float64) {
	lo, hi = r.Expected-r.Margin, r.Expected+r.Margin
	if math.Abs(lo) < 1e-12 {
		lo = 0
	}
	if math.Abs(hi-1) < 1e-12 {
		hi = 1
	}
	return lo, hi
}

// Allowed is the band clipped to [0,1], as reports show it.
func (r BucketRule) Allowed() Interval {
	lo, hi := r.band()
	return Interval{clamp01(lo), clamp01(hi)}
}

// lowOK and highOK are the two exact one-sided binomial tests at α, given
// the one-sided Clopper–Pearson bound: the share is shown above p-δ (below
// p+δ) when the bound lies strictly beyond it. A bucket passes when both
// hold; under any truth outside the band one of them holds with
// probability at most α, whatever the other buckets do (Berger 1982).
func (r BucketRule) lowOK(lower float64) bool {
	lo, _ := r.band()
	return lo < 0 || lower > lo
}

func (r BucketRule) highOK(upper float64) bool {
	_, hi := r.band()
	return hi > 1 || upper < hi
}

// passesLow and passesHigh are the tests from the counts, one Beta
// quantile each: the planner searches their boundaries in x.
func (r BucketRule) passesLow(x, n float64) bool  { return r.lowOK(cpLower(x, n, r.Alpha)) }
func (r BucketRule) passesHigh(x, n float64) bool { return r.highOK(cpUpper(x, n, r.Alpha)) }

// Passes reports whether x of n effective draws pass the bucket.
func (r BucketRule) Passes(x, n float64) bool {
	return n > 0 && r.passesLow(x, n) && r.passesHigh(x, n)
}

// fails reports whether the FAIL interval lies entirely outside the band.
func (r BucketRule) fails(iv Interval) bool {
	lo, hi := r.band()
	return iv.Hi < lo || iv.Lo > hi
}

// Judge judges x of n effective draws (fractional under per-connection
// balancing). PASS is decided first: the FAIL interval is at a level at
// least as high, so it contains the PASS interval and a passing bucket
// could not fail anyway (calibration_test.go checks this nesting).
func (r BucketRule) Judge(x, n float64) BucketJudgement {
	j := BucketJudgement{Verdict: Inconclusive, Pass: Interval{0, 1}, Fail: Interval{0, 1}}
	if !(n > 0) {
		return j
	}
	j.Pass = clopperPearson(x, n, 2*r.Alpha)
	j.Fail = BinomialInterval(r.Method, x, n, 1-r.FailLevel())
	switch {
	case r.lowOK(j.Pass.Lo) && r.highOK(j.Pass.Hi):
		j.Verdict = Pass
	case r.fails(j.Fail):
		j.Verdict = Fail
	}
	return j
}
