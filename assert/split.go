package assert

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
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
	Confidence float64 // 1-α; 0 means DefaultConfidence
	// Method is the FAIL interval; "" means Clopper–Pearson. PASS is always judged
	// with exact Clopper–Pearson bounds (docs/statistics.md §2.1).
	Method IntervalMethod
	Power  float64 // for the advice on INCONCLUSIVE; 0 means DefaultPower
	// Sampling says what an independent draw is (docs/statistics.md §3).
	Sampling Sampling
	// Missing is the answered requests whose bucket is unknown
	// (unattributed, or dropped by an overloaded attribution): the
	// verdict must hold wherever they went (docs/statistics.md §3.6).
	Missing int64
	// Family is the number of splits judged together whose FAILs are
	// combined by "any FAIL fails" (the windows of a split judged over
	// time, SplitWindows): each bucket's FAIL interval is then at
	// 1-α/(k·Family), Bonferroni over buckets and windows. 0 means 1.
	// PASS needs no correction (an intersection–union test over the
	// windows too), so its intervals stay at 1-2α.
	Family int
	// Looks > 0 judges the windows as the looks of a converge gate
	// (GateLevel, docs/statistics.md §10.1): every window, whichever look
	// it is, PASSes at α/Looks and FAILs by intervals at 1-α/(k·Looks),
	// with Looks fixed before the run (⌈--within / --converge-window⌉),
	// never by the outcomes. Family is then not used.
	Looks int
}

// GateLevel is the confidence every window of a converge gate with looks
// looks is judged at: the gate may stop at any of them, so α is spent
// evenly, α/looks a look, and by the union bound the whole gate's false
// PASS and false FAIL stay at most α (docs/statistics.md §10.1).
func GateLevel(confidence float64, looks int) float64 {
	if confidence == 0 {
		confidence = DefaultConfidence
	}
	if looks <= 1 {
		return confidence
	}
	return 1 - (1-confidence)/float64(looks)
}

// BucketResult is one bucket's share and its verdict.
type BucketResult struct {
	Bucket   string  `json:"bucket"`
	Count    int64   `json:"count"`
	Observed float64 `json:"observed"`
	Expected float64 `json:"expected"`
	// EffectiveCount is Count·EffectiveN/N, the draws the bucket's count is
	// worth; it, not Count, goes into the intervals.
	EffectiveCount float64 `json:"effectiveCount"`
	// PassInterval is Clopper–Pearson at SplitResult.PassLevel (each end
	// a one-sided test at α); the bucket passes when it lies inside Allowed.
	PassInterval Interval `json:"passInterval"`
	// FailInterval is at SplitResult.FailLevel with the chosen method; the
	// bucket fails when it lies entirely outside Allowed.
	FailInterval Interval `json:"failInterval"`
	Allowed      Interval `json:"allowed"` // [p-δ, p+δ] clipped to [0,1]
	Verdict      Verdict  `json:"verdict"`
}

// SplitResult is the verdict on a whole split. Every float is finite so the
// result always marshals to JSON.
type SplitResult struct {
	Verdict Verdict        `json:"verdict"`
	Buckets []BucketResult `json:"buckets"`
	Evidence
	// PassLevel (1-2α) and FailLevel (1-α/k) are the levels of the two
	// intervals; FailMethod is the FAIL interval's method.
	PassLevel  float64        `json:"passLevel"`
	FailLevel  float64        `json:"failLevel"`
	FailMethod IntervalMethod `json:"failMethod"`
	// ChiSquare is Pearson's statistic over the buckets expected to get
	// traffic, from the raw counts as if every request were an independent
	// draw; DF is their number minus one and PValue its upper tail.
	ChiSquare float64 `json:"chiSquare"`
	DF        int     `json:"df"`
	PValue    float64 `json:"pValue"`
	// DesignCorrected is the same statistic scaled by EffectiveN/N
	// (first-order Rao–Scott correction), when the two differ.
	DesignCorrected *ChiSquareTest `json:"designCorrected,omitempty"`
	// ChiSquareInfinite is set when a bucket expected to get nothing got
	// traffic: the statistic is then infinite (PValue 0) and ChiSquare only
	// sums the other buckets.
	ChiSquareInfinite bool `json:"chiSquareInfinite,omitempty"`
	Advice
	// Missing is the answered requests whose bucket is unknown, judged by
	// their worst case (docs/statistics.md §3.6).
	Missing int64 `json:"missing,omitempty"`
	// missingWhy is the reason's clause when they decide the verdict.
	missingWhy string
	Reason     string `json:"reason"`
}

// ChiSquareTest is a chi-square statistic with its p-value.
type ChiSquareTest struct {
	ChiSquare float64 `json:"chiSquare"`
	PValue    float64 `json:"pValue"`
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
		s.Method = ClopperPearson
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
	if err := s.Sampling.Validate(); err != nil {
		return err
	}
	if s.Family < 0 || s.Family > MaxWindows {
		return fmt.Errorf("windows judged together: %d, want 0 to %d", s.Family, MaxWindows)
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
		// Both per-bucket sums may be left out when only the connection
		// sizes are known: that is all the effective n needs.
		if (u.SumXX != nil || u.SumXM != nil) && (len(u.SumXX) != len(c.Buckets) || len(u.SumXM) != len(c.Buckets)) {
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

// Split judges observed counts against an expected split
// (docs/statistics.md §2). Each bucket is judged by BucketRule: PASS when
// exact one-sided tests at α show its share inside [p_i-δ_i, p_i+δ_i],
// FAIL when its interval at 1-α/k lies entirely outside. The split
// passes when every bucket passes (an intersection–union test: a split
// off by more than δ in some bucket passes with probability at most α),
// fails when any bucket fails (Bonferroni: a correct split fails with
// probability at most α), and is INCONCLUSIVE otherwise, with what would
// settle it. Counts are turned into effective draws by the sampling unit
// first (docs/statistics.md §3).
//
// No requests (n = 0) is INCONCLUSIVE, whatever the margin. Invalid input is
// INCONCLUSIVE too, with the problem as the reason: callers that want an
// error call SplitSpec.Validate and Counts.Validate first.
func Split(c Counts, s SplitSpec) SplitResult {
	s = s.withDefaults()
	r, rules, d, err := decideSplit(c, s)
	if err != nil {
		return SplitResult{Verdict: Inconclusive, Evidence: Evidence{DesignEffect: 1}, Reason: err.Error()}
	}
	r.chiSquare()
	if r.Verdict == Inconclusive && r.missingWhy == "" {
		r.Advice = d.advise(r.settle(s, rules, d))
	}
	r.Reason = r.reason(d)
	return r
}

// decideSplit is Split's decision: the effective draws and every bucket's
// verdict, without the advice and the reason, which do not change it (the
// calibration tests call it for speed, and check it against Split).
func decideSplit(c Counts, s SplitSpec) (SplitResult, []BucketRule, draws, error) {
	if err := s.Validate(); err != nil {
		return SplitResult{}, nil, draws{}, err
	}
	if s.Missing < 0 {
		return SplitResult{}, nil, draws{}, fmt.Errorf("missing: %d requests, want 0 or more", s.Missing)
	}
	if err := c.Validate(); err != nil {
		return SplitResult{}, nil, draws{}, err
	}
	names := splitNames(c, s)
	rules := bucketRules(s, names)
	d := drawsFor(c, s.Sampling, s.Expected)
	r := SplitResult{
		Evidence:   d.Evidence,
		Buckets:    make([]BucketResult, len(names)),
		PassLevel:  rules[0].PassLevel(),
		FailLevel:  rules[0].FailLevel(),
		FailMethod: s.Method,
		Verdict:    Pass,
	}
	for i, b := range names {
		x := c.Count(b)
		br := BucketResult{Bucket: b, Count: x, Expected: s.Expected[b], Allowed: rules[i].Allowed()}
		if r.N > 0 {
			br.Observed = float64(x) / float64(r.N)
		}
		br.EffectiveCount = d.scaled(x)
		j := rules[i].Judge(br.EffectiveCount, d.EffectiveN)
		if j.Verdict != Pass && s.Missing == 0 {
			// The FAIL side's own interval (failInterval): wider than
			// the PASS side's never, narrower when the design effect at
			// the expected shares measured the deviation.
			j.Fail = d.failInterval(c, slices.Index(c.Buckets, b), x, s.Method, 1-rules[i].FailLevel(), j.Fail)
			if rules[i].fails(j.Fail) {
				j.Verdict = Fail
			}
		}
		br.PassInterval, br.FailInterval, br.Verdict = j.Pass, j.Fail, j.Verdict
		r.Buckets[i] = br
		r.Verdict = Worst(r.Verdict, br.Verdict)
	}
	if s.Missing > 0 {
		r.worstCase(s.Missing, rules, d)
	}
	return r, rules, d, nil
}

// splitNames lists the buckets judged: Counts' order first (the tally's
// order), then the expected-only ones sorted.
func splitNames(c Counts, s SplitSpec) []string {
	names := slices.Clone(c.Buckets)
	for _, b := range slices.Sorted(maps.Keys(s.Expected)) {
		if !slices.Contains(names, b) {
			names = append(names, b)
		}
	}
	return names
}

// bucketRules is the rule of each bucket, in the order of names.
func bucketRules(s SplitSpec, names []string) []BucketRule {
	deltas := margins(s, names)
	rules := make([]BucketRule, len(names))
	for i, b := range names {
		rules[i] = BucketRule{Expected: s.Expected[b], Margin: deltas[i], Alpha: 1 - s.Confidence, K: len(names) * max(s.Family, 1), Method: s.Method}
	}
	return rules
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

// chiSquare fills Pearson's statistic. Buckets expected to get nothing are
// left out of the sum and the degrees of freedom (their cells are 0/0 when
// empty); if one of them got traffic the statistic is infinite, reported as
// a flag and a p-value of 0 so that JSON stays finite.
func (r *SplitResult) chiSquare() {
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
	survival := func(x float64) float64 {
		switch {
		case r.ChiSquareInfinite:
			return 0
		case r.DF > 0:
			return distuv.ChiSquared{K: float64(r.DF)}.Survival(x)
		}
		return 1
	}
	r.PValue = survival(r.ChiSquare)
	if math.Abs(r.EffectiveN-nf) > 1e-9*nf {
		x := r.ChiSquare * r.EffectiveN / nf
		r.DesignCorrected = &ChiSquareTest{ChiSquare: x, PValue: survival(x)}
	}
}

// settle is the effective draws that would settle an INCONCLUSIVE split
// if the observed shares held, with the planner's power: as a FAIL when
// some unsettled bucket's share lies outside its band (one FAIL settles
// the split), else as a PASS. With nothing observed yet, the planner's n
// for the expected split. 0 when no number of draws would (a share on the
// edge of its band).
func (r *SplitResult) settle(s SplitSpec, rules []BucketRule, d draws) float64 {
	truth := make([]float64, len(r.Buckets))
	outside := false
	for i, b := range r.Buckets {
		truth[i] = b.Observed
		if r.N == 0 {
			truth[i] = b.Expected
		}
		if b.Verdict == Inconclusive && r.N > 0 && (b.Observed < b.Allowed.Lo || b.Observed > b.Allowed.Hi) {
			outside = true
		}
	}
	passes := func(n int64) bool { return splitPassProbability(rules, truth, n) >= s.Power }
	if r.N == 0 {
		return float64(steadyN(1, maxDraws, planChecks, passes)) // the planner's n
	}
	from := int64(math.Floor(d.EffectiveN)) + 1
	if outside {
		return float64(steadyN(from, adviceLimit(float64(from)), adviceChecks, func(n int64) bool { return splitFailProbability(rules, truth, n) >= s.Power }))
	}
	return float64(steadyN(from, adviceLimit(float64(from)), adviceChecks, passes))
}

func (r *SplitResult) reason(d draws) string {
	levels := fmt.Sprintf("PASS by exact one-sided tests at %s (%s Clopper–Pearson intervals), FAIL by %s %s intervals",
		level(1-(1-r.PassLevel)/2), level(r.PassLevel), level(r.FailLevel), r.FailMethod)
	var why string
	switch r.Verdict {
	case Pass:
		why = fmt.Sprintf("every bucket's share is shown inside its allowed band (%s)", levels)
	case Fail:
		worst, dist := BucketResult{}, -1.0
		for _, b := range r.Buckets {
			if b.Verdict != Fail {
				continue
			}
			d := math.Max(b.FailInterval.Lo-b.Allowed.Hi, b.Allowed.Lo-b.FailInterval.Hi)
			if d > dist+1e-12 { // the first of equals, for a stable message
				worst, dist = b, d
			}
		}
		if worst.Bucket == "" {
			why = fmt.Sprintf("wherever the %d answered requests whose bucket is unknown went, some bucket's share falls outside its band (%s)", r.Missing, levels)
			break
		}
		why = fmt.Sprintf("bucket %s got %s of the requests (%d; %s %s interval %s), outside the allowed %s around the expected %s",
			worst.Bucket, pct(worst.Observed), worst.Count, level(r.FailLevel), r.FailMethod, fmtInterval(worst.FailInterval), fmtInterval(worst.Allowed), pct(worst.Expected))
		if r.ChiSquareInfinite && worst.Expected == 0 {
			why += "; a bucket expected to get nothing got traffic"
		}
	default:
		if r.missingWhy != "" {
			why = r.missingWhy
			break
		}
		if r.N == 0 {
			why = "no requests counted"
			break
		}
		var open []string
		for _, b := range r.Buckets {
			if b.Verdict == Inconclusive {
				open = append(open, fmt.Sprintf("%s got %s (PASS interval %s, FAIL interval %s, allowed %s)",
					b.Bucket, pct(b.Observed), fmtInterval(b.PassInterval), fmtInterval(b.FailInterval), fmtInterval(b.Allowed)))
			}
		}
		why = fmt.Sprintf("not every bucket is settled (%s): %s", levels, strings.Join(open, "; "))
	}
	if r.N > 0 {
		why += "; " + d.describe()
	}
	switch {
	case r.Missing > 0 && r.missingWhy == "" && r.Verdict == Inconclusive:
		why += fmt.Sprintf("; %d answered requests whose bucket is unknown are judged by their worst case", r.Missing)
	case r.Missing > 0 && r.missingWhy == "":
		why += fmt.Sprintf("; %d answered requests whose bucket is unknown change nothing, wherever they went", r.Missing)
	}
	if r.Verdict == Inconclusive && r.missingWhy == "" {
		switch t := r.Advice.text(); {
		case t != "":
			why += t
		case r.N > 0:
			why += ": an observed share sits on the edge of its band, so more evidence alone will not settle it; check the expectation or the margin"
		}
	}
	return why + d.diagnostic()
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

// level formats a confidence level: spent levels like 0.97843 keep their digits.
func level(v float64) string { return strconv.FormatFloat(100*v, 'g', 5, 64) + "%" }

func fmtInterval(iv Interval) string { return pct(iv.Lo) + "–" + pct(iv.Hi) }
