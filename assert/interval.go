package assert

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Defaults used when a caller leaves a setting at its zero value.
const (
	DefaultConfidence = 0.95
	DefaultMargin     = 0.05
	DefaultPower      = 0.8
)

// zQuantile is the standard normal quantile.
func zQuantile(p float64) float64 { return distuv.UnitNormal.Quantile(p) }

// tQuantile is Student's t quantile with df degrees of freedom.
func tQuantile(p, df float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(p)
}

// BinomialInterval is the two-sided interval at level 1-a for x successes
// out of n. x and n may be fractional: with clustered requests they are the
// effective counts p̂·n* and n* (Korn and Graubard 1998), which is how the
// design effect widens both methods the same way. n <= 0 gives [0,1], the
// honest interval when nothing was observed.
func BinomialInterval(m IntervalMethod, x, n, a float64) Interval {
	if !(n > 0) {
		return Interval{0, 1}
	}
	x = math.Min(math.Max(x, 0), n)
	var iv Interval
	if m == ClopperPearson {
		iv = clopperPearson(x, n, a)
	} else {
		iv = wilson(x, n, a)
	}
	return Interval{Lo: clamp01(iv.Lo), Hi: clamp01(iv.Hi)}
}

// wilson is the score interval (Wilson 1927), without continuity correction,
// written so that x = 0 and x = n give exact 0 and 1 ends.
func wilson(x, n, a float64) Interval {
	z := zQuantile(1 - a/2)
	z2 := z * z
	c := (x + z2/2) / (n + z2)
	h := z * math.Sqrt(x*(n-x)/n+z2/4) / (n + z2)
	iv := Interval{c - h, c + h}
	if x == 0 {
		iv.Lo = 0
	}
	if x == n {
		iv.Hi = 1
	}
	return iv
}

// clopperPearson is the exact tail-area interval from Beta quantiles.
// Fractional x makes the Beta parameters fractional, which distuv accepts.
func clopperPearson(x, n, a float64) Interval {
	// Below this a count is zero: Beta parameters this small only add
	// round-off to an end that is exactly 0 or 1.
	const tiny = 1e-9
	iv := Interval{0, 1}
	if x > tiny {
		iv.Lo = distuv.Beta{Alpha: x, Beta: n - x + 1}.Quantile(a / 2)
	}
	if n-x > tiny {
		iv.Hi = distuv.Beta{Alpha: x + 1, Beta: n - x}.Quantile(1 - a/2)
	}
	return iv
}

func clamp01(v float64) float64 { return math.Min(math.Max(v, 0), 1) }

// effective describes how many independent draws n requests are worth.
type effective struct {
	deffRaw float64 // n / n_eff as estimated; 1 without Units
	deff    float64 // max(1, deffRaw): clustering never adds confidence
	units   int64   // connections; 0 without Units
	// ratio is n*/n, the effective counts per request after the design
	// effect and the few-connections (t with C-1 df) adjustment.
	ratio float64
}

// effectiveFor computes the interval inputs for two-sided level 1-a from
// each bucket's share p̂_i and resid_i = sum_j (x_ij - p̂_i m_j)². One
// design effect serves every bucket: the largest over the buckets whose
// p̂ lies strictly inside (0,1), so no bucket is judged more confidently
// than the connections allow. When no such bucket exists (all requests in
// one bucket) the variance cannot be estimated and the worst case, every
// connection entirely in one bucket, is assumed: deff = SumMM/n, so the
// evidence counts as n²/SumMM draws (exactly C for equal connections).
//
// Few connections: the cluster-robust variance has about C-1 degrees of
// freedom, so the normal quantile overstates confidence. Following Korn and
// Graubard (1998) the effective n is scaled by (z/t_{C-1})², which for the
// Wilson interval is the same as using the t quantile in place of z.
func effectiveFor(u *UnitStats, n int64, a float64, shares []float64, resid []float64) effective {
	e := effective{deffRaw: 1, deff: 1, ratio: 1}
	if u == nil || n <= 0 {
		return e
	}
	e.units = u.Units
	if u.Units < 2 {
		// One connection is one draw of the balancer: no information about the split.
		e.deffRaw, e.deff, e.ratio = float64(n), float64(n), 0
		return e
	}
	nf := float64(n)
	c := float64(u.Units)
	found := false
	raw := 0.0
	for i, p := range shares {
		if p <= 0 || p >= 1 {
			continue
		}
		found = true
		v := c / (c - 1) * math.Max(resid[i], 0) / (nf * nf)
		raw = math.Max(raw, nf*v/(p*(1-p)))
	}
	if !found {
		raw = u.SumMM / nf
	}
	e.deffRaw = raw
	e.deff = math.Max(1, raw)
	z := zQuantile(1 - a/2)
	t := tQuantile(1-a/2, c-1)
	e.ratio = (z / t) * (z / t) / e.deff
	return e
}

// residual is sum_j (x_ij - p m_j)^2 from the sufficient statistics.
func residual(u *UnitStats, i int, p float64) float64 {
	return u.SumXX[i] - 2*p*u.SumXM[i] + p*p*u.SumMM
}

// scaled is the effective draws per request to extrapolate with: the same
// connection reuse (design effect) on more connections, where the
// few-connections t adjustment fades away.
func (e effective) scaled() float64 {
	if e.ratio == 0 {
		return 0
	}
	return 1 / e.deff
}

// note is the reason's remark on connection reuse, when it matters.
func (e effective) note(n int64) string {
	switch {
	case e.units == 1:
		return "; all requests came over one connection, which is one draw of a per-connection balancer: add connections"
	case e.units > 1 && e.deff >= 1.5:
		return fmt.Sprintf("; requests share %d connections (design effect %.3g, worth %.4g independent requests): add connections, not just requests",
			e.units, e.deff, float64(n)/e.deff)
	}
	return ""
}
