package assert

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// ShareSpec is how the expectations about one share (successRate, only,
// never, reached) are judged.
type ShareSpec struct {
	Confidence float64 // 1-α; 0 means DefaultConfidence
	Power      float64 // for the advice on INCONCLUSIVE; 0 means DefaultPower
	// Evidence is the share of violations a zero-tolerance PASS must rule
	// out (the scenario's statistics.margin); 0 means DefaultMargin.
	Evidence float64
	Sampling Sampling
	// Missing is the answered requests whose bucket is unknown: only,
	// never and reached must hold wherever they went (docs/statistics.md
	// §3.6). A success rate ignores it: its outcomes are all known.
	Missing int64
}

func (s ShareSpec) withDefaults() ShareSpec {
	if s.Confidence == 0 {
		s.Confidence = DefaultConfidence
	}
	if s.Power == 0 {
		s.Power = DefaultPower
	}
	if s.Evidence == 0 {
		s.Evidence = DefaultMargin
	}
	return s
}

func (s ShareSpec) validate() error {
	switch {
	case !(s.Confidence > 0 && s.Confidence < 1):
		return fmt.Errorf("confidence %g: want a level in (0,1)", s.Confidence)
	case !(s.Power > 0 && s.Power < 1):
		return fmt.Errorf("power %g: want a probability in (0,1)", s.Power)
	case !(s.Evidence > 0 && s.Evidence < 1):
		return fmt.Errorf("zero-tolerance margin %g: want a share in (0,1)", s.Evidence)
	case s.Missing < 0:
		return fmt.Errorf("missing: %d requests, want 0 or more", s.Missing)
	}
	return s.Sampling.Validate()
}

// validateWith is the check every share expectation ends with: the spec,
// then the counts.
func (s ShareSpec) validateWith(c Counts) error {
	if err := s.validate(); err != nil {
		return err
	}
	return c.Validate()
}

// Result is the verdict of an expectation about one share or rate.
type Result struct {
	Verdict  Verdict `json:"verdict"`
	Observed float64 `json:"observed"` // the share/rate measured
	// Interval's ends are exact one-sided Clopper–Pearson bounds at Level
	// (together a two-sided interval at 2·Level-1).
	Interval *Interval `json:"interval,omitempty"`
	Level    float64   `json:"level,omitempty"`
	*Evidence
	// MinShare is the share below which reached calls a bucket missing,
	// and MinShareFrom where it came from.
	MinShare     float64 `json:"minShare,omitempty"`
	MinShareFrom string  `json:"minShareFrom,omitempty"`
	Advice
	Reason string `json:"reason"`
}

// shareRule judges the share of violations (requests outside a set, to a
// set, or failed) against a bound (docs/statistics.md §4). With bound > 0
// it is a one-sided test each way at α: PASS when the exact upper bound is
// at most the bound, FAIL when the exact lower bound exceeds it. With
// bound 0 it is zero tolerance: any violation FAILs, and none PASSes once
// the upper bound is at most evidence.
type shareRule struct {
	bound, alpha, evidence float64
}

// judge judges v of n effective draws.
func (r shareRule) judge(v, n float64) (Verdict, Interval) {
	iv := Interval{cpLower(v, n, r.alpha), cpUpper(v, n, r.alpha)}
	switch {
	case r.bound == 0 && v >= countTiny:
		return Fail, iv
	case r.bound == 0 && iv.Hi <= r.evidence:
		return Pass, iv
	case r.bound == 0:
		return Inconclusive, iv
	case iv.Hi <= r.bound:
		return Pass, iv
	case iv.Lo > r.bound:
		return Fail, iv
	}
	return Inconclusive, iv
}

// cleanDraws is the smallest number of draws at which a clean run (no
// violation at all) passes: 1-α^{1/n} <= the bound.
func (r shareRule) cleanDraws() int64 {
	return steadyN(1, maxDraws, planChecks, func(n int64) bool { v, _ := r.judge(0, float64(n)); return v == Pass })
}

// settle is the effective draws at which the verdict settles with the
// given power if the observed violation share q held: as a PASS below the
// bound, as a FAIL above it. 0 when q sits on the bound.
func (r shareRule) settle(q float64, from int64, power float64) float64 {
	switch {
	case r.bound == 0 || q == 0:
		// Zero tolerance is only INCONCLUSIVE while clean; a clean share
		// passes deterministically once the bound is small enough.
		return float64(max(r.cleanDraws(), from))
	case q < r.bound:
		return float64(steadyN(from, adviceLimit(float64(from)), adviceChecks, func(n int64) bool {
			nf := float64(n)
			last := firstTrue(0, n, guessX(n, r.bound, r.alpha, false), func(v int64) bool { return cpUpper(float64(v), nf, r.alpha) > r.bound }) - 1
			return binomCDF(last, n, q) >= power
		}))
	case q > r.bound:
		return float64(steadyN(from, adviceLimit(float64(from)), adviceChecks, func(n int64) bool {
			nf := float64(n)
			first := firstTrue(0, n, guessX(n, r.bound, r.alpha, true), func(v int64) bool { return cpLower(float64(v), nf, r.alpha) > r.bound })
			return 1-binomCDF(first-1, n, q) >= power
		}))
	}
	return 0
}

// judgeShare applies a shareRule to counts: v of the n requests violate.
// what words the violation for the reason ("failed", "went outside
// {c2}"), detail adds to it, and rule names the expectation's setting the
// bound comes from.
func judgeShare(c Counts, v int64, bound float64, s ShareSpec, what, detail, rule string) Result {
	d := drawsFor(c, s.Sampling)
	n := d.N
	r := Result{Evidence: &d.Evidence, Level: s.Confidence}
	rl := shareRule{bound: bound, alpha: 1 - s.Confidence, evidence: s.Evidence}
	if n == 0 {
		r.Verdict = Inconclusive
		r.Advice = d.advise(float64(rl.cleanDraws()))
		r.Reason = "no requests counted" + r.Advice.text()
		return r
	}
	q := float64(v) / float64(n)
	verdict, iv := rl.judge(d.scaled(v), d.EffectiveN)
	missingWhy := ""
	if s.Missing > 0 {
		verdict, iv, missingWhy = shareWorstCase(rl, v, n, s.Missing, d.ratio())
	}
	r.Verdict, r.Observed, r.Interval = verdict, q, &iv
	conf := level(s.Confidence)
	head := fmt.Sprintf("%d of %d requests (%s) %s%s", v, n, pct(q), what, detail)
	var why string
	switch {
	case bound == 0 && verdict == Fail:
		why = fmt.Sprintf("zero tolerance: %s; %s allows none", head, rule)
	case bound == 0 && verdict == Pass:
		why = fmt.Sprintf("zero tolerance: none of %d requests %s%s, which shows at %s confidence that the share that would is below %s, within the %s a PASS must show (statistics.margin)",
			n, what, detail, conf, pct(iv.Hi), pct(s.Evidence))
	case bound == 0:
		why = fmt.Sprintf("zero tolerance: none of %d requests %s%s yet, but that only shows at %s confidence that the share that would is below %s; a PASS must show it below %s (statistics.margin)",
			n, what, detail, conf, pct(iv.Hi), pct(s.Evidence))
	case verdict == Pass:
		why = fmt.Sprintf("%s: at %s confidence that share is at most %s (exact one-sided bound), within the %s %s allows", head, conf, pct(iv.Hi), pct(bound), rule)
	case verdict == Fail:
		why = fmt.Sprintf("%s: at %s confidence that share is at least %s (exact one-sided bound), above the %s %s allows", head, conf, pct(iv.Lo), pct(bound), rule)
	default:
		why = fmt.Sprintf("%s: at %s confidence that share lies between %s and %s, which straddles the %s %s allows", head, conf, pct(iv.Lo), pct(iv.Hi), pct(bound), rule)
	}
	why += "; " + d.describe()
	switch {
	case missingWhy != "":
		why += "; " + missingWhy
	case s.Missing > 0:
		why += fmt.Sprintf("; %d answered requests whose bucket is unknown change nothing, wherever they went", s.Missing)
	}
	if verdict == Inconclusive && missingWhy == "" {
		r.Advice = d.advise(rl.settle(d.scaled(v)/d.EffectiveN, int64(math.Floor(d.EffectiveN))+1, s.Power))
		if t := r.Advice.text(); t != "" {
			why += t
		} else {
			why += ": the observed share sits on the bound, so more evidence alone will not settle it"
		}
	}
	r.Reason = why + d.diagnostic()
	return r
}

// SuccessRate is a one-sided test of the success rate against a floor,
// judged as the share of failures against 1-atLeast
// (docs/statistics.md §4): PASS when the exact one-sided lower bound of the
// success rate at the confidence is at least atLeast, FAIL when the upper
// bound is below it, else INCONCLUSIVE with advice. atLeast = 1 is zero
// tolerance: any failure FAILs, and a clean run PASSes once it shows the
// failure rate below s.Evidence. outcomes counts every request once (any
// bucket names); its Units give the effective draws.
func SuccessRate(successes int64, outcomes Counts, atLeast float64, s ShareSpec) Result {
	s = s.withDefaults()
	n := outcomes.Total()
	var err error
	switch {
	case successes < 0 || successes > n:
		err = fmt.Errorf("success rate: %d successes out of %d requests", successes, n)
	case !(atLeast >= 0 && atLeast <= 1):
		err = fmt.Errorf("success rate: floor %g, want a share in [0,1]", atLeast)
	default:
		err = s.validateWith(outcomes)
	}
	if err != nil {
		return Result{Verdict: Inconclusive, Reason: err.Error()}
	}
	detail := ""
	if n > 0 {
		detail = fmt.Sprintf(" (success rate %s)", pct(float64(successes)/float64(n)))
	}
	s.Missing = 0 // every outcome is known
	// Failures follow the routing (a broken backend fails the requests
	// routed to it): their dependence is the routing's, which keeps n*
	// independent of the outcomes (docs/statistics.md §3.3).
	s.Sampling.routingOnly = true
	r := judgeShare(outcomes, n-successes, 1-atLeast, s, "failed", detail, "successRate atLeast "+pct(atLeast))
	// Report the success rate, not the failure share judged.
	if r.Interval != nil {
		r.Observed = 1 - r.Observed
		r.Interval = &Interval{1 - r.Interval.Hi, 1 - r.Interval.Lo}
	}
	return r
}

// Only checks the share of requests that went outside the named buckets
// against margin; margin 0 is zero tolerance (docs/statistics.md §4).
func Only(c Counts, buckets []string, margin float64, s ShareSpec) Result {
	return bounded(c, buckets, margin, s, false)
}

// Never checks the share of requests that went to the named buckets, in
// the same way as Only checks the share outside them.
func Never(c Counts, buckets []string, margin float64, s ShareSpec) Result {
	return bounded(c, buckets, margin, s, true)
}

// bounded judges the share of requests inside (Never) or outside (Only)
// the named set against [0, margin].
func bounded(c Counts, set []string, margin float64, s ShareSpec, inside bool) Result {
	s = s.withDefaults()
	set = dedupe(set)
	var err error
	switch {
	case len(set) == 0:
		err = fmt.Errorf("no buckets named")
	case !(margin >= 0 && margin < 1):
		err = fmt.Errorf("margin %g: want a share in [0,1)", margin)
	default:
		err = s.validateWith(c)
	}
	if err != nil {
		return Result{Verdict: Inconclusive, Reason: err.Error()}
	}
	var v int64
	var hits []int
	for i, b := range c.Buckets {
		if slices.Contains(set, b) == inside {
			v += c.N[i]
			if c.N[i] > 0 {
				hits = append(hits, i)
			}
		}
	}
	what := "went outside {" + strings.Join(set, ", ") + "}"
	rule := "only"
	if inside {
		what = "went to {" + strings.Join(set, ", ") + "}"
		rule = "never"
	}
	detail := ""
	if len(hits) > 0 {
		detail = " (" + listCounts(c, hits) + ")"
	}
	return judgeShare(c, v, margin, s, what, detail, fmt.Sprintf("%s with margin %s", rule, pct(margin)))
}

// MinShare is the share below which reached calls an unseen bucket
// missing, and where it came from.
type MinShare struct {
	Share float64
	// From says where Share came from; "" means the default, half an
	// equal share, 1/(2k).
	From string
}

// Reached passes when every named bucket got at least one request
// (docs/statistics.md §4). A named bucket that got none FAILs when the
// exact one-sided upper bound at 1-α/k of its share, from 0 of the
// effective draws, is below the minimum share it should have
// (Bonferroni over the k named buckets): a bucket that really has at least
// that share goes unseen that long with probability at most α/k.
// Otherwise INCONCLUSIVE, with what would decide it.
//
// Traffic to buckets that are not named is Only's business, not Reached's.
func Reached(c Counts, buckets []string, ms MinShare, s ShareSpec) Result {
	s = s.withDefaults()
	buckets = dedupe(buckets)
	k := float64(len(buckets))
	if ms.Share == 0 && len(buckets) > 0 {
		ms = MinShare{Share: 1 / (2 * k), From: fmt.Sprintf("half an equal share of the %d named buckets", len(buckets))}
	}
	var err error
	switch {
	case len(buckets) == 0:
		err = fmt.Errorf("reached: no buckets named")
	case !(ms.Share > 0 && ms.Share <= 1):
		err = fmt.Errorf("reached: minimum share %g, want a share in (0,1]", ms.Share)
	default:
		err = s.validateWith(c)
	}
	if err != nil {
		return Result{Verdict: Inconclusive, Reason: err.Error()}
	}
	d := drawsFor(c, s.Sampling)
	alpha := 1 - s.Confidence
	// The unseen bucket's share is shown below ms.Share with 0 of n draws
	// once 1-(α/k)^{1/n} < ms.Share.
	missingShown := func(n float64) bool { return cpUpper(0, n, alpha/k) < ms.Share }
	need := float64(ReachedFailDraws(len(buckets), ms.Share, s.Confidence))
	r := Result{Evidence: &d.Evidence, Level: 1 - alpha/k, MinShare: ms.Share, MinShareFrom: ms.From}
	var missing, seen []string
	minSeen := 1.0
	for _, b := range buckets {
		x := c.Count(b)
		if x == 0 {
			missing = append(missing, b)
		} else {
			seen = append(seen, fmt.Sprintf("%s=%d", b, x))
		}
		if d.N > 0 {
			minSeen = math.Min(minSeen, float64(x)/float64(d.N))
		}
	}
	if d.N > 0 {
		r.Observed = minSeen
	}
	limit := fmt.Sprintf("minimum share %s (%s)", pct(ms.Share), ms.From)
	switch {
	case d.N == 0:
		r.Verdict = Inconclusive
		r.Advice = d.advise(math.Max(need, float64(ReachedDraws(slices.Repeat([]float64{ms.Share}, len(buckets)), s.Power))))
		r.Reason = fmt.Sprintf("no requests counted to show whether %s are reached", strings.Join(buckets, ", ")) + r.Advice.text()
		return r
	case len(missing) == 0:
		r.Verdict = Pass
		r.Reason = fmt.Sprintf("every named bucket got traffic: %s", strings.Join(seen, ", "))
	case s.Missing >= int64(len(missing)):
		// Each unseen bucket may have served one of the requests whose
		// bucket is unknown (docs/statistics.md §3.6).
		r.Verdict = Inconclusive
		r.Reason = fmt.Sprintf("%s got no request, but %d answered requests whose bucket is unknown decide it: they may have gone there", strings.Join(missing, ", "), s.Missing)
	case missingShown(d.EffectiveN):
		r.Verdict = Fail
		hi := cpUpper(0, d.EffectiveN, alpha/k)
		r.Interval = &Interval{0, hi}
		r.Reason = fmt.Sprintf("%s got no request: its share is below %s at %s confidence, under the %s", strings.Join(missing, ", "), pct(hi), level(1-alpha/k), limit)
	default:
		r.Verdict = Inconclusive
		hi := cpUpper(0, d.EffectiveN, alpha/k)
		r.Interval = &Interval{0, hi}
		r.Advice = d.advise(need)
		r.Reason = fmt.Sprintf("%s got no request yet, but that only shows its share below %s at %s confidence, not below the %s", strings.Join(missing, ", "), pct(hi), level(1-alpha/k), limit)
	}
	r.Reason += "; " + d.describe() + r.Advice.text() + d.diagnostic()
	return r
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

// MirrorSampling is the sampling unit of a mirror expectation: Envoy
// decides for every request whether to mirror it, so the requests are
// independent draws whatever connections carried them.
func MirrorSampling() Sampling {
	return Sampling{Balancing: PerRequest, Reason: "mirroring is decided per request (Envoy), whatever connection carried it"}
}

// Mirror judges an N% mirror (docs/statistics.md §4): mirrored of the
// primary requests were also seen at the mirror target. It is a split of
// two buckets, mirrored and not-mirrored, against s, whose Expected are
// MirrorModel's shares and whose margin, relative or not, applies as to
// any split; the sampling unit is always MirrorSampling. How mirrored and
// primaries are counted is the caller's business.
func Mirror(mirrored, primaries int64, s SplitSpec) SplitResult {
	if mirrored < 0 || mirrored > primaries {
		return SplitResult{Verdict: Inconclusive, Evidence: Evidence{DesignEffect: 1},
			Reason: fmt.Sprintf("mirror: %d mirrored of %d primary requests", mirrored, primaries)}
	}
	s.Sampling = MirrorSampling()
	c := Counts{Buckets: []string{BucketMirrored, BucketNotMirrored}, N: []int64{mirrored, primaries - mirrored}}
	return Split(c, s)
}
