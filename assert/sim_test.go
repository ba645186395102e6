package assert

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Seeded Monte Carlo checks of the error rates the verdicts promise. Rates
// are compared with α plus three Monte Carlo standard errors, so a correct
// method fails these by chance about once in a thousand seeds, and the
// seeds are fixed.

const simReps = 2000

func slack(p float64, reps int) float64 { return 3 * math.Sqrt(p*(1-p)/float64(reps)) }

// multinomial draws n requests over buckets with the given true shares.
func multinomial(r *rand.Rand, names []string, p []float64, n int64) Counts {
	c := Counts{Buckets: names, N: make([]int64, len(p))}
	for range n {
		c.N[pick(r, p)]++
	}
	return c
}

func pick(r *rand.Rand, p []float64) int {
	u := r.Float64()
	for i, q := range p {
		if u < q {
			return i
		}
		u -= q
	}
	return len(p) - 1
}

func rate(reps int, f func() bool) float64 {
	k := 0
	for range reps {
		if f() {
			k++
		}
	}
	return float64(k) / float64(reps)
}

var (
	simNames    = []string{"a", "b", "c"}
	simExpected = map[string]float64{"a": 0.5, "b": 0.3, "c": 0.2}
)

func TestSimFalseFail(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	spec := SplitSpec{Expected: simExpected, Margin: 0.05, Confidence: 0.95}
	alpha := 0.05
	for _, truth := range []struct {
		name string
		p    []float64
	}{
		{"exactly as expected", []float64{0.5, 0.3, 0.2}},
		// The hardest correct split: two buckets on the edge of their band.
		{"on the edge of the margin", []float64{0.55, 0.25, 0.2}},
	} {
		fails := rate(simReps, func() bool { return Split(multinomial(r, simNames, truth.p, 1000), spec).Verdict == Fail })
		t.Logf("%s: false FAIL %.4f", truth.name, fails)
		if fails > alpha+slack(alpha, simReps) {
			t.Errorf("%s: false-FAIL rate %.4f > α %.2f", truth.name, fails, alpha)
		}
	}
}

func TestSimPlannerN(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	spec := SplitSpec{Expected: simExpected, Margin: 0.05, Confidence: 0.95, Power: 0.8}
	n := RequiredN(simExpected, 0.05, false, 0.95, 0.8, 1)
	alpha := 0.05
	for _, truth := range []struct {
		name string
		p    []float64
	}{
		{"off by 2δ", []float64{0.6, 0.2, 0.2}},
		{"just outside the margin", []float64{0.551, 0.249, 0.2}},
	} {
		passes := rate(simReps, func() bool { return Split(multinomial(r, simNames, truth.p, n), spec).Verdict == Pass })
		t.Logf("%s at n=%d: false PASS %.4f", truth.name, n, passes)
		if passes > alpha+slack(alpha, simReps) {
			t.Errorf("%s: false-PASS rate %.4f > α %.2f", truth.name, passes, alpha)
		}
	}
	// And the planner's promise: a correct mesh passes with the stated power.
	passes := rate(simReps, func() bool { return Split(multinomial(r, simNames, []float64{0.5, 0.3, 0.2}, n), spec).Verdict == Pass })
	t.Logf("correct split at n=%d: PASS %.4f", n, passes)
	if passes < 0.8-slack(0.8, simReps) {
		t.Errorf("power at the planner's n: %.4f < 0.8", passes)
	}
}

// sticky draws C connections of m requests, each connection entirely in
// one bucket drawn from the true split, as a per-connection balancer with
// keep-alive does.
func sticky(r *rand.Rand, names []string, p []float64, conns int, m int64) Counts {
	c := Counts{Buckets: names, N: make([]int64, len(p))}
	u := &UnitStats{Units: int64(conns), SumXX: make([]float64, len(p)), SumXM: make([]float64, len(p))}
	mf := float64(m)
	for range conns {
		i := pick(r, p)
		c.N[i] += m
		u.SumMM += mf * mf
		u.SumXX[i] += mf * mf
		u.SumXM[i] += mf * mf
	}
	c.Units = u
	return c
}

func TestSimConnectionClustering(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	names := []string{"c2", "c3"}
	spec := SplitSpec{Expected: half, Margin: 0.05}
	alpha := 0.05
	naive := func(c Counts) Verdict { c.Units = nil; return Split(c, spec).Verdict }
	robust := func(c Counts) Verdict { return Split(c, spec).Verdict }

	// 20 keep-alive connections × 50 requests against a mesh that is off by
	// 2δ (60/40). Ignoring connections, 1000 requests look precise and the
	// lucky 10/10 connection draws (P ≈ 0.117) pass; the design effect
	// stops that.
	var naivePass, robustPass int
	for range simReps {
		c := sticky(r, names, []float64{0.6, 0.4}, 20, 50)
		if naive(c) == Pass {
			naivePass++
		}
		if robust(c) == Pass {
			robustPass++
		}
	}
	np, rp := float64(naivePass)/simReps, float64(robustPass)/simReps
	t.Logf("off by 2δ, 20 sticky connections: false PASS naive %.4f, with design effect %.4f", np, rp)
	if np <= alpha+slack(alpha, simReps) {
		t.Errorf("naive false-PASS %.4f: the scenario does not show the problem", np)
	}
	if rp > alpha+slack(alpha, simReps) {
		t.Errorf("false-PASS with design effect %.4f > α", rp)
	}

	// A correct mesh (50/50) on the same connections: the naive test fails
	// it about half the time, the corrected one at most α.
	var naiveFail, robustFail int
	for range simReps {
		c := sticky(r, names, []float64{0.5, 0.5}, 20, 50)
		if naive(c) == Fail {
			naiveFail++
		}
		if robust(c) == Fail {
			robustFail++
		}
	}
	nf, rf := float64(naiveFail)/simReps, float64(robustFail)/simReps
	t.Logf("correct, 20 sticky connections: false FAIL naive %.4f, with design effect %.4f", nf, rf)
	if nf <= alpha+slack(alpha, simReps) {
		t.Errorf("naive false-FAIL %.4f: the scenario does not show the problem", nf)
	}
	if rf > alpha+slack(alpha, simReps) {
		t.Errorf("false-FAIL with design effect %.4f > α", rf)
	}
}

// Early stopping: stop at the first look with PASS or FAIL; the error rates
// over the whole run must stay within α.
func TestSimSequential(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	names := []string{"c2", "c3"}
	alpha := 0.05
	const looks = 4
	// The spending depends only on the looks and α, so the last look's
	// confidence, and from it the total, can be read off any plan.
	probe := PlanSequential(looks, looks, 0.95)
	total := RequiredN(half, 0.05, false, probe.Confidence[looks-1], 0.8, 1)
	plan := PlanSequential(total, looks, 0.95)

	run := func(p []float64) Verdict {
		c := Counts{Buckets: names, N: make([]int64, 2)}
		var done int64
		for j, at := range plan.Looks {
			for ; done < at; done++ {
				c.N[pick(r, p)]++
			}
			v := Split(c, SplitSpec{Expected: half, Margin: 0.05, Confidence: plan.Confidence[j]}).Verdict
			if v != Inconclusive {
				return v
			}
		}
		return Inconclusive
	}
	passes := rate(simReps, func() bool { return run([]float64{0.551, 0.449}) == Pass })
	fails := rate(simReps, func() bool { return run([]float64{0.55, 0.45}) == Fail })
	t.Logf("sequential, %d looks up to n=%d: false PASS %.4f, false FAIL %.4f", looks, total, passes, fails)
	if passes > alpha+slack(alpha, simReps) || fails > alpha+slack(alpha, simReps) {
		t.Errorf("sequential error rates PASS %.4f FAIL %.4f exceed α", passes, fails)
	}
}
