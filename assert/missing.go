package assert

import "fmt"

// Missing data (docs/statistics.md §3.6): requests that were answered but
// whose bucket is unknown (no rule placed them, or attribution dropped
// them under overload) are no fair sample of the rest, so they are judged
// by their worst case. A verdict stands when every assignment of the m
// missing requests to the expectation's buckets gives it; otherwise it is
// INCONCLUSIVE, naming m.
//
// With the m assigned there are n+m requests, worth (n+m)·n*/n draws (the
// effective draws per request of the attributed ones: the missing
// requests came over the same connections), and bucket i of a split holds
// x_i + a_i, a_i ≥ 0, Σ a_i = m. A bucket's PASS region and its not-FAIL
// region are ranges of counts (the bounds grow with the count), so
//
//   - PASS under every assignment ⇔ every bucket passes at x_i and at
//     x_i + m (any a_i in [0, m] is some assignment's, the rest elsewhere;
//     with one bucket, a_1 = m);
//   - FAIL under every assignment ⇔ no assignment keeps every bucket out of
//     its FAIL region: with [l_i, u_i] the a_i that keep bucket i from
//     failing, such an assignment exists exactly when every range is
//     non-empty and Σ l_i ≤ m ≤ Σ u_i.

// noFailRange is the range [l, u] of the a in [0, m] with which a bucket
// of x requests does not fail, at neff draws for n+m requests; l > u when
// it fails whatever it gets.
func noFailRange(rule BucketRule, x, m int64, ratio, neff float64) (l, u int64) {
	judge := func(a int64) BucketJudgement { return rule.Judge(float64(x+a)*ratio, neff) }
	lo, _ := rule.band()
	failsLow := func(a int64) bool { j := judge(a); return j.Verdict == Fail && j.Fail.Hi < lo }
	l = firstTrue(0, m, 0, func(a int64) bool { return !failsLow(a) })
	u = firstTrue(l, m, l, func(a int64) bool { return judge(a).Verdict == Fail }) - 1
	return l, u
}

// worstCase judges a split's decision r, made on the attributed counts,
// again with m missing requests (m > 0) by their worst case.
func (r *SplitResult) worstCase(m int64, rules []BucketRule, d draws) {
	r.Missing = m
	if m <= 0 || d.N == 0 {
		return
	}
	before := r.Verdict
	ratio := d.ratio()
	neff := float64(d.N+m) * ratio
	least := int64(0) // the fewest a bucket can get
	if len(r.Buckets) == 1 {
		least = m
	}
	pass, failsAlways := true, false
	var sumL, sumU int64
	flip := ""
	for i := range r.Buckets {
		b := &r.Buckets[i]
		none, all := rules[i].Judge(float64(b.Count+least)*ratio, neff), rules[i].Judge(float64(b.Count+m)*ratio, neff)
		l, u := noFailRange(rules[i], b.Count, m, ratio, neff)
		l = max(l, least)
		switch {
		case none.Verdict == Pass && all.Verdict == Pass:
			b.Verdict = Pass
		case l > u:
			b.Verdict, failsAlways = Fail, true
		default:
			b.Verdict = Inconclusive
		}
		if b.Verdict != Pass {
			pass = false
			if flip == "" && none.Verdict != all.Verdict {
				flip = fmt.Sprintf(": bucket %s is %v with none of them and %v with all of them", b.Bucket, none.Verdict, all.Verdict)
			}
		}
		sumL, sumU = sumL+l, sumU+u
	}
	switch {
	case pass:
		r.Verdict = Pass
	case failsAlways || sumL > m || sumU < m:
		r.Verdict = Fail
	case before == Inconclusive:
		// Not settled without them either: the advice says what would.
		r.Verdict = Inconclusive
	default:
		r.Verdict = Inconclusive
		r.missingWhy = fmt.Sprintf("%d answered requests whose bucket is unknown decide it (unattributed, or dropped by an overloaded attribution)%s; the verdict must hold wherever they went", m, flip)
	}
}

// shareWorstCase is the worst case of a share of violations: v of n
// attributed requests violate, and the m missing ones may or may not. The
// rule is monotone in the violations, so the verdict stands when it is the
// same with none and with all of them violating.
func shareWorstCase(rl shareRule, v, n, m int64, ratio float64) (Verdict, Interval, string) {
	neff := float64(n+m) * ratio
	none, ivNone := rl.judge(float64(v)*ratio, neff)
	all, _ := rl.judge(float64(v+m)*ratio, neff)
	if none == all {
		return none, ivNone, ""
	}
	return Inconclusive, ivNone, fmt.Sprintf("%d answered requests whose bucket is unknown decide it (unattributed, or dropped by an overloaded attribution): %v if none of them violates, %v if all do; the verdict must hold wherever they went",
		m, none, all)
}
