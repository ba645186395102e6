package assert

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

func TestRequiredN(t *testing.T) {
	// Hand-computed from DESIGN.md §4 with published quantiles (Abramowitz
	// and Stegun Table 26.5): z_{0.975} = 1.959964, z_{0.9} = 1.281552,
	// z_{0.995} = 2.575829, z_{0.95} = 1.644854.
	//   k=2, α=.05, power .8: (1.959964+1.281552)² = 10.507426
	//   p=.5, δ=.05: 10.507426·0.25/0.0025 = 1050.74 -> 1051
	//   × deff 2.5: 2626.86 -> 2627
	//   p=.2/.8: 10.507426·0.16/0.0025 = 672.48 -> 673
	//   confidence .99 (α/k = .005): (2.575829+1.281552)²·100 = 1487.94 -> 1488
	//   k=1, p=1, α=.05: only the end must clear δ: max(z_{.95}²·19 = 51.41,
	//     ln(.05)/ln(.95) = 58.40) -> 59
	//   relative 10% of p=.5 is δ=.05 again -> 1051
	//   k=2 with margin 0.1: 1050.74/4 = 262.69 -> 263
	cases := []struct {
		name     string
		expected map[string]float64
		margin   float64
		relative bool
		conf     float64
		power    float64
		deff     float64
		want     int64
	}{
		{"equal halves", half, 0.05, false, 0.95, 0.8, 1, 1051},
		{"defaults", half, 0, false, 0, 0, 0, 1051},
		{"design effect", half, 0.05, false, 0.95, 0.8, 2.5, 2627},
		{"deff below 1 counts as 1", half, 0.05, false, 0.95, 0.8, 0.5, 1051},
		{"80/20", map[string]float64{"a": 0.8, "b": 0.2}, 0.05, false, 0.95, 0.8, 1, 673},
		{"99%", half, 0.05, false, 0.99, 0.8, 1, 1488},
		{"k=1", map[string]float64{"a": 1}, 0.05, false, 0.95, 0.8, 1, 59},
		{"relative", half, 0.1, true, 0.95, 0.8, 1, 1051},
		{"wider margin", half, 0.1, false, 0.95, 0.8, 1, 263},
		{"invalid shares", map[string]float64{"a": 0.7}, 0.05, false, 0.95, 0.8, 1, 0},
		{"invalid confidence", half, 0.05, false, 1.5, 0.8, 1, 0},
	}
	for _, c := range cases {
		if got := RequiredN(c.expected, c.margin, c.relative, c.conf, c.power, c.deff); got != c.want {
			t.Errorf("%s: RequiredN = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestPlanSequential(t *testing.T) {
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

// For three or more buckets the plan must make every bucket pass at once:
// at RequiredN the buckets' miss probabilities, from gonum's normal tail,
// add up to at most β, and one request fewer they do not.
func TestRequiredNJoint(t *testing.T) {
	n := RequiredN(simExpected, 0.05, false, 0.95, 0.8, 1)
	za := distuv.UnitNormal.Quantile(1 - 0.05/3)
	miss := func(n float64) float64 {
		m := 0.0
		for _, p := range simExpected {
			m += 2 * distuv.UnitNormal.Survival(0.05*math.Sqrt(n/(p*(1-p)))-za)
		}
		return m
	}
	if miss(float64(n)) > 0.2 || miss(float64(n-1)) <= 0.2 {
		t.Errorf("RequiredN %d: miss %g, at n-1 %g; want the first n with miss <= 0.2", n, miss(float64(n)), miss(float64(n-1)))
	}
	// It is more than DESIGN.md's per-bucket formula, (z_{1-α/3}+z_{0.9})²·0.25/0.05².
	if f := (za + 1.281551565544601) * (za + 1.281551565544601) * 0.25 / 0.0025; float64(n) <= f {
		t.Errorf("RequiredN %d not above the single-bucket %g", n, f)
	}
}
