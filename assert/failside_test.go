package assert

import (
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// The FAIL side of a split takes the design effect at the observed shares
// (drawsFor): CI saw a frozen data plane, routing every request on its own
// at 50/50, judged against an expected 90/10 over 21 uneven open-loop
// connections. With the design effect evaluated at the expected shares
// (about 200 there: the residuals x − 0.9m measure the deviation, not the
// clustering) the FAIL interval spanned most of [0,1] and the verdict was
// INCONCLUSIVE, with a note calling the per-request data plane clustered.

// ciConnections are 21 uneven connection sizes whose n_K = n²/Σm² is the
// CI run's 11.7 (423 requests).
var ciConnections = []int64{60, 55, 48, 40, 36, 30, 26, 22, 20, 18, 15, 12, 10, 8, 6, 5, 4, 3, 2, 2, 1}

// evenlyRouted splits every connection as evenly as two buckets allow,
// the odd request alternating: a per-request 50/50 data plane without
// chance.
func evenlyRouted(sizes []int64) Counts {
	conns := make([][]int64, len(sizes))
	c := counts("stable", 0, "canary", 0)
	for j, m := range sizes {
		a := m / 2
		if m%2 == 1 && j%2 == 0 {
			a++
		}
		conns[j] = []int64{a, m - a}
		c.N[0] += a
		c.N[1] += m - a
	}
	return withUnits(c, conns)
}

func TestFrozenDataPlaneFailsOverUnevenConnections(t *testing.T) {
	t.Parallel()
	// The CI run (e2e/windows_lab_test.go): two windows judged, margin
	// 8%, the route patched from 50/50 to 90/10 between them and the data
	// plane frozen at 50/50. Each window's FAIL intervals are at
	// 1 − 0.05/(2·2) = 98.75%; at the n_K = 11.7 draws the expected shares'
	// design effect left, 50% ± 35 points reached into 82%–98%.
	frozen := evenlyRouted(ciConnections)
	half := map[string]float64{"stable": 0.5, "canary": 0.5}
	expected := map[string]float64{"stable": 0.9, "canary": 0.1}
	spec := SplitSpec{Margin: 0.08, Sampling: Sampling{FixedConnections: int64(len(ciConnections))}}
	w := SplitWindows([]Window{{Counts: frozen, Expected: half}, {Counts: frozen, Expected: expected}}, spec)
	if w.Verdict != Fail || w.Deciding != 1 {
		t.Fatalf("a frozen 50/50 data plane against 90/10 in window 2 of 2: %s decided by window %d, want FAIL by window 2: %s", w.Verdict, w.Deciding+1, w.Reason)
	}
	r := w.Windows[1].Split
	t.Log(r.Reason)
	near(t, "n_K", r.EffectiveConnections, 11.743, 1e-3)
	// The clustering note quotes the design effect at the observed shares
	// (about 1 on this per-request data plane), so it must not appear.
	if r.ObservedDesignEffect >= suspectDesignEffect {
		t.Errorf("observed design effect %g on a per-request data plane, want below %d", r.ObservedDesignEffect, suspectDesignEffect)
	}
	if strings.Contains(r.Reason, "same bucket") || strings.Contains(r.Reason, "balancing: connection") {
		t.Errorf("the reason calls a per-request data plane clustered: %s", r.Reason)
	}
	// The reason says what the FAIL side was judged at, beside the PASS
	// side's draws.
	if !strings.Contains(r.Reason, "FAIL also at") {
		t.Errorf("the reason does not say what FAIL was judged at: %s", r.Reason)
	}
	// The PASS side is unchanged: the window judged against its own 50/50
	// passes at the expected shares' design effect.
	if w.Windows[0].Split.Verdict != Pass {
		t.Errorf("window 1, 50/50 against 50/50: %s: %s", w.Windows[0].Split.Verdict, w.Windows[0].Split.Reason)
	}
}

// perRequestUneven routes every request on its own with the true shares
// over conns connections of 1 + Exp(20) requests (an open loop's uneven
// lanes).
func (s sampler) perRequestUneven(names []string, conns int, p []float64) Counts {
	return s.perRequestUnevenOf(names, conns, 20, p)
}

// perRequestUnevenOf is perRequestUneven with connections of 1 + Exp(mean).
func (s sampler) perRequestUnevenOf(names []string, conns int, mean float64, p []float64) Counts {
	rng := rand.New(s.src)
	rows := make([][]int64, conns)
	c := Counts{Buckets: names, N: make([]int64, len(p))}
	for j := range rows {
		rows[j] = s.multinomial(1+int64(rng.ExpFloat64()*mean), p)
		for i, v := range rows[j] {
			c.N[i] += v
		}
	}
	return withUnits(c, rows)
}

// The power behind the fix, seeded: a per-request 50/50 data plane judged
// against 90/10 ± 8% at 95% as one of two windows (FAIL at 98.75%, the
// CI run's), over 20, 30 and 50 connections of 1 + Exp(20) requests. With
// the PASS side's design effect deciding FAIL too, P(FAIL) was 0.105,
// 0.753 and 1.000 (and every run noted clustering); the floors below sit
// under what the FAIL side's own rule gives (0.619, 0.987, 1), well above
// the old figures at 20 and 30 connections. Over 20 uneven connections n_K
// is about 10, where the robust score test, resting on the connections
// alone, reaches its limit (failInterval).
func TestFrozenDataPlanePower(t *testing.T) {
	t.Parallel()
	r := sampler{src: rand.NewPCG(20261203, 25)}
	names := []string{"stable", "canary"}
	spec := SplitSpec{Expected: map[string]float64{"stable": 0.9, "canary": 0.1}, Margin: 0.08, Family: 2}
	const runs = 1000
	for _, tc := range []struct {
		conns   int
		atLeast float64
	}{{20, 0.5}, {30, 0.95}, {50, 0.99}} {
		conns := tc.conns
		var fails, clustered int
		for range runs {
			c := r.perRequestUneven(names, conns, []float64{0.5, 0.5})
			res, _, d, err := decideSplit(c, withSampling(spec, Sampling{FixedConnections: int64(conns)}).withDefaults())
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict == Fail {
				fails++
			}
			if d.diagnostic() != "" {
				clustered++
			}
		}
		p := float64(fails) / runs
		t.Logf("50/50 per request against 90/10 ± 8%% (one of two windows) over %d uneven connections: P(FAIL) = %.4f, clustering noted in %d of %d", conns, p, clustered, runs)
		if p < tc.atLeast {
			t.Errorf("%d connections: P(FAIL) = %.4f, want at least %g", conns, p, tc.atLeast)
		}
		// The note fires when the design effect at the observed shares
		// reaches 2, which C−1 degrees of freedom reach now and then by
		// chance on a per-request data plane; never in most runs.
		if clustered > runs/20 {
			t.Errorf("%d connections: a per-request data plane called clustered in %d of %d runs", conns, clustered, runs)
		}
	}
}

// robustScoreInterval is the set of shares the robust score test does not
// reject: checked against the test itself on a grid of shares, for
// per-request and pinned connections, and [0,1] where the connections are
// too few for the test to reject anything on its own.
func TestRobustScoreInterval(t *testing.T) {
	t.Parallel()
	pinned := stuck(counts("a", 0, "b", 0), 30, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	pinned.N = []int64{7 * 30, 13 * 30}
	for _, tc := range []struct {
		name  string
		c     Counts
		i     int
		a     float64
		whole bool // the test rejects nothing on its own
	}{
		{"per request, 21 uneven connections", evenlyRouted(ciConnections), 0, 0.0125, false},
		{"per request, the other bucket", evenlyRouted(ciConnections), 1, 0.05, false},
		{"pinned, 20 equal connections", pinned, 0, 0.05, false},
		{"a bucket only expected", evenlyRouted(ciConnections), -1, 0.05, false},
		{"3 connections", evenlyRouted([]int64{60, 55, 48}), 0, 0.05, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := tc.c.Units
			n := float64(tc.c.Total())
			var x int64
			var sxx, sxm float64
			if tc.i >= 0 {
				x, sxx, sxm = tc.c.N[tc.i], u.SumXX[tc.i], u.SumXM[tc.i]
			}
			nK := n * n / u.SumMM
			iv := robustScoreInterval(tc.c, tc.i, x, nK, tc.a)
			if tc.whole {
				if iv != (Interval{0, 1}) {
					t.Fatalf("interval %v, want [0,1] over %d connections", iv, u.Units)
				}
				return
			}
			if p := float64(x) / n; !(iv.Lo <= p && p <= iv.Hi) || iv.Hi-iv.Lo >= 1 {
				t.Fatalf("interval %v around p̂ = %g", iv, p)
			}
			crit := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: nK - 1}.Quantile(1 - tc.a/2)
			cf := float64(u.Units)
			rejects := func(p float64) bool {
				d := float64(x) - p*n
				return d*d > crit*crit*cf/(cf-1)*(sxx-2*p*sxm+p*p*u.SumMM)
			}
			for k := 0; k <= 1000; k++ {
				p := float64(k) / 1000
				inside := p > iv.Lo+1e-9 && p < iv.Hi-1e-9
				outside := p < iv.Lo-1e-9 || p > iv.Hi+1e-9
				if inside && rejects(p) || outside && !rejects(p) {
					t.Errorf("share %g: rejected %v, interval %v", p, rejects(p), iv)
				}
			}
		})
	}
}

// The lab's Kuma canary with its weights broken: the mesh gateway (an
// Envoy routing each request on its own) at 80/20, judged against 90/10 ±
// 5% at 95%. Over the attack's default ten keep-alive connections the
// FAIL side's robust score test cannot reject past t² ≈ n_K = 10, so the
// break was INCONCLUSIVE on five labs of five (docs/calibration-lab.md).
// A robust Wald test in its place where the counts look unclustered was
// tried and rejected: the gate selects the runs whose variance came out
// low, and partly sticky connections then FAILed a correct split up to
// 4.6 α (docs/statistics.md §3.3). More connections are what settles it,
// so the catalog scenario attacks over 30 connections with 1,600 requests;
// this test holds that choice to the power it was made for, and the
// correct 90/10 to PASS and never FAIL there.
func TestKumaBreakNeedsConnections(t *testing.T) {
	t.Parallel()
	names := []string{"c1", "c2"}
	spec := SplitSpec{Expected: map[string]float64{"c1": 0.9, "c2": 0.1}, Margin: 0.05}
	const runs = 1000
	for _, tc := range []struct {
		conns         int
		n             int64
		minBrokenFail float64
		maxBrokenFail float64
	}{
		{conns: 10, n: 800, minBrokenFail: 0, maxBrokenFail: 0.2},   // the catalog's scenario before
		{conns: 30, n: 1600, minBrokenFail: 0.97, maxBrokenFail: 1}, // scenarios/catalog/kuma-canary.yaml
	} {
		r := sampler{src: rand.NewPCG(20261203, uint64(tc.conns))}
		s := withSampling(spec, Sampling{FixedConnections: int64(tc.conns)}).withDefaults()
		var brokenFail, pass, falseFail int
		for range runs {
			res, _, _, err := decideSplit(r.perRequestUnits(names, tc.n, tc.conns, []float64{0.8, 0.2}), s)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict == Fail {
				brokenFail++
			}
			res, _, _, _ = decideSplit(r.perRequestUnits(names, tc.n, tc.conns, []float64{0.9, 0.1}), s)
			switch res.Verdict {
			case Pass:
				pass++
			case Fail:
				falseFail++
			}
		}
		bf, pp := float64(brokenFail)/runs, float64(pass)/runs
		t.Logf("%d connections, %d requests: 80/20 FAILs with %.3f; 90/10 PASSes with %.3f, FAILs %d times", tc.conns, tc.n, bf, pp, falseFail)
		if bf < tc.minBrokenFail || bf > tc.maxBrokenFail {
			t.Errorf("%d connections: P(FAIL) of the break %.3f, want within [%g, %g]", tc.conns, bf, tc.minBrokenFail, tc.maxBrokenFail)
		}
		if pp < 0.95 || falseFail > 0 {
			t.Errorf("%d connections: the correct split PASSes with %.3f (want ≥ 0.95) and FAILs %d times (want 0)", tc.conns, pp, falseFail)
		}
	}
}
