package assert

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// handPower2 is P(PASS) of a two-bucket split with n independent draws
// when the truth equals the expectation, from the per-bucket rule itself
// applied to every outcome within 7 standard deviations of the mean (the
// rest has probability below 1e-11, left out, so the sum never overstates
// the power) and binomial probabilities from log-factorials.
func handPower2(s SplitSpec, n int64, lf []float64) float64 {
	names := []string{"a", "b"}
	s = s.withDefaults()
	p := s.Expected["a"]
	rules := bucketRules(s, names)
	sd := math.Sqrt(float64(n) * p * (1 - p))
	lo := max(int64(float64(n)*p-7*sd), 0)
	hi := min(int64(float64(n)*p+7*sd)+1, n)
	total := 0.0
	for x := lo; x <= hi; x++ {
		if rules[0].Passes(float64(x), float64(n)) && rules[1].Passes(float64(n-x), float64(n)) {
			total += math.Exp(lf[n] - lf[x] - lf[n-x] + float64(x)*math.Log(p) + float64(n-x)*math.Log1p(-p))
		}
	}
	return total
}

// The planner's n for two buckets, checked by exact binomial sums: the
// power reaches the target at n and stays there over the next tenth
// (every n checked), and a tenth fewer draws would not do.
func TestRequiredDrawsExactTwoBuckets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		s    SplitSpec
	}{
		{"50/50 ±5%", SplitSpec{Expected: map[string]float64{"a": .5, "b": .5}}},
		{"50/50 ±10% at 90%", SplitSpec{Expected: map[string]float64{"a": .5, "b": .5}, Margin: 0.1, Confidence: 0.9}},
		// Issue 9 defect 6: 95/5 at margin 2% had power 0.782.
		{"95/5 ±2%", SplitSpec{Expected: map[string]float64{"a": .95, "b": .05}, Margin: 0.02}},
		{"70/30 ±5% at 99%, power 90%", SplitSpec{Expected: map[string]float64{"a": .7, "b": .3}, Confidence: 0.99, Power: 0.9}},
		{"80/20 relative 10%", SplitSpec{Expected: map[string]float64{"a": .8, "b": .2}, Margin: 0.1, Relative: true}},
	} {
		n := RequiredDraws(c.s)
		power := c.s.withDefaults().Power
		lf := logFactorials(int(n + n/10))
		for m := n; m <= n+n/10; m++ {
			if p := handPower2(c.s, m, lf); p < power {
				t.Errorf("%s: planned %d, but at %d the power is %.4f < %g", c.name, n, m, p, power)
				break
			}
		}
		if p := handPower2(c.s, n*9/10, lf); p >= power {
			t.Errorf("%s: planned %d, but %d draws already have power %.4f", c.name, n, n*9/10, p)
		}
		t.Logf("%s: %d draws", c.name, n)
	}
}

// Issue 9 defect 6: with three or more buckets the planner's n passes a
// correct split with at least the stated power; by seeded simulation with
// gonum's binomial sampler, for both interval methods.
func TestRequiredDrawsSimulatedPower(t *testing.T) {
	t.Parallel()
	r := sampler{src: rand.NewPCG(21, 22)}
	five := calSplit{names: []string{"a", "b", "c", "d", "e"}, p: []float64{.2, .2, .2, .2, .2}}
	for _, method := range []IntervalMethod{Wilson, ClopperPearson} {
		s := SplitSpec{Expected: five.expected(), Margin: 0.1, Method: method}
		n := RequiredDraws(s)
		const draws = 3000
		table := newVerdictTable(bucketRules(s.withDefaults(), five.names))
		pass := 0
		for i := range draws {
			x := r.multinomial(n, five.p)
			v := table.split(x, n)
			if i < 100 {
				verifyAgainstSplit(t, calCell{split: five, margin: 0.1, confidence: 0.95, method: method}, table, Counts{Buckets: five.names, N: x}, Sampling{}, n)
			}
			if v == Pass {
				pass++
			}
		}
		got := float64(pass) / draws
		if got < 0.8-3*math.Sqrt(0.8*0.2/draws) {
			t.Errorf("5 equal buckets ±10%% %s: planned %d, PASS %.4f < 0.8", method, n, got)
		}
		t.Logf("5 equal buckets ±10%% %s: planned %d, PASS %.4f", method, n, got)
	}
}

// Issue 9 defect 5: PASS needs no Bonferroni over buckets, so a bucket's
// PASS region does not depend on k, and five buckets cost barely more than
// one of them alone.
func TestPassDoesNotDependOnK(t *testing.T) {
	t.Parallel()
	for k := 1; k <= 8; k++ {
		r := BucketRule{Expected: 0.2, Margin: 0.05, Alpha: 0.05, K: k}
		a, b := r.passRegion(1000)
		r1 := BucketRule{Expected: 0.2, Margin: 0.05, Alpha: 0.05, K: 1}
		a1, b1 := r1.passRegion(1000)
		if a != a1 || b != b1 {
			t.Errorf("k=%d: PASS region [%d,%d], k=1 [%d,%d]", k, a, b, a1, b1)
		}
	}
}

func TestCleanAndReachedDraws(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		got  int64
		want float64 // the closed form, rounded up
	}{
		{"successRate 99% at 95%", CleanDraws(0.01, 0.95, 0), math.Log(0.05) / math.Log(0.99)},
		{"successRate 99.9% at 99%", CleanDraws(0.001, 0.99, 0), math.Log(0.01) / math.Log(0.999)},
		{"zero tolerance, margin 5%", CleanDraws(0, 0.95, 0.05), math.Log(0.05) / math.Log(0.95)},
		{"zero tolerance, margin 1%", CleanDraws(0, 0.95, 0.01), math.Log(0.05) / math.Log(0.99)},
		{"never with margin 2%", CleanDraws(0.02, 0.9, 0), math.Log(0.1) / math.Log(0.98)},
		// 1-2·0.5^n >= 0.8: n >= log2(10) = 3.32.
		{"reached 50/50", ReachedDraws([]float64{0.5, 0.5}, 0.8), math.Log2(10)},
		// 1-0.99^n-0.01^n >= 0.8: n >= ln 0.2/ln 0.99 = 160.1.
		{"reached 99/1", ReachedDraws([]float64{0.99, 0.01}, 0.8), math.Log(0.2) / math.Log(0.99)},
		{"reached fails after", ReachedFailDraws(2, 0.25, 0.95), math.Log(0.025) / math.Log(0.75)},
	}
	for _, c := range cases {
		if want := int64(math.Ceil(c.want)); c.got != want {
			t.Errorf("%s: %d, want %d (%.3f)", c.name, c.got, want, c.want)
		}
	}
}

func TestPlanSequential(t *testing.T) {
	t.Parallel()
	p := PlanSequential(1000, 4, 0.95)
	if len(p.Looks) != 4 || p.Looks[0] != 250 || p.Looks[3] != 1000 || p.Rule != SequentialRule {
		t.Fatalf("plan %+v", p)
	}
	// Lan–DeMets O'Brien–Fleming: cumulative α(t) = 2(1-Φ(z_{.975}/√t)),
	// checked against gonum's normal tail rather than the Erfc the code
	// uses; the increments add up to exactly α and shrink towards the start.
	spent := 0.0
	prev := 1.0
	for j, c := range p.Confidence {
		inc := 1 - c
		if inc <= 0 || inc >= 0.05 {
			t.Errorf("look %d spends %g", j, inc)
		}
		if j > 0 && inc < 1-prev {
			t.Errorf("look %d spends less than look %d", j, j-1)
		}
		prev = c
		spent += inc
	}
	near(t, "total α", spent, 0.05, 1e-12)
	near(t, "first look α", 1-p.Confidence[0], 2*distuv.UnitNormal.Survival(1.959963984540054/0.5), 1e-12)
	near(t, "second look α", 1-p.Confidence[1], 2*distuv.UnitNormal.Survival(1.959963984540054*math.Sqrt2)-(1-p.Confidence[0]), 1e-12)
	// Issue 9 defect 3: with 5 looks at 0.95 the last look judges at
	// 1-(0.05-2Φ̄(1.959964/√0.8)) = 0.97843, not at 0.95.
	levels := SpendingLevels(5, 0.95)
	near(t, "last of 5 looks", levels[4], 1-(0.05-2*distuv.UnitNormal.Survival(1.959963984540054/math.Sqrt(0.8))), 1e-12)
	near(t, "last of 5 looks, as the issue quotes it", levels[4], 0.97843, 5e-6)
	// Each expectation's own confidence gets its own levels.
	if l := SpendingLevels(5, 0.999); !(l[4] > 0.999 && l[0] > l[4]) {
		t.Errorf("levels at 0.999: %v", l)
	}

	if p := PlanSequential(1000, 1, 0.95); len(p.Looks) != 1 || p.Confidence[0] != 0.95 {
		t.Errorf("one look %+v", p)
	}
	if p := PlanSequential(3, 10, 0); len(p.Looks) != 3 || p.Looks[2] != 3 {
		t.Errorf("more looks than requests %+v", p)
	}
	if p := PlanSequential(0, 0, 0.9); len(p.Looks) != 1 {
		t.Errorf("nothing planned %+v", p)
	}
}

// A perfect run of the size the planner calls enough PASSes: the counts
// exactly as expected (rounded to whole requests), for every split of the
// calibration grid, and a clean run of CleanDraws for a success rate.
func TestPerfectRunAtPlannedN(t *testing.T) {
	t.Parallel()
	for _, split := range calSplits() {
		for _, m := range calMargins {
			for _, conf := range calConfidences {
				s := SplitSpec{Expected: split.expected(), Margin: m, Confidence: conf}
				n := RequiredDraws(s)
				c := Counts{Buckets: split.names, N: make([]int64, len(split.p))}
				var left = n
				for i, p := range split.p {
					c.N[i] = int64(math.Round(p * float64(n)))
					left -= c.N[i]
				}
				c.N[0] += left
				if r := Split(c, s); r.Verdict != Pass {
					t.Errorf("%s ±%g conf %g: perfect run of the planned %d: %v (%s)", split.name, m, conf, n, r.Verdict, r.Reason)
				}
			}
		}
	}
	n := CleanDraws(0.01, 0.95, 0)
	if r := SuccessRate(n, outcomes(n, n), 0.99, ShareSpec{}); r.Verdict != Pass {
		t.Errorf("perfect run of %d: %v", n, r.Verdict)
	}
	// Before any request, advice under per-connection balancing is the
	// planner's n in connections.
	r := Split(Counts{}, SplitSpec{Expected: half, Sampling: perConn(5)})
	if want := RequiredDraws(SplitSpec{Expected: half}); r.RequiredConnections != want || r.RequiredN != 0 {
		t.Errorf("n=0 per connection: %d requests / %d connections, want %d connections", r.RequiredN, r.RequiredConnections, want)
	}
}
