package assert

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Comparing an expectation across two runs (docs/statistics.md §9.4): each
// run's shares are taken at the effective draws its own verdict used, so
// the comparison is exactly as dependence-aware as the verdicts, and
// follows each run's sampling (balancing, connections) as its verdict did.

// JudgedShare is one bucket of an expectation as a run judged it: Count of
// N requests, worth EffectiveCount of EffectiveN draws, and the margin δ
// the expectation allows around its expected share.
type JudgedShare struct {
	Bucket         string
	Count, N       int64
	EffectiveCount float64
	EffectiveN     float64
	Margin         float64
}

// ExpectationStatus is what the comparison of an expectation concluded.
type ExpectationStatus string

// Expectation comparison statuses.
const (
	// ExpectationChanged: some share changed significantly (Bonferroni over
	// the buckets), or the two verdicts are decisive and differ.
	ExpectationChanged ExpectationStatus = "changed"
	// ExpectationSame: every share is shown within ±(δ_A+δ_B) of the
	// other run's, the width of the expectation's band: the most two runs
	// inside it can differ (two one-sided tests each, an
	// intersection–union test).
	ExpectationSame ExpectationStatus = "no-change"
	// ExpectationUntestable: neither shown, or nothing to compare.
	ExpectationUntestable ExpectationStatus = "untestable"
)

// ExpectationComparison is the conclusion with what it rests on.
type ExpectationComparison struct {
	Status ExpectationStatus `json:"status"`
	// Bucket is the bucket whose share moved most, with its difference
	// B - A and the confidence interval of it (Agresti–Caffo at the
	// comparison's level).
	Bucket string    `json:"bucket,omitempty"`
	Diff   float64   `json:"diff"`
	CI     *Interval `json:"ci,omitempty"`
	Reason string    `json:"reason"`
}

// CompareJudged compares an expectation's shares in run a and run b at
// confidence (default 0.95), given both runs' verdicts. Each bucket's share
// p̂ = EffectiveCount/EffectiveN is compared at the run's effective draws:
//
//   - changed: the score test of no change, d over √(p̄(1-p̄)(1/n*_A + 1/n*_B))
//     with p̄ the pooled share, rejects at α/h for some bucket (Bonferroni
//     over the h buckets tested, one for two buckets); or both verdicts
//     are PASS/FAIL and differ (each is wrong with probability at most α);
//   - no change within the band: for every bucket, the Agresti–Caffo
//     interval of the difference at 1-2α (Agresti and Caffo 2000: one
//     success and one failure added to each run, which keeps it honest at
//     0% and 100%) lies inside ±(δ_A+δ_B), the width of the band the
//     expectation allows (the most two runs inside it can differ);
//   - untestable otherwise, with why.
func CompareJudged(a, b []JudgedShare, va, vb Verdict, confidence float64) ExpectationComparison {
	if !(confidence > 0 && confidence < 1) {
		confidence = DefaultConfidence
	}
	alpha := 1 - confidence
	if len(a) == 0 || len(b) == 0 || a[0].EffectiveN <= 0 || b[0].EffectiveN <= 0 {
		return ExpectationComparison{Status: ExpectationUntestable, Reason: "a run counted no request for it"}
	}
	byName := func(s []JudgedShare, name string) JudgedShare {
		for _, j := range s {
			if j.Bucket == name {
				return j
			}
		}
		return JudgedShare{Bucket: name, N: s[0].N, EffectiveN: s[0].EffectiveN}
	}
	var names []string
	for _, s := range [][]JudgedShare{a, b} {
		for _, j := range s {
			if !slices.Contains(names, j.Bucket) {
				names = append(names, j.Bucket)
			}
		}
	}
	h := len(names)
	if h == 2 {
		h = 1 // complements: one hypothesis
	}
	zChange := zQuantile(1 - alpha/(2*float64(max(h, 1))))
	zSame := zQuantile(1 - alpha)
	zCI := zQuantile(1 - alpha/2)
	out := ExpectationComparison{Status: ExpectationSame}
	var changed []string
	same := true
	for _, name := range names {
		ja, jb := byName(a, name), byName(b, name)
		na, nb := ja.EffectiveN, jb.EffectiveN
		pa, pb := ja.EffectiveCount/na, jb.EffectiveCount/nb
		d := pb - pa
		pbar := (ja.EffectiveCount + jb.EffectiveCount) / (na + nb)
		if v0 := pbar * (1 - pbar) * (1/na + 1/nb); v0 > 0 && math.Abs(d)/math.Sqrt(v0) > zChange {
			changed = append(changed, fmt.Sprintf("%s %s → %s", name, pct(pa), pct(pb)))
		}
		// Agresti–Caffo: one success and one failure more in each run.
		ta, tb := (ja.EffectiveCount+1)/(na+2), (jb.EffectiveCount+1)/(nb+2)
		dt := tb - ta
		se := math.Sqrt(ta*(1-ta)/(na+2) + tb*(1-tb)/(nb+2))
		delta := ja.Margin + jb.Margin
		if !(dt+zSame*se < delta && dt-zSame*se > -delta) {
			same = false
		}
		if out.CI == nil || math.Abs(d) > math.Abs(out.Diff) {
			out.Bucket, out.Diff = name, d
			out.CI = &Interval{Lo: math.Max(dt-zCI*se, -1), Hi: math.Min(dt+zCI*se, 1)}
		}
	}
	decisive := func(v Verdict) bool { return v == Pass || v == Fail }
	draws := fmt.Sprintf("%s and %s independent draws", fmtDraws(a[0].EffectiveN), fmtDraws(b[0].EffectiveN))
	switch {
	case len(changed) > 0:
		out.Status = ExpectationChanged
		out.Reason = fmt.Sprintf("%s at %s (%s)", strings.Join(changed, ", "), level(confidence), draws)
	case decisive(va) && decisive(vb) && va != vb:
		out.Status = ExpectationChanged
		out.Reason = fmt.Sprintf("%v in run A and %v in run B, each wrong with probability at most %s", va, vb, pct(alpha))
	case same:
		out.Reason = fmt.Sprintf("every share is shown within ±%s points of the other run's at %s (%s)",
			strings.TrimSuffix(pct(a[0].Margin+b[0].Margin), "%"), level(1-alpha), draws)
	default:
		out.Status = ExpectationUntestable
		out.Reason = fmt.Sprintf("the runs are worth %s, too few to show either a change or none within ±%s points",
			draws, strings.TrimSuffix(pct(a[0].Margin+b[0].Margin), "%"))
	}
	return out
}
