package assert

import (
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

// BinomialInterval is the two-sided interval at level 1-a for x successes
// out of n. x and n may be fractional: they are the effective counts of
// docs/statistics.md §3 (x·n_eff/n of n_eff), which go into the Beta
// quantiles and the score formula unchanged. n <= 0 gives [0,1], the
// honest interval when nothing was observed.
//
// ClopperPearson is the exact tail-area interval. Wilson is the score
// interval with continuity correction (Newcombe 1998, method 4) with the
// small-count correction of docs/statistics.md §2.3 (wilsonCorrected).
func BinomialInterval(m IntervalMethod, x, n, a float64) Interval {
	if !(n > 0) {
		return Interval{0, 1}
	}
	x = math.Min(math.Max(x, 0), n)
	var iv Interval
	// "" is the default, Clopper–Pearson, as everywhere (SplitSpec, the
	// scenario default, IntervalMethod.String).
	if m == Wilson {
		iv = wilsonCorrected(x, n, a)
	} else {
		iv = clopperPearson(x, n, a)
	}
	return Interval{Lo: clamp01(iv.Lo), Hi: clamp01(iv.Hi)}
}

// wilsonCorrected is the Wilson interval with the small-count correction
// of docs/statistics.md §2.3. Near a count of 0 the score interval's end
// lies too far in: with few counts (a dozen at a = 1%, dozens at 0.1%,
// because the binomial is skewed there) the share falls below the lower
// end far more often than a allows (Brown, Cai and DasGupta 2001). So an
// end is kept only where it holds as an exact one-sided bound at the
// interval's whole error a, P(X >= x | p = lower end) <= a (mirrored for
// the upper end), which is where it is no further in than the
// Clopper–Pearson bound at one-sided a; elsewhere the Clopper–Pearson end
// at a/2 replaces it. At x = 0 or n the whole interval is
// Clopper–Pearson's, whose far end is exact there. The check is exact for
// every count and level, so the correction needs no tuned threshold. It
// guarantees each end, not their sum: docs/statistics.md §2.3 says what
// that means for a FAIL, and calibration_test.go enumerates it.
func wilsonCorrected(x, n, a float64) Interval {
	if x < countTiny || n-x < countTiny {
		return clopperPearson(x, n, a)
	}
	iv := wilsonCC(x, n, a)
	if iv.Lo > cpLower(x, n, a) {
		iv.Lo = cpLower(x, n, a/2)
	}
	if iv.Hi < cpUpper(x, n, a) {
		iv.Hi = cpUpper(x, n, a/2)
	}
	return iv
}

// wilsonCC is the score interval with continuity correction, Newcombe
// (1998) equations for method 4, with P = x/n, Q = 1-P:
//
//	L = (2nP + z² - 1 - z·sqrt(z² - 2 - 1/n + 4P(nQ + 1))) / (2(n + z²))
//	U = (2nP + z² + 1 + z·sqrt(z² + 2 - 1/n + 4P(nQ - 1))) / (2(n + z²))
//
// with L = 0 at P = 0 and U = 1 at P = 1. The square roots' arguments can
// dip below zero for n < 1 effective draw; they are floored at 0 there.
func wilsonCC(x, n, a float64) Interval {
	z := zQuantile(1 - a/2)
	z2 := z * z
	p := x / n
	q := 1 - p
	den := 2 * (n + z2)
	lo := (2*n*p + z2 - 1 - z*math.Sqrt(math.Max(0, z2-2-1/n+4*p*(n*q+1)))) / den
	hi := (2*n*p + z2 + 1 + z*math.Sqrt(math.Max(0, z2+2-1/n+4*p*(n*q-1)))) / den
	if x < countTiny {
		lo = 0
	}
	if n-x < countTiny {
		hi = 1
	}
	return Interval{lo, hi}
}

// wilsonScore is the score interval without continuity correction (Wilson
// 1927; Newcombe 1998 method 3). No verdict uses it: it under-covers near
// 0 and 1 (docs/statistics.md §2.3). It is kept to check the score
// formula against Newcombe's published table.
func wilsonScore(x, n, a float64) Interval {
	z := zQuantile(1 - a/2)
	z2 := z * z
	c := (x + z2/2) / (n + z2)
	h := z * math.Sqrt(x*(n-x)/n+z2/4) / (n + z2)
	return Interval{clamp01(c - h), clamp01(c + h)}
}

// countTiny is below which a (fractional) count is zero: Beta parameters
// this small only add round-off to an end that is exactly 0 or 1.
const countTiny = 1e-9

// clopperPearson is the exact tail-area interval from Beta quantiles,
// each end a one-sided bound at a/2.
func clopperPearson(x, n, a float64) Interval {
	return Interval{cpLower(x, n, a/2), cpUpper(x, n, a/2)}
}

// cpLower is the exact one-sided lower bound at level 1-a for x of n:
// the p at which P(X >= x | p) = a (Clopper and Pearson 1934).
// Fractional x makes the Beta parameters fractional, which distuv accepts.
func cpLower(x, n, a float64) float64 {
	if x < countTiny {
		return 0
	}
	return distuv.Beta{Alpha: x, Beta: n - x + 1}.Quantile(a)
}

// cpUpper is the exact one-sided upper bound at level 1-a for x of n:
// the p at which P(X <= x | p) = a.
func cpUpper(x, n, a float64) float64 {
	if n-x < countTiny {
		return 1
	}
	return distuv.Beta{Alpha: x + 1, Beta: n - x}.Quantile(1 - a)
}

func clamp01(v float64) float64 { return math.Min(math.Max(v, 0), 1) }
