package assert

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func counts(kv ...any) Counts {
	var c Counts
	for i := 0; i < len(kv); i += 2 {
		c.Buckets = append(c.Buckets, kv[i].(string))
		c.N = append(c.N, int64(kv[i+1].(int)))
	}
	return c
}

// withUnits attaches the sufficient statistics of per-connection counts:
// conns[j][i] is the requests of connection j in bucket i.
func withUnits(c Counts, conns [][]int64) Counts {
	u := &UnitStats{Units: int64(len(conns)), SumXX: make([]float64, len(c.Buckets)), SumXM: make([]float64, len(c.Buckets))}
	for _, row := range conns {
		var m float64
		for _, x := range row {
			m += float64(x)
		}
		u.SumMM += m * m
		for i, x := range row {
			u.SumXX[i] += float64(x) * float64(x)
			u.SumXM[i] += float64(x) * m
		}
	}
	c.Units = u
	return c
}

// stuck builds connections of m requests each, every one entirely in the
// bucket named by its index.
func stuck(c Counts, m int64, buckets ...int) Counts {
	conns := make([][]int64, len(buckets))
	for j, b := range buckets {
		conns[j] = make([]int64, len(c.Buckets))
		conns[j][b] = m
	}
	return withUnits(c, conns)
}

func mustJSON(t *testing.T, v any) {
	t.Helper()
	if _, err := json.Marshal(v); err != nil {
		t.Errorf("result does not marshal: %v", err)
	}
}

var half = map[string]float64{"c2": 0.5, "c3": 0.5}

func TestSplitVerdicts(t *testing.T) {
	cases := []struct {
		name    string
		c       Counts
		s       SplitSpec
		want    Verdict
		reason  string // substring of Reason
		infChi2 bool
	}{
		{"n=0", counts("c2", 0, "c3", 0), SplitSpec{Expected: half}, Inconclusive, "no requests", false},
		{"no buckets counted at all", Counts{}, SplitSpec{Expected: half}, Inconclusive, "no requests", false},
		{"exact split", counts("c2", 5000, "c3", 5000), SplitSpec{Expected: half}, Pass, "inside", false},
		{"exact split clopper-pearson", counts("c2", 5000, "c3", 5000), SplitSpec{Expected: half, Method: ClopperPearson}, Pass, "inside", false},
		{"70/30", counts("c2", 700, "c3", 300), SplitSpec{Expected: half}, Fail, "bucket c2 got 70%", false},
		{"too few", counts("c2", 52, "c3", 48), SplitSpec{Expected: half}, Inconclusive, "would settle", false},
		{"k=1 enough", counts("c2", 1000), SplitSpec{Expected: map[string]float64{"c2": 1}}, Pass, "", false},
		{"k=1 too few", counts("c2", 10), SplitSpec{Expected: map[string]float64{"c2": 1}}, Inconclusive, "", false},
		{"expected 0 got traffic", counts("c2", 450, "c3", 450, "c4", 100), SplitSpec{Expected: half}, Fail, "bucket c4 got 10%", true},
		{"expected 0 stays empty", counts("c2", 5000, "c3", 5000, "c4", 0), SplitSpec{Expected: map[string]float64{"c2": 0.5, "c3": 0.5, "c4": 0}}, Pass, "", false},
		{"expected bucket missing from counts", counts("c2", 1000), SplitSpec{Expected: half}, Fail, "bucket c2 got 100%", false},
		{"expected 1 with a stray request", counts("c2", 9990, "c3", 10), SplitSpec{Expected: map[string]float64{"c2": 1}}, Pass, "", true},
		{"relative margin passes", counts("a", 8000, "b", 2000), SplitSpec{Expected: map[string]float64{"a": 0.8, "b": 0.2}, Margin: 0.1, Relative: true}, Pass, "", false},
		// b at 23% is within 5 points of 20% but not within 10% of it.
		{"relative margin fails", counts("a", 7700, "b", 2300), SplitSpec{Expected: map[string]float64{"a": 0.8, "b": 0.2}, Margin: 0.1, Relative: true}, Fail, "bucket b", false},
		{"absolute margin passes the same", counts("a", 7700, "b", 2300), SplitSpec{Expected: map[string]float64{"a": 0.8, "b": 0.2}}, Pass, "", false},
		{"shares do not sum to 1", counts("c2", 10), SplitSpec{Expected: map[string]float64{"c2": 0.5, "c3": 0.4}}, Inconclusive, "sum", false},
		{"negative count", counts("c2", -1), SplitSpec{Expected: half}, Inconclusive, "negative", false},
		{"bad method", counts("c2", 1), SplitSpec{Expected: half, Method: "wald"}, Inconclusive, "wald", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Split(c.c, c.s)
			if r.Verdict != c.want {
				t.Fatalf("verdict %v, want %v: %s", r.Verdict, c.want, r.Reason)
			}
			if !strings.Contains(r.Reason, c.reason) {
				t.Errorf("reason %q does not mention %q", r.Reason, c.reason)
			}
			if r.ChiSquareInfinite != c.infChi2 || (c.infChi2 && r.PValue != 0) {
				t.Errorf("chi2 infinite %v p %g, want infinite %v", r.ChiSquareInfinite, r.PValue, c.infChi2)
			}
			if r.Verdict == Inconclusive && r.N > 0 && r.RequiredN <= r.N {
				t.Errorf("INCONCLUSIVE with RequiredN %d <= n %d", r.RequiredN, r.N)
			}
			mustJSON(t, r)
		})
	}
}

func TestSplitEdges(t *testing.T) {
	r := Split(counts("c2", 0, "c3", 0), SplitSpec{Expected: half})
	if r.RequiredN != 1051 { // the planner's n, see TestRequiredN
		t.Errorf("n=0 RequiredN %d, want 1051", r.RequiredN)
	}
	for _, b := range r.Buckets {
		if b.Interval != (Interval{0, 1}) || b.Observed != 0 || b.Verdict != Inconclusive {
			t.Errorf("n=0 bucket %+v", b)
		}
	}
	if r.PValue != 1 || r.ChiSquare != 0 || r.DesignEffect != 1 {
		t.Errorf("n=0 chi2 %g p %g deff %g", r.ChiSquare, r.PValue, r.DesignEffect)
	}

	// Buckets: counts' order, then the expected-only ones sorted; allowed
	// bands clipped to [0,1].
	r = Split(counts("z", 10), SplitSpec{Expected: map[string]float64{"z": 0, "b": 0.98, "a": 0.02}})
	var names []string
	for _, b := range r.Buckets {
		names = append(names, b.Bucket)
	}
	if got := strings.Join(names, ","); got != "z,a,b" {
		t.Errorf("bucket order %s, want z,a,b", got)
	}
	if r.Buckets[1].Allowed != (Interval{0, 0.07}) || r.Buckets[2].Allowed.Hi != 1 {
		t.Errorf("allowed %v %v", r.Buckets[1].Allowed, r.Buckets[2].Allowed)
	}
	if r.DF != 1 { // z, expected 0, is left out of χ²
		t.Errorf("df %d, want 1", r.DF)
	}

	// k = 1: the interval is at level 1-2α, so its lower end is the
	// one-sided 95% bound: Wilson n/(n+z²) with z = z_{0.95}.
	r = Split(counts("c2", 10), SplitSpec{Expected: map[string]float64{"c2": 1}})
	z := 1.644853626951472
	near(t, "k=1 lo", r.Buckets[0].Interval.Lo, 10/(10+z*z), 1e-9)
	// At the ends the advice is the smallest n whose end clears the band,
	// n/(n+z²) >= 0.95, i.e. n >= 19z² = 51.4, but never below the
	// planner's ln(0.05)/ln(0.95) = 58.4.
	if r.RequiredN != 59 {
		t.Errorf("k=1 RequiredN %d, want 59", r.RequiredN)
	}
}

// An INCONCLUSIVE verdict's RequiredN must settle it when the shares hold.
func TestSplitRequiredNSettles(t *testing.T) {
	for _, c := range []struct {
		x2, x3 int
		want   Verdict
	}{{52, 48, Pass}, {60, 40, Fail}, {47, 53, Pass}} {
		s := SplitSpec{Expected: half}
		r := Split(counts("c2", c.x2, "c3", c.x3), s)
		if r.Verdict != Inconclusive {
			t.Fatalf("%d/%d: %v", c.x2, c.x3, r.Verdict)
		}
		n := r.RequiredN
		x2 := int(math.Round(float64(n) * float64(c.x2) / float64(c.x2+c.x3)))
		if got := Split(counts("c2", x2, "c3", int(n)-x2), s).Verdict; got != c.want {
			t.Errorf("%d/%d scaled to RequiredN %d: %v, want %v", c.x2, c.x3, n, got, c.want)
		}
	}
	// On the very edge of the band no n settles it, and the reason says so.
	r := Split(counts("c2", 550, "c3", 450), SplitSpec{Expected: half})
	if r.Verdict != Inconclusive || r.RequiredN != 0 || !strings.Contains(r.Reason, "edge") {
		t.Errorf("edge: %v %d %q", r.Verdict, r.RequiredN, r.Reason)
	}
}

func TestSplitUnits(t *testing.T) {
	base := counts("c2", 600, "c3", 400)
	// Five keep-alive connections of 200 requests, each stuck to one
	// cluster (3 on c2, 2 on c3). By hand: Σ(x_j - 0.6·200)² = 3·80² +
	// 2·120² = 48000, Var = 5/4·48000/1000² = 0.06, n_eff = 0.24/0.06 = 4,
	// design effect 250.
	c := stuck(base, 200, 0, 0, 0, 1, 1)
	r := Split(c, SplitSpec{Expected: half})
	near(t, "deff", r.DesignEffect, 250, 1e-9)
	near(t, "n_eff", r.EffectiveN, 4, 1e-9)
	if r.Verdict != Inconclusive || r.Connections != 5 || !strings.Contains(r.Reason, "add connections") {
		t.Errorf("5 connections: %v, %q", r.Verdict, r.Reason)
	}
	// The same counts taken as independent requests would FAIL confidently.
	if v := Split(base, SplitSpec{Expected: half}).Verdict; v != Fail {
		t.Errorf("naive: %v, want FAIL", v)
	}
	// All five on c2: the variance cannot be estimated, so the worst case
	// (deff = SumMM/n = 200, five draws) applies, with t on 4 df.
	all := stuck(counts("c2", 1000, "c3", 0), 200, 0, 0, 0, 0, 0)
	r = Split(all, SplitSpec{Expected: half})
	if r.Verdict != Inconclusive || r.DesignEffect != 200 {
		t.Errorf("all on one: %v deff %g: %s", r.Verdict, r.DesignEffect, r.Reason)
	}
	// One connection is one draw of the balancer: no number of requests on
	// it settles anything, so no RequiredN, and the reason says what would.
	one := stuck(counts("c2", 1000, "c3", 0), 1000, 0)
	if r := Split(one, SplitSpec{Expected: half}); r.Verdict != Inconclusive || r.RequiredN != 0 || !strings.Contains(r.Reason, "one connection") {
		t.Errorf("one connection: %v %d %q", r.Verdict, r.RequiredN, r.Reason)
	}
	if r := SuccessRate(1000, 1000, 0.9, 0.95, Wilson, one.Units); r.Verdict != Inconclusive || !strings.Contains(r.Reason, "one connection") {
		t.Errorf("one connection success rate: %v %q", r.Verdict, r.Reason)
	}
	// No reuse (one request per connection): the design effect is just the
	// small-sample factor C/(C-1), and a big balanced sample passes.
	conns := make([][]int64, 0, 10000)
	for j := range 10000 {
		conns = append(conns, []int64{int64(1 - j%2), int64(j % 2)})
	}
	r = Split(withUnits(counts("c2", 5000, "c3", 5000), conns), SplitSpec{Expected: half})
	if r.Verdict != Pass {
		t.Errorf("no reuse: %v: %s", r.Verdict, r.Reason)
	}
	near(t, "deff", r.DesignEffect, 10000.0/9999, 1e-9)
	mustJSON(t, r)
}
