package assert

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// The references below were computed with python3 from first principles
// (the formulas are in the comments), not with this package.

// oneEach puts every request on its own connection: m_j = 1, the sums a
// tally holds for independent draws (SumMM = SumXX = SumXM = n, x).
func oneEach(c Counts) Counts {
	u := &UnitStats{Units: c.Total(), SumMM: float64(c.Total())}
	for _, x := range c.N {
		u.SumXX = append(u.SumXX, float64(x))
		u.SumXM = append(u.SumXM, float64(x))
	}
	c.Units = u
	return c
}

// (1) Independent draws: the textbook two-proportion tests (Agresti 2013,
// §3.1.2–3.1.3): the Wald interval of p_B - p_A with the unpooled
// SE = sqrt(pA(1-pA)/nA + pB(1-pB)/nB), and the z test with the pooled
// SE0 = sqrt(p̄(1-p̄)(1/nA + 1/nB)), p̄ = (xA+xB)/(nA+nB), p = erfc(|z|/√2).
func TestCompareIndependentIsTextbook(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                         string
		a, b                         Counts
		diff, se, lo, hi, z, p       float64
		significant                  bool
		countA, countB               int64
		bucket                       string
		withUnits                    bool
		wantVarianceA, wantVarianceB VarianceMethod
	}{
		// 520/1000 vs 470/1000: d = -0.05;
		// SE = sqrt(.52*.48/1000 + .47*.53/1000) = 0.022331591971912795,
		// CI = d ± 1.9599639845400536*SE = (-0.09376911598239292, -0.006230884017607172);
		// p̄ = 990/2000 = 0.495, SE0 = sqrt(.495*.505*2/1000) = 0.0223595617130569,
		// z = -0.05/SE0 = -2.2361797892846207, p = 0.025339996552342234.
		{name: "520/1000 vs 470/1000, one request a connection", a: oneEach(counts("c1", 520, "c2", 480)), b: oneEach(counts("c1", 470, "c2", 530)),
			bucket: "c1", countA: 520, countB: 470, diff: -0.05, se: 0.022331591971912795, lo: -0.09376911598239292, hi: -0.006230884017607172,
			z: -2.2361797892846207, p: 0.025339996552342234, significant: true, wantVarianceA: VarianceIndependent, wantVarianceB: VarianceIndependent},
		// The same counts without per-connection statistics: binomial, the same numbers.
		{name: "520/1000 vs 470/1000, no sums", a: counts("c1", 520, "c2", 480), b: counts("c1", 470, "c2", 530),
			bucket: "c1", countA: 520, countB: 470, diff: -0.05, se: 0.022331591971912795, lo: -0.09376911598239292, hi: -0.006230884017607172,
			z: -2.2361797892846207, p: 0.025339996552342234, significant: true, wantVarianceA: VarianceBinomial, wantVarianceB: VarianceBinomial},
		// 45/60 vs 62/110, unequal n: d = 62/110 - 45/60 = -0.1863636363636364;
		// SE = sqrt(.75*.25/60 + (62/110)(48/110)/110) = 0.07321825487870559,
		// CI = (-0.32986877893677347, -0.04285849379049936);
		// p̄ = 107/170, SE0 = sqrt(p̄(1-p̄)(1/60+1/110)) = 0.07751142748249662,
		// z = -2.404337559203389, p = 0.01620180496805128.
		{name: "45/60 vs 62/110", a: oneEach(counts("c1", 45, "c2", 15)), b: oneEach(counts("c1", 62, "c2", 48)),
			bucket: "c1", countA: 45, countB: 62, diff: -0.1863636363636364, se: 0.07321825487870559, lo: -0.32986877893677347, hi: -0.04285849379049936,
			z: -2.404337559203389, p: 0.01620180496805128, significant: true, wantVarianceA: VarianceIndependent, wantVarianceB: VarianceIndependent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := CompareShares(tc.a, tc.b, 0.95)
			if err != nil {
				t.Fatal(err)
			}
			mustJSON(t, c)
			if c.A.Variance != tc.wantVarianceA || c.B.Variance != tc.wantVarianceB {
				t.Errorf("variance %s/%s, want %s/%s", c.A.Variance, c.B.Variance, tc.wantVarianceA, tc.wantVarianceB)
			}
			// Two buckets are one hypothesis: no Holm factor.
			if c.Hypotheses != 1 || len(c.Buckets) != 2 {
				t.Fatalf("hypotheses %d, buckets %d", c.Hypotheses, len(c.Buckets))
			}
			s := c.Buckets[0]
			if s.Bucket != tc.bucket || s.CountA != tc.countA || s.CountB != tc.countB {
				t.Fatalf("bucket %+v", s)
			}
			near(t, "diff", s.Diff, tc.diff, 1e-12)
			near(t, "SE", s.SE, tc.se, 1e-12)
			near(t, "CI lo", s.CI.Lo, tc.lo, 1e-12)
			near(t, "CI hi", s.CI.Hi, tc.hi, 1e-12)
			near(t, "z", s.Z, tc.z, 1e-10)
			near(t, "p", s.PValue, tc.p, 1e-12)
			near(t, "Holm p", s.AdjustedP, tc.p, 1e-12)
			if c.Significant != tc.significant || s.Status != ChangeDecrease {
				t.Errorf("significant %v, status %s", c.Significant, s.Status)
			}
			// The other bucket is the same test, mirrored.
			o := c.Buckets[1]
			near(t, "other diff", o.Diff, -tc.diff, 1e-12)
			near(t, "other z", o.Z, -tc.z, 1e-10)
			near(t, "other p", o.PValue, tc.p, 1e-12)
			if o.Status != ChangeIncrease {
				t.Errorf("other status %s", o.Status)
			}
		})
	}
	// At 99% the p-value of 0.0253 is not significant.
	c, _ := CompareShares(oneEach(counts("c1", 520, "c2", 480)), oneEach(counts("c1", 470, "c2", 530)), 0.99)
	if c.Significant || c.Buckets[0].Status != ChangeNotSignificant {
		t.Errorf("at 99%%: %+v", c.Buckets[0])
	}
	// CI at 99%: z = 2.5758293035489004, d ± z*0.022331591971912795.
	near(t, "99% CI lo", c.Buckets[0].CI.Lo, -0.05-2.5758293035489004*0.022331591971912795, 1e-12)
}

// (2) Clustered counts: the expected variances are computed in python
// straight from the per-connection matrices, Var = C/(C-1)·Σ_j (x_ij -
// p m_j)²/n², at each run's own share for the interval and at the common
// share p̄ = (x_iA + x_iB)/(n_A + n_B) for the test; the sums the code
// reads are built from the same matrices by withUnits.
func TestCompareClustered(t *testing.T) {
	t.Parallel()
	// Run A: buckets c1, c2, c3 over 4 connections (rows), n = 40.
	a := withUnits(counts("c1", 18, "c2", 13, "c3", 9), [][]int64{{10, 0, 0}, {0, 8, 0}, {5, 5, 2}, {3, 0, 7}})
	// Run B: buckets in another order, c3 never seen, c4 new; 5 connections, n = 44.
	b := withUnits(counts("c2", 20, "c1", 17, "c4", 7), [][]int64{{12, 0, 0}, {6, 6, 0}, {0, 9, 0}, {2, 2, 2}, {0, 0, 5}})
	c, err := CompareShares(a, b, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	mustJSON(t, c)
	if c.A.Variance != VarianceClustered || c.A.Connections != 4 || c.B.Variance != VarianceClustered || c.B.Connections != 5 {
		t.Fatalf("samples %+v %+v", c.A, c.B)
	}
	want := []struct {
		bucket       string
		a, b         int64
		shareA, diff float64
		se, lo, hi   float64
		z, p, holm   float64
	}{
		{"c1", 18, 17, 0.45, -0.06363636363636366, 0.2743432980237091, -0.6013393471627719, 0.47406661989004467, -0.2303836491712527, 0.8177936655362193, 1},
		{"c2", 13, 20, 0.325, 0.12954545454545452, 0.29197373537254045, -0.4427125512163531, 0.7018034603072622, 0.4284141044908199, 0.6683496576756149, 1},
		// Only in A: share 0 in B, whose residuals are then -p m_j.
		{"c3", 9, 0, 0.225, -0.225, 0.1616451875765767, -0.5418187459243117, 0.09181874592431163, -1.2118662263923798, 0.225563592260915, 0.90225436904366},
		{"c4", 0, 7, 0, 0.1590909090909091, 0.13472149778983772, -0.10495837452046528, 0.4231401927022834, 1.1532044350751023, 0.24882648356928827, 0.90225436904366},
	}
	if len(c.Buckets) != len(want) || c.Hypotheses != 4 {
		t.Fatalf("%d buckets, %d hypotheses: %+v", len(c.Buckets), c.Hypotheses, c.Buckets)
	}
	for i, w := range want {
		s := c.Buckets[i]
		if s.Bucket != w.bucket || s.CountA != w.a || s.CountB != w.b || s.Status != ChangeNotSignificant {
			t.Errorf("bucket %d: %+v", i, s)
			continue
		}
		near(t, w.bucket+" share A", s.ShareA, w.shareA, 1e-12)
		near(t, w.bucket+" diff", s.Diff, w.diff, 1e-12)
		near(t, w.bucket+" SE", s.SE, w.se, 1e-12)
		near(t, w.bucket+" CI lo", s.CI.Lo, w.lo, 1e-12)
		near(t, w.bucket+" CI hi", s.CI.Hi, w.hi, 1e-12)
		near(t, w.bucket+" z", s.Z, w.z, 1e-10)
		near(t, w.bucket+" p", s.PValue, w.p, 1e-10)
		near(t, w.bucket+" Holm p", s.AdjustedP, w.holm, 1e-10)
	}

	// Sticky connections, two buckets. 6 connections of 20 a run, each
	// entirely in one bucket: 4 of 6 in c1 before, 2 of 6 after. As
	// independent requests that is 80/120 vs 40/120, z = -5.164; over 6
	// connections a run it is z = -1.0540925533894596 (p =
	// 0.29184054514378854; SE = 0.2981423969999719), not significant.
	row := func(x0, x1 int64, k int) [][]int64 {
		out := make([][]int64, k)
		for i := range out {
			out[i] = []int64{x0, x1}
		}
		return out
	}
	cat := func(rs ...[][]int64) (out [][]int64) {
		for _, r := range rs {
			out = append(out, r...)
		}
		return out
	}
	c, _ = CompareShares(withUnits(counts("c1", 80, "c2", 40), cat(row(20, 0, 4), row(0, 20, 2))),
		withUnits(counts("c1", 40, "c2", 80), cat(row(20, 0, 2), row(0, 20, 4))), 0.95)
	s := c.Buckets[0]
	near(t, "sticky6 z", s.Z, -1.0540925533894596, 1e-10)
	near(t, "sticky6 p", s.PValue, 0.29184054514378854, 1e-10)
	near(t, "sticky6 SE", s.SE, 0.2981423969999719, 1e-12)
	if c.Significant {
		t.Errorf("6 sticky connections a run: significant: %+v", s)
	}
	// 12 connections of 10: 6 of 12 in c1 before, 11 of 12 after:
	// z = 2.1498485387337865, p = 0.03156719733179422 (SE =
	// 0.17225480304397078), significant at 95%.
	c, _ = CompareShares(withUnits(counts("c1", 60, "c2", 60), cat(row(10, 0, 6), row(0, 10, 6))),
		withUnits(counts("c1", 110, "c2", 10), cat(row(10, 0, 11), row(0, 10, 1))), 0.95)
	s = c.Buckets[0]
	near(t, "sticky12 z", s.Z, 2.1498485387337865, 1e-10)
	near(t, "sticky12 p", s.PValue, 0.03156719733179422, 1e-10)
	near(t, "sticky12 SE", s.SE, 0.17225480304397078, 1e-12)
	if !c.Significant || s.Status != ChangeIncrease || c.Buckets[1].Status != ChangeDecrease {
		t.Errorf("12 sticky connections a run, 50%% -> 92%%: %+v", c.Buckets)
	}
}

// Holm's adjusted p-values, by hand: sorted 0.01, 0.03, 0.04 over m = 3
// give 3*0.01 = 0.03, max(0.03, 2*0.03) = 0.06, max(0.06, 1*0.04) = 0.06;
// and 0.2, 0.5 over m = 2 give 0.4, max(0.4, 0.5) = 0.5.
func TestHolm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ p, want []float64 }{
		{[]float64{0.04, 0.01, 0.03}, []float64{0.06, 0.03, 0.06}},
		{[]float64{0.5, 0.2}, []float64{0.5, 0.4}},
		{[]float64{0.6, 0.7, 0.01}, []float64{1, 1, 0.03}},
		{nil, []float64{}},
	} {
		got := holm(tc.p)
		if len(got) != len(tc.want) {
			t.Fatalf("holm(%v) = %v", tc.p, got)
		}
		for i := range got {
			near(t, "holm", got[i], tc.want[i], 1e-15)
		}
	}
}

func TestCompareEdges(t *testing.T) {
	t.Parallel()
	check := func(name string, c Comparison, err error) Comparison {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, jerr := json.Marshal(c); jerr != nil {
			t.Fatalf("%s: %v", name, jerr)
		}
		for _, s := range c.Buckets {
			for _, v := range []float64{s.ShareA, s.ShareB, s.Diff, s.SE, s.Z, s.PValue, s.AdjustedP} {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Errorf("%s: not finite in %+v", name, s)
				}
			}
		}
		return c
	}
	// One bucket took everything in both runs: zero variance, no change.
	c, err := CompareShares(withUnits(counts("c1", 30), [][]int64{{10}, {20}}), oneEach(counts("c1", 7)), 0.95)
	c = check("all in one bucket", c, err)
	if c.Buckets[0].Status != ChangeNone || c.Significant || c.Buckets[0].PValue != 1 || !c.Tested() {
		t.Errorf("all in one bucket: %+v", c)
	}
	// Every connection split exactly 50/50 in both runs: nothing varied.
	c, err = CompareShares(withUnits(counts("c1", 10, "c2", 10), [][]int64{{5, 5}, {5, 5}}),
		withUnits(counts("c1", 20, "c2", 20), [][]int64{{10, 10}, {5, 5}, {5, 5}}), 0.95)
	c = check("round robin", c, err)
	if c.Buckets[0].Status != ChangeNone || c.Buckets[1].Status != ChangeNone || c.Significant || c.Hypotheses != 0 {
		t.Errorf("round robin: %+v", c)
	}
	// Everything moved from c1 to c2 over 10 connections a run: the test
	// is finite (the common share is 1/2) and significant; the unpooled
	// interval is the single point -1, since neither run varied.
	c, err = CompareShares(withUnits(counts("c1", 100), row1(10, 10)), withUnits(counts("c2", 100), row1(10, 10)), 0.95)
	c = check("moved", c, err)
	if !c.Significant || c.Buckets[0].Status != ChangeDecrease || c.Buckets[0].CI.Lo != -1 || c.Buckets[0].CI.Hi != -1 {
		t.Errorf("moved: %+v", c.Buckets)
	}
	// 10 equal connections a run, all moved: z² = 2(C-1) = 18.
	near(t, "moved z", c.Buckets[0].Z, -math.Sqrt(18), 1e-12)
	// All of a run on one connection: its variance cannot be estimated.
	c, err = CompareShares(withUnits(counts("c1", 6, "c2", 4), [][]int64{{6, 4}}), oneEach(counts("c1", 5, "c2", 5)), 0.95)
	c = check("one connection", c, err)
	if c.A.Variance != VarianceNone || c.Significant || c.Tested() || c.Buckets[0].CI != nil || c.Buckets[0].Status != ChangeUntestable {
		t.Errorf("one connection: %+v", c)
	}
	// An empty run.
	c, err = CompareShares(Counts{}, counts("c1", 5), 0.95)
	c = check("empty", c, err)
	if c.Tested() || c.Significant || c.A.Variance != VarianceNone {
		t.Errorf("empty: %+v", c)
	}
	// Invalid counts are an error.
	if _, err := CompareShares(Counts{Buckets: []string{"a", "a"}, N: []int64{1, 2}}, counts("c1", 5), 0.95); err == nil {
		t.Error("duplicate buckets accepted")
	}
}

// row1 is k connections of m requests each, all in the only bucket.
func row1(m int64, k int) [][]int64 {
	out := make([][]int64, k)
	for i := range out {
		out[i] = []int64{m}
	}
	return out
}

// (3) Calibration under the null, seeded. Runs of an unchanged mesh are
// compared pairwise; the share of pairs called a significant change must
// stay within α plus three binomial standard errors. The test also shows
// why the connection-aware variance matters: the textbook z test on the
// raw counts (every request an independent draw, Bonferroni over the
// buckets, which is more lenient on it than nothing) calls most unchanged
// pairs a change, and so does the Wald form with the unpooled
// cluster-robust variance often enough to exceed α (docs/statistics.md §9.2).
func TestCompareCalibration(t *testing.T) {
	t.Parallel()
	const reps = 2000
	const alpha = 0.05
	r := rand.New(rand.NewPCG(2026, 10))
	pick := func(p []float64) int {
		u := r.Float64()
		for i, q := range p {
			if u < q {
				return i
			}
			u -= q
		}
		return len(p) - 1
	}
	names := []string{"b1", "b2", "b3"}
	// perConnection: 10 to 40 keep-alive connections of random sizes
	// (1 + an exponential of mean 50 requests), each of which picks a
	// backend once: per-connection balancing.
	perConnection := func(p []float64) Counts {
		conns := make([][]int64, 10+r.IntN(31))
		c := Counts{Buckets: names[:len(p)], N: make([]int64, len(p))}
		for j := range conns {
			m := 1 + int64(r.ExpFloat64()*50)
			conns[j] = make([]int64, len(p))
			i := pick(p)
			conns[j][i] = m
			c.N[i] += m
		}
		return withUnits(c, conns)
	}
	// perRequest: 10 keep-alive connections of 200 requests, each request
	// routed on its own.
	perRequest := func(p []float64) Counts {
		conns := make([][]int64, 10)
		c := Counts{Buckets: names[:len(p)], N: make([]int64, len(p))}
		for j := range conns {
			conns[j] = make([]int64, len(p))
			for range 200 {
				i := pick(p)
				conns[j][i]++
				c.N[i]++
			}
		}
		return withUnits(c, conns)
	}
	// naive is the textbook pooled z test of every bucket on the raw
	// counts, Bonferroni over the buckets.
	naive := func(a, b Counts) bool {
		na, nb := float64(a.Total()), float64(b.Total())
		k := float64(len(a.Buckets))
		if k == 2 {
			k = 1
		}
		for i := range a.Buckets {
			pa, pb := float64(a.N[i])/na, float64(b.N[i])/nb
			pbar := float64(a.N[i]+b.N[i]) / (na + nb)
			se := math.Sqrt(pbar * (1 - pbar) * (1/na + 1/nb))
			if se > 0 && k*math.Erfc(math.Abs(pb-pa)/se/math.Sqrt2) <= alpha {
				return true
			}
		}
		return false
	}
	// wald is the unpooled cluster-robust z, Diff/SE, Bonferroni likewise.
	wald := func(c Comparison) bool {
		k := float64(len(c.Buckets))
		if k == 2 {
			k = 1
		}
		for _, s := range c.Buckets {
			if s.SE > 0 && k*math.Erfc(math.Abs(s.Diff)/s.SE/math.Sqrt2) <= alpha {
				return true
			}
		}
		return false
	}
	limit := alpha + slack(alpha, reps)
	for _, cell := range []struct {
		name      string
		run       func([]float64) Counts
		p         []float64
		waldShown bool
	}{
		{"per connection, 70/30", perConnection, []float64{0.7, 0.3}, true},
		{"per connection, 50/30/20", perConnection, []float64{0.5, 0.3, 0.2}, true},
		{"per request on 10 connections, 50/50", perRequest, []float64{0.5, 0.5}, false},
	} {
		var fp, naiveFP, waldFP int
		for range reps {
			a, b := cell.run(cell.p), cell.run(cell.p)
			c, err := CompareShares(a, b, 1-alpha)
			if err != nil {
				t.Fatal(err)
			}
			if c.Significant {
				fp++
			}
			if naive(a, b) {
				naiveFP++
			}
			if wald(c) {
				waldFP++
			}
		}
		rate, naiveRate, waldRate := float64(fp)/reps, float64(naiveFP)/reps, float64(waldFP)/reps
		t.Logf("%s: false change %.4f (limit %.4f); raw-count z test %.4f; unpooled Wald %.4f", cell.name, rate, limit, naiveRate, waldRate)
		if rate > limit {
			t.Errorf("%s: false-change rate %.4f exceeds α = %.2f + 3 SE", cell.name, rate, alpha)
		}
		if cell.waldShown {
			if naiveRate <= limit {
				t.Errorf("%s: the raw-count z test's false-change rate %.4f does not show the problem", cell.name, naiveRate)
			}
			if waldRate <= limit {
				t.Errorf("%s: the unpooled Wald test's false-change rate %.4f does not show the problem", cell.name, waldRate)
			}
		}
	}

	// Not vacuous: real changes are found. 50/50 -> 56/44 per request over
	// 10 connections of 200 (the binomial z would be 3.8): 94% in python;
	// per connection, 70/30 -> 30/70 over 10 to 40 connections: 51%.
	for _, cell := range []struct {
		name    string
		run     func([]float64) Counts
		p, q    []float64
		atLeast float64
	}{
		{"per request 50/50 -> 56/44", perRequest, []float64{0.5, 0.5}, []float64{0.56, 0.44}, 0.85},
		{"per connection 70/30 -> 30/70", perConnection, []float64{0.7, 0.3}, []float64{0.3, 0.7}, 0.4},
	} {
		found := 0
		for range reps / 4 {
			c, _ := CompareShares(cell.run(cell.p), cell.run(cell.q), 1-alpha)
			if c.Significant {
				found++
			}
		}
		power := float64(found) / (reps / 4)
		t.Logf("%s: found %.3f", cell.name, power)
		if power < cell.atLeast {
			t.Errorf("%s: found %.3f of real changes, want at least %.2f", cell.name, power, cell.atLeast)
		}
	}
}
