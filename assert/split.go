package assert

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"
)

// SplitSpec is the expected split and how strictly to judge it.
// A bucket missing from Counts has count 0; a bucket in Counts missing from
// Expected has expected share 0.
type SplitSpec struct {
	Expected map[string]float64
	// Margin is δ: an absolute share (0.05 = 5 percentage points) unless
	// Relative, then δ_i = Margin·p_i. 0 means DefaultMargin.
	// Under a relative margin a bucket expected to get 0 takes the
	// smallest δ of the other buckets: Margin·0 would allow nothing and
	// make the split impossible to pass.
	Margin     float64
	Relative   bool
	Confidence float64        // 1-α; 0 means DefaultConfidence
	Method     IntervalMethod // "" means Wilson
	Power      float64        // for the RequiredN advice; 0 means DefaultPower
}

// BucketResult is one bucket's share and its verdict.
type BucketResult struct {
	Bucket   string  `json:"bucket"`
	Count    int64   `json:"count"`
	Observed float64 `json:"observed"`
	Expected float64 `json:"expected"`
	// Interval is simultaneous: level 1-2α/k, widened by the design effect
	// when Units are given.
	Interval Interval `json:"interval"`
	Allowed  Interval `json:"allowed"` // [p-δ, p+δ] clipped to [0,1]
	Verdict  Verdict  `json:"verdict"`
}

// SplitResult is the verdict on a whole split. Every float is finite so the
// result always marshals to JSON.
type SplitResult struct {
	Verdict      Verdict        `json:"verdict"`
	Buckets      []BucketResult `json:"buckets"`
	N            int64          `json:"n"`
	EffectiveN   float64        `json:"effectiveN"`   // n / DesignEffect: what the requests are worth as independent draws
	DesignEffect float64        `json:"designEffect"` // used for the decision, >= 1; 1 without Units
	// DesignEffectRaw is the estimate before flooring at 1 (a value below 1
	// means connections were more balanced than independent draws).
	DesignEffectRaw float64 `json:"designEffectRaw,omitempty"`
	Connections     int64   `json:"connections,omitempty"`
	// ChiSquare is Pearson's statistic over the buckets expected to get
	// traffic; DF is their number minus one. With Units the p-value uses
	// ChiSquare/DesignEffect (first-order Rao–Scott correction).
	ChiSquare float64 `json:"chiSquare"`
	DF        int     `json:"df"`
	PValue    float64 `json:"pValue"`
	// ChiSquareInfinite is set when a bucket expected to get nothing got
	// traffic: the statistic is then infinite (PValue 0) and ChiSquare only
	// sums the other buckets.
	ChiSquareInfinite bool   `json:"chiSquareInfinite,omitempty"`
	RequiredN         int64  `json:"requiredN,omitempty"` // total requests that would settle an INCONCLUSIVE verdict
	Reason            string `json:"reason"`
}

// withDefaults fills the zero values.
func (s SplitSpec) withDefaults() SplitSpec {
	if s.Margin == 0 {
		s.Margin = DefaultMargin
	}
	if s.Confidence == 0 {
		s.Confidence = DefaultConfidence
	}
	if s.Method == "" {
		s.Method = Wilson
	}
	if s.Power == 0 {
		s.Power = DefaultPower
	}
	return s
}

// Validate reports what is wrong with a spec, after defaults.
func (s SplitSpec) Validate() error {
	s = s.withDefaults()
	if err := validateExpected(s.Expected); err != nil {
		return err
	}
	if err := validateLevels(s.Margin, s.Confidence, s.Power); err != nil {
		return err
	}
	return validateMethod(s.Method)
}

func validateExpected(e map[string]float64) error {
	if len(e) == 0 {
		return fmt.Errorf("expected split: no buckets")
	}
	sum := 0.0
	for _, b := range slices.Sorted(maps.Keys(e)) {
		p := e[b]
		if b == "" {
			return fmt.Errorf("expected split: empty bucket name")
		}
		if math.IsNaN(p) || p < 0 || p > 1 {
			return fmt.Errorf("expected split: bucket %s has share %g, want a share in [0,1]", b, p)
		}
		sum += p
	}
	if math.Abs(sum-1) > 1e-6 {
		return fmt.Errorf("expected split: shares sum to %g, want 1", sum)
	}
	return nil
}

func validateLevels(margin, confidence, power float64) error {
	switch {
	case !(margin > 0 && margin < 1):
		return fmt.Errorf("margin %g: want a share in (0,1), e.g. 0.05 for 5 percentage points", margin)
	case !(confidence > 0 && confidence < 1):
		return fmt.Errorf("confidence %g: want a level in (0,1), e.g. 0.95", confidence)
	case !(power > 0 && power < 1):
		return fmt.Errorf("power %g: want a probability in (0,1), e.g. 0.8", power)
	}
	return nil
}

func validateMethod(m IntervalMethod) error {
	if m != Wilson && m != ClopperPearson && m != "" {
		return fmt.Errorf("interval method %q: want %s or %s", m, Wilson, ClopperPearson)
	}
	return nil
}

// Validate reports inconsistent counts.
func (c Counts) Validate() error {
	if len(c.N) != len(c.Buckets) {
		return fmt.Errorf("counts: %d buckets but %d counts", len(c.Buckets), len(c.N))
	}
	seen := make(map[string]bool, len(c.Buckets))
	for i, b := range c.Buckets {
		if seen[b] {
			return fmt.Errorf("counts: bucket %s appears twice", b)
		}
		seen[b] = true
		if c.N[i] < 0 {
			return fmt.Errorf("counts: bucket %s has negative count %d", b, c.N[i])
		}
	}
	if u := c.Units; u != nil {
		if len(u.SumXX) != len(c.Buckets) || len(u.SumXM) != len(c.Buckets) {
			return fmt.Errorf("counts: per-connection sums for %d/%d buckets, want %d", len(u.SumXX), len(u.SumXM), len(c.Buckets))
		}
		if u.Units < 0 || u.SumMM < 0 {
			return fmt.Errorf("counts: negative connection statistics")
		}
	}
	return nil
}

// Total is the number of requests counted.
func (c Counts) Total() int64 {
	var n int64
	for _, x := range c.N {
		n += x
	}
	return n
}

// Count returns the count of a bucket, 0 when absent.
func (c Counts) Count(bucket string) int64 {
	if i := slices.Index(c.Buckets, bucket); i >= 0 && i < len(c.N) {
		return c.N[i]
	}
	return 0
}

// Split judges observed counts against an expected split (DESIGN.md §4).
// PASS when every interval lies inside [p_i-δ, p_i+δ]; FAIL when some
// interval lies entirely outside it; otherwise INCONCLUSIVE with the total
// number of requests that would settle it. Each interval, at level
// 1-2α/k, is a pair of one-sided tests at α/k: a split off by more than δ
// passes with probability at most α/k (PASS needs every bucket), and a
// correct one fails with probability at most α by Bonferroni over the k
// buckets (strictly, up to 2α for k ≥ 3 when δ is far below one standard
// error, where a bucket can miss on both sides; for k = 2 the buckets
// mirror each other and α holds always).
//
// No requests (n = 0) is INCONCLUSIVE, whatever the margin. Invalid input is
// INCONCLUSIVE too, with the problem as the reason: callers that want an
// error call SplitSpec.Validate and Counts.Validate first.
func Split(c Counts, s SplitSpec) SplitResult {
	s = s.withDefaults()
	if err := s.Validate(); err != nil {
		return SplitResult{Verdict: Inconclusive, DesignEffect: 1, Reason: err.Error()}
	}
	if err := c.Validate(); err != nil {
		return SplitResult{Verdict: Inconclusive, DesignEffect: 1, Reason: err.Error()}
	}

	// Counts' order first (the tally's order), then expected-only buckets sorted.
	names := slices.Clone(c.Buckets)
	for _, b := range slices.Sorted(maps.Keys(s.Expected)) {
		if !slices.Contains(names, b) {
			names = append(names, b)
		}
	}
	k := len(names)
	n := c.Total()
	nf := float64(n)
	alpha := 1 - s.Confidence
	a := 2 * alpha / float64(k)

	shares := make([]float64, len(c.Buckets))
	resid := make([]float64, len(c.Buckets))
	for i, x := range c.N {
		if n > 0 {
			shares[i] = float64(x) / nf
			if c.Units != nil {
				resid[i] = residual(c.Units, i, shares[i])
			}
		}
	}
	eff := effectiveFor(c.Units, n, a, shares, resid)
	nStar := nf * eff.ratio

	r := SplitResult{
		N:            n,
		EffectiveN:   nf / eff.deff,
		DesignEffect: eff.deff,
		Connections:  eff.units,
		Buckets:      make([]BucketResult, k),
	}
	if c.Units != nil {
		r.DesignEffectRaw = eff.deffRaw
	}
	deltas := margins(s, names)
	for i, b := range names {
		x := c.Count(b)
		p := s.Expected[b]
		br := BucketResult{Bucket: b, Count: x, Expected: p}
		if n > 0 {
			br.Observed = float64(x) / nf
		}
		br.Interval = BinomialInterval(s.Method, br.Observed*nStar, nStar, a)
		br.Allowed = Interval{clamp01(p - deltas[i]), clamp01(p + deltas[i])}
		br.Verdict = bucketVerdict(br.Interval, br.Allowed)
		if n == 0 {
			br.Verdict = Inconclusive
		}
		r.Buckets[i] = br
	}
	r.Verdict = Pass
	for _, br := range r.Buckets {
		r.Verdict = Worst(r.Verdict, br.Verdict)
	}
	r.chiSquare(eff.deff)

	if r.Verdict == Inconclusive {
		r.RequiredN = r.settle(s, eff, a, names)
	}
	r.Reason = r.reason(a, eff)
	return r
}

// margins returns δ_i for each bucket.
func margins(s SplitSpec, names []string) []float64 {
	d := make([]float64, len(names))
	if !s.Relative {
		for i := range d {
			d[i] = s.Margin
		}
		return d
	}
	minPos := math.Inf(1)
	for _, b := range names {
		if p := s.Expected[b]; p > 0 {
			minPos = math.Min(minPos, s.Margin*p)
		}
	}
	for i, b := range names {
		d[i] = s.Margin * s.Expected[b]
		if d[i] == 0 {
			d[i] = minPos
		}
	}
	return d
}

func bucketVerdict(iv, allowed Interval) Verdict {
	switch {
	case iv.Lo >= allowed.Lo && iv.Hi <= allowed.Hi:
		return Pass
	case iv.Hi < allowed.Lo || iv.Lo > allowed.Hi:
		return Fail
	}
	return Inconclusive
}

// chiSquare fills Pearson's statistic. Buckets expected to get nothing are
// left out of the sum and the degrees of freedom (their cells are 0/0 when
// empty); if one of them got traffic the statistic is infinite, reported as
// a flag and a p-value of 0 so that JSON stays finite.
func (r *SplitResult) chiSquare(deff float64) {
	positive := 0
	for _, b := range r.Buckets {
		if b.Expected > 0 {
			positive++
		}
	}
	r.DF = max(positive-1, 0)
	r.PValue = 1
	if r.N == 0 {
		return
	}
	nf := float64(r.N)
	for _, b := range r.Buckets {
		if b.Expected == 0 {
			if b.Count > 0 {
				r.ChiSquareInfinite = true
			}
			continue
		}
		e := nf * b.Expected
		d := float64(b.Count) - e
		r.ChiSquare += d * d / e
	}
	switch {
	case r.ChiSquareInfinite:
		r.PValue = 0
	case r.DF > 0:
		r.PValue = distuv.ChiSquared{K: float64(r.DF)}.Survival(r.ChiSquare / deff)
	}
}

// settle estimates the total requests that would settle an INCONCLUSIVE
// split if the observed shares held. A bucket whose share lies outside its
// band would settle as FAIL, and one FAIL settles the split, so the
// smallest such n wins; otherwise every unsettled bucket must come inside,
// so the largest n wins, and never less than the planner's n.
func (r *SplitResult) settle(s SplitSpec, eff effective, a float64, names []string) int64 {
	expected := make(map[string]float64, len(names))
	for _, b := range names {
		expected[b] = s.Expected[b]
	}
	if eff.ratio == 0 {
		return 0 // more requests on one connection settle nothing
	}
	plan := RequiredN(expected, s.Margin, s.Relative, s.Confidence, s.Power, eff.deff)
	if r.N == 0 {
		return plan
	}
	zb := zQuantile(1 - (1-s.Power)/2)
	var toFail, toPass int64 = -1, plan
	for _, b := range r.Buckets {
		if b.Verdict != Inconclusive {
			continue
		}
		outside := b.Observed < b.Allowed.Lo || b.Observed > b.Allowed.Hi
		want := func(iv Interval) bool { return bucketVerdict(iv, b.Allowed) == Pass }
		if outside {
			want = func(iv Interval) bool { return bucketVerdict(iv, b.Allowed) == Fail }
		}
		m, ok := settleN(want, b.Observed, r.N, eff.scaled(), a, s.Method, zb)
		switch {
		case outside && ok && (toFail < 0 || m < toFail):
			toFail = m
		case !outside && !ok:
			toPass = 0 // sits on the edge of its band: no n settles it
		case !outside && toPass > 0:
			toPass = max(toPass, m)
		}
	}
	if toFail >= 0 {
		return toFail
	}
	return toPass
}

// settleN finds the smallest total N > n at which an interval around the
// same share p, with ratio effective draws per request, satisfies want;
// then, for 0 < p < 1, inflates it by ((z_a+z_b)/z_a)² so the verdict
// settles with the planner's power rather than a coin flip. ok is false when even
// maxSettleN requests would not do (the share sits on the band's edge).
func settleN(want func(Interval) bool, p float64, n int64, ratio, a float64, m IntervalMethod, zb float64) (int64, bool) {
	at := func(N int64) bool {
		ns := float64(N) * ratio
		return want(BinomialInterval(m, p*ns, ns, a))
	}
	lo, hi := n, 2*n+1
	for !at(hi) {
		if hi >= maxSettleN {
			return 0, false
		}
		lo, hi = hi, min(2*hi, maxSettleN)
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if at(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	if p == 0 || p == 1 {
		// No sampling variance to guard against at the ends: the interval
		// end only has to clear the bound.
		return hi, true
	}
	za := zQuantile(1 - a/2)
	f := (za + zb) / za
	return ceilN(float64(hi) * f * f), true
}

// maxSettleN bounds the search: beyond ~10^12 requests the advice is
// meaningless anyway.
const maxSettleN = int64(1) << 40

func ceilN(v float64) int64 {
	if v >= float64(math.MaxInt64/2) || math.IsNaN(v) {
		return math.MaxInt64 / 2
	}
	return int64(math.Ceil(v - 1e-9))
}

func (r *SplitResult) reason(a float64, eff effective) string {
	level := pct(1 - a)
	var why string
	switch r.Verdict {
	case Pass:
		why = fmt.Sprintf("every bucket's %s interval lies inside its allowed band after %d requests", level, r.N)
	case Fail:
		worst, dist := BucketResult{}, -1.0
		for _, b := range r.Buckets {
			if b.Verdict != Fail {
				continue
			}
			d := math.Max(b.Interval.Lo-b.Allowed.Hi, b.Allowed.Lo-b.Interval.Hi)
			if d > dist+1e-12 { // the first of equals, for a stable message
				worst, dist = b, d
			}
		}
		why = fmt.Sprintf("bucket %s got %s of %d requests (%s interval %s), outside the allowed %s around the expected %s",
			worst.Bucket, pct(worst.Observed), r.N, level, fmtInterval(worst.Interval), fmtInterval(worst.Allowed), pct(worst.Expected))
		if r.ChiSquareInfinite && worst.Expected == 0 {
			why += "; a bucket expected to get nothing got traffic"
		}
	default:
		switch {
		case r.N == 0:
			why = "no requests counted"
		default:
			var open []string
			for _, b := range r.Buckets {
				if b.Verdict == Inconclusive {
					open = append(open, fmt.Sprintf("%s got %s (interval %s, allowed %s)", b.Bucket, pct(b.Observed), fmtInterval(b.Interval), fmtInterval(b.Allowed)))
				}
			}
			why = fmt.Sprintf("after %d requests a %s interval still overlaps the edge of its allowed band: %s", r.N, level, strings.Join(open, "; "))
		}
		if r.RequiredN > 0 {
			why += fmt.Sprintf(": about %d requests in total would settle it", r.RequiredN)
		} else if r.N > 0 && eff.ratio > 0 {
			why += ": an observed share sits on the edge of its band, so more requests alone will not settle it; check the expectation or the margin"
		}
	}
	return why + eff.note(r.N)
}

// pct formats a share as a percentage with three significant digits.
func pct(v float64) string {
	switch {
	case v == 0:
		return "0%"
	case v < 1e-4:
		return "<0.01%"
	}
	return fmt.Sprintf("%.3g%%", v*100)
}

func fmtInterval(iv Interval) string { return pct(iv.Lo) + "–" + pct(iv.Hi) }
