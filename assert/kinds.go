package assert

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Result is the verdict of an expectation about one share or rate.
type Result struct {
	Verdict  Verdict `json:"verdict"`
	Observed float64 `json:"observed"` // the share/rate measured
	// Interval's ends are the one-sided bounds at the stated confidence
	// (a two-sided interval at level 1-2α).
	Interval  *Interval `json:"interval,omitempty"`
	RequiredN int64     `json:"requiredN,omitempty"`
	Reason    string    `json:"reason"`
}

// Reached passes when every named bucket got at least one request.
//
// A bucket that got nothing fails only when the evidence is strong: if it
// had at least half of an equal share, 1/(2k) of the traffic, the chance of
// seeing none of it in n independent requests is (1-1/(2k))^n; FAIL needs
// that to be at most α/k (α = 1-DefaultConfidence, Bonferroni over the k
// named buckets). A bucket that gets less than half its equal share is not
// what "reached" promises, so it is fair to call it missing. With fewer
// requests the verdict is INCONCLUSIVE with the n that would decide it.
// With Units the evidence counts as n²/SumMM draws (C for equal
// connections), the worst case for a bucket never seen: requests on one
// connection may all go to the same place.
//
// Traffic to buckets that are not named is Only's business, not Reached's.
func Reached(c Counts, buckets []string) Result {
	if err := c.Validate(); err != nil {
		return Result{Verdict: Inconclusive, Reason: err.Error()}
	}
	buckets = dedupe(buckets)
	if len(buckets) == 0 {
		return Result{Verdict: Inconclusive, Reason: "reached: no buckets named"}
	}
	n := c.Total()
	k := float64(len(buckets))
	alpha := 1 - DefaultConfidence
	need := math.Ceil(math.Log(alpha/k) / math.Log1p(-1/(2*k)))
	draws, perRequest := float64(n), 1.0
	if u := c.Units; u != nil && u.SumMM > 0 && n > 0 {
		draws = float64(n) * float64(n) / u.SumMM
		perRequest = draws / float64(n)
	}
	var missing, seen []string
	minShare := 1.0
	for _, b := range buckets {
		x := c.Count(b)
		if x == 0 {
			missing = append(missing, b)
		} else {
			seen = append(seen, fmt.Sprintf("%s=%d", b, x))
		}
		if n > 0 {
			minShare = math.Min(minShare, float64(x)/float64(n))
		}
	}
	r := Result{}
	if n > 0 {
		r.Observed = minShare
	}
	switch {
	case n == 0:
		r.Verdict, r.RequiredN = Inconclusive, int64(need)
		r.Reason = fmt.Sprintf("no requests counted: about %d would show whether %s are reached", r.RequiredN, strings.Join(buckets, ", "))
	case len(missing) == 0:
		r.Verdict = Pass
		r.Reason = fmt.Sprintf("every named bucket got traffic: %s", strings.Join(seen, ", "))
	case draws >= need:
		r.Verdict = Fail
		r.Reason = fmt.Sprintf("%s got no request out of %d; with a share of at least %s it would have been seen with probability at least %s",
			strings.Join(missing, ", "), n, pct(1/(2*k)), pct(1-alpha/k))
	default:
		r.Verdict = Inconclusive
		r.RequiredN = ceilN(need / perRequest)
		r.Reason = fmt.Sprintf("%s got no request yet, but %d requests are too few to call it missing: about %d in total would decide",
			strings.Join(missing, ", "), n, r.RequiredN)
	}
	return r
}

// Only checks the share of requests that went outside the named buckets.
// margin 0 is strict: any request outside fails, none passes (n > 0) and
// the reason quotes the one-sided upper bound of the outside share, the
// rule-of-three idea. margin > 0 is an equivalence test of the outside
// share against [0, margin]: PASS when its upper bound is at most margin,
// FAIL when its lower bound exceeds margin.
func Only(c Counts, buckets []string, margin, confidence float64, m IntervalMethod) Result {
	return bounded(c, buckets, margin, confidence, m, false)
}

// Never checks the share of requests that went to the named buckets, in
// the same way as Only checks the share outside them.
func Never(c Counts, buckets []string, margin, confidence float64, m IntervalMethod) Result {
	return bounded(c, buckets, margin, confidence, m, true)
}

// bounded judges the share of requests inside (Never) or outside (Only)
// the named set against [0, margin].
func bounded(c Counts, set []string, margin, confidence float64, m IntervalMethod, inside bool) Result {
	if confidence == 0 {
		confidence = DefaultConfidence
	}
	if m == "" {
		m = Wilson
	}
	set = dedupe(set)
	var err error
	switch {
	case len(set) == 0:
		err = fmt.Errorf("no buckets named")
	case !(margin >= 0 && margin < 1):
		err = fmt.Errorf("margin %g: want a share in [0,1)", margin)
	case !(confidence > 0 && confidence < 1):
		err = fmt.Errorf("confidence %g: want a level in (0,1)", confidence)
	default:
		if err = validateMethod(m); err == nil {
			err = c.Validate()
		}
	}
	if err != nil {
		return Result{Verdict: Inconclusive, Reason: err.Error()}
	}
	where := "outside {" + strings.Join(set, ", ") + "}"
	if inside {
		where = "to {" + strings.Join(set, ", ") + "}"
	}

	n := c.Total()
	if n == 0 {
		return Result{Verdict: Inconclusive, Reason: "no requests counted"}
	}
	nf := float64(n)
	var x int64
	var hits, measured, other []int
	for i, b := range c.Buckets {
		if slices.Contains(set, b) != inside {
			other = append(other, i)
			continue
		}
		measured = append(measured, i)
		x += c.N[i]
		if c.N[i] > 0 {
			hits = append(hits, i)
		}
	}
	q := float64(x) / nf
	alpha := 1 - confidence
	a := 2 * alpha
	eff := effectiveFor(c.Units, n, a, []float64{q}, []float64{mergedResidual(c, measured, other)})
	ns := nf * eff.ratio
	iv := BinomialInterval(m, q*ns, ns, a)
	r := Result{Observed: q, Interval: &iv}
	level := pct(confidence)

	if margin == 0 {
		if x > 0 {
			r.Verdict = Fail
			r.Reason = fmt.Sprintf("%d of %d requests (%s) went %s: %s", x, n, pct(q), where, listCounts(c, hits))
			return r
		}
		r.Verdict = Pass
		r.Reason = fmt.Sprintf("none of %d requests went %s: the share that does is at most %s at %s confidence", n, where, pct(iv.Hi), level)
		return r
	}
	allowed := Interval{0, margin}
	switch bucketVerdict(iv, allowed) {
	case Pass:
		r.Verdict = Pass
		r.Reason = fmt.Sprintf("%s of %d requests went %s; at most %s at %s confidence, within the allowed %s", pct(q), n, where, pct(iv.Hi), level, pct(margin))
	case Fail:
		r.Verdict = Fail
		r.Reason = fmt.Sprintf("%s of %d requests went %s; at least %s at %s confidence, above the allowed %s", pct(q), n, where, pct(iv.Lo), level, pct(margin))
	default:
		r.Verdict = Inconclusive
		r.RequiredN = settleOne(q, margin, true, n, eff.scaled(), a, m)
		r.Reason = fmt.Sprintf("%s of %d requests went %s; the %s bounds %s straddle the allowed %s%s",
			pct(q), n, where, level, fmtInterval(iv), pct(margin), requiredAdvice(r.RequiredN, eff))
	}
	r.Reason += eff.note(n)
	return r
}

// mergedResidual bounds sum_j (o_j - q m_j)^2 for the merged buckets, which
// UnitStats cannot give exactly (it keeps no cross-bucket products). The
// residuals of the measured side and of the other side are negatives of
// each other, and by Cauchy–Schwarz (sum over T of r)² ≤ |T|·sum over T of
// r², so the smaller side gives the tighter bound; exact when it is one
// bucket.
func mergedResidual(c Counts, measured, other []int) float64 {
	u := c.Units
	if u == nil {
		return 0
	}
	side := measured
	if len(other) < len(side) {
		side = other
	}
	n := float64(c.Total())
	sum := 0.0
	for _, i := range side {
		sum += math.Max(residual(u, i, float64(c.N[i])/n), 0)
	}
	return float64(len(side)) * sum
}

// SuccessRate is a one-sided test of a success rate against a floor:
// PASS when the lower bound at the stated confidence is at least atLeast,
// FAIL when the upper bound is below it, else INCONCLUSIVE with RequiredN.
// u holds per-connection sums in [success, failure] order and may be nil;
// when every request succeeded (or failed) the per-connection variance is
// zero and cannot be used, so the worst case, n²/SumMM draws, is assumed:
// failures tend to come per connection.
func SuccessRate(successes, n int64, atLeast, confidence float64, m IntervalMethod, u *UnitStats) Result {
	if confidence == 0 {
		confidence = DefaultConfidence
	}
	if m == "" {
		m = Wilson
	}
	var err error
	switch {
	case n < 0 || successes < 0 || successes > n:
		err = fmt.Errorf("success rate: %d successes out of %d requests", successes, n)
	case !(atLeast >= 0 && atLeast <= 1):
		err = fmt.Errorf("success rate: floor %g, want a share in [0,1]", atLeast)
	case !(confidence > 0 && confidence < 1):
		err = fmt.Errorf("confidence %g: want a level in (0,1)", confidence)
	case u != nil && (len(u.SumXX) < 1 || len(u.SumXM) < 1):
		err = fmt.Errorf("success rate: per-connection sums missing")
	default:
		err = validateMethod(m)
	}
	if err != nil {
		return Result{Verdict: Inconclusive, Reason: err.Error()}
	}
	if n == 0 {
		return Result{Verdict: Inconclusive, Reason: "no requests counted"}
	}
	nf := float64(n)
	p := float64(successes) / nf
	a := 2 * (1 - confidence)
	var resid float64
	if u != nil {
		resid = residual(u, 0, p)
	}
	eff := effectiveFor(u, n, a, []float64{p}, []float64{resid})
	ns := nf * eff.ratio
	iv := BinomialInterval(m, p*ns, ns, a)
	r := Result{Observed: p, Interval: &iv}
	level := pct(confidence)
	head := fmt.Sprintf("success rate %s (%d/%d)", pct(p), successes, n)
	switch {
	case iv.Lo >= atLeast:
		r.Verdict = Pass
		r.Reason = fmt.Sprintf("%s: at least %s at %s confidence, meeting %s", head, pct(iv.Lo), level, pct(atLeast))
	case iv.Hi < atLeast:
		r.Verdict = Fail
		r.Reason = fmt.Sprintf("%s: at most %s at %s confidence, below %s", head, pct(iv.Hi), level, pct(atLeast))
	default:
		r.Verdict = Inconclusive
		if p != atLeast {
			r.RequiredN = settleOne(p, atLeast, false, n, eff.scaled(), a, m)
		}
		r.Reason = fmt.Sprintf("%s: the %s bounds %s straddle %s%s", head, level, fmtInterval(iv), pct(atLeast), requiredAdvice(r.RequiredN, eff))
	}
	r.Reason += eff.note(n)
	return r
}

// settleOne is settleN for a single share against one bound: below (the
// share must stay at most bound, as for Only/Never) or at least (as for
// SuccessRate). Returns 0 when no n settles it.
func settleOne(p, bound float64, upper bool, n int64, ratio, a float64, m IntervalMethod) int64 {
	if ratio == 0 || p == bound {
		return 0
	}
	var want func(Interval) bool
	if p < bound {
		want = func(iv Interval) bool { return iv.Hi < bound || (upper && iv.Hi <= bound) }
	} else {
		want = func(iv Interval) bool { return iv.Lo > bound || (!upper && iv.Lo >= bound) }
	}
	need, ok := settleN(want, p, n, ratio, a, m, zQuantile(1-(1-DefaultPower)/2))
	if !ok {
		return 0
	}
	return need
}

func requiredAdvice(n int64, eff effective) string {
	switch {
	case eff.ratio == 0:
		return "" // eff.note says why
	case n == 0:
		return ": the observed share sits on the bound, so more requests alone will not settle it"
	}
	return fmt.Sprintf(": about %d requests in total would settle it", n)
}

func listCounts(c Counts, idx []int) string {
	parts := make([]string, len(idx))
	for j, i := range idx {
		parts[j] = fmt.Sprintf("%s=%d", c.Buckets[i], c.N[i])
	}
	return strings.Join(parts, ", ")
}

func dedupe(s []string) []string {
	var out []string
	for _, b := range s {
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}
