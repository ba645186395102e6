package assert

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Evidence is what the counts behind a verdict were worth, reported with
// every verdict so that a reader sees how the dependence between requests
// was judged and why (docs/statistics.md §3).
type Evidence struct {
	// N is the number of requests counted.
	N int64 `json:"n"`
	// EffectiveN is what they are worth as independent draws (§3.3): N when
	// no connection carried two of them; else N over the design effect
	// estimated from the per-connection counts, never below the worst case
	// EffectiveConnections (every request of a connection in one bucket)
	// and never above N; the worst case itself when the data cannot show
	// the dependence (too few connections, every request in one bucket).
	EffectiveN float64 `json:"effectiveN"`
	// DesignEffect is N / EffectiveN, the factor the decision used.
	DesignEffect float64 `json:"designEffect"`
	// Connections is the number of connections the requests came over;
	// 0 when not known.
	Connections int64 `json:"connections,omitempty"`
	// EffectiveConnections is Kish's N²/Σ m_j², m_j the requests counted on
	// connection j: the draws the requests are worth when every request of
	// a connection goes where the connection went. 0 when not known.
	EffectiveConnections float64 `json:"effectiveConnections,omitempty"`
	// Balancing is the balancing the scenario declares or assumes: request
	// or connection. It decides the plan and the advice; the effective n
	// comes from the data either way.
	Balancing       Balancing `json:"balancing"`
	BalancingReason string    `json:"balancingReason,omitempty"`
	// ObservedDesignEffect is the cluster-robust estimate of how much more
	// the counts vary between connections than independent draws would,
	// the largest over the buckets; 0 when it cannot be estimated (fewer
	// than 2 connections, or every request in one bucket).
	ObservedDesignEffect float64 `json:"observedDesignEffect,omitempty"`
	// Dependence says how EffectiveN was found: independent (no connection
	// reused), estimated, routing (estimated from the routing of the same
	// requests), few-connections or one-bucket (the worst case, the data
	// cannot show the dependence), or unknown (no per-connection counts).
	Dependence Dependence `json:"dependence,omitempty"`
}

// Dependence is how the effective n of a verdict was found (docs/statistics.md §3.3).
type Dependence string

// How the effective n was found.
const (
	// DependenceNone: no connection carried two counted requests.
	DependenceNone Dependence = "independent"
	// DependenceEstimated: from the counts' own observed design effect.
	DependenceEstimated Dependence = "estimated"
	// DependenceRouting: from the observed design effect of the routing of
	// the same requests (Sampling.RoutingDesignEffect).
	DependenceRouting Dependence = "routing"
	// DependenceFewConnections: too few connections, or too uneven, to
	// estimate the design effect from (estimable): the worst case.
	DependenceFewConnections Dependence = "few-connections"
	// DependenceOneBucket: every request in one bucket, so the data show
	// nothing about the dependence: the worst case.
	DependenceOneBucket Dependence = "one-bucket"
	// DependenceNoRouting: a success rate whose requests' routing was not
	// attributed, so nothing shows how failures on one connection depend
	// on each other: the worst case.
	DependenceNoRouting Dependence = "no-routing"
	// DependenceUnknown: no per-connection counts; each request is taken as
	// its own connection, which the reason says.
	DependenceUnknown Dependence = "unknown"
)

// MinEstimateConnections is the fewest connections from which the design
// effect is estimated from the data, and twice the fewest effective
// connections (Kish's n²/Σm², which uneven connection sizes lower); with
// fewer, the cluster-robust variance rests on too few units (its degrees
// of freedom are the connections less one) and each connection counts as
// one draw, the worst case (docs/statistics.md §3.3).
const MinEstimateConnections = 10

// estimable reports whether per-connection statistics have enough
// connections, evenly enough used, to estimate a design effect from.
func estimable(u *UnitStats, n int64) bool {
	nf := float64(n)
	return u != nil && u.Units >= MinEstimateConnections && u.SumMM > 0 && nf*nf/u.SumMM >= MinEstimateConnections/2
}

// Advice says what would settle an INCONCLUSIVE verdict.
type Advice struct {
	// RequiredN is the total number of requests that would settle it;
	// 0 when more requests alone would not (see RequiredConnections).
	RequiredN int64 `json:"requiredN,omitempty"`
	// RequiredConnections is set when the evidence is limited by the
	// attack's fixed connections under per-connection balancing: the
	// connections needed (or keepAlive: false with that many requests).
	RequiredConnections int64 `json:"requiredConnections,omitempty"`
	// draws is the effective draws behind the advice: with keepAlive
	// false every request is a connection, so that many requests.
	draws int64
}

// draws is the effective-n rule of docs/statistics.md §3.3 applied to one
// set of counts.
type draws struct {
	Evidence
	sampling Sampling
	// noUnits is set when the counts carry no per-connection statistics
	// and connections were reused or per-connection balancing is declared:
	// each request then counts as its own connection, which the reason says.
	noUnits bool
	// failN is the effective n at the design effect at the estimate, not
	// at the shares under test (drawsFor): never below EffectiveN, and
	// EffectiveN itself unless the design effect was estimated from the
	// counts. failInterval uses it.
	failN float64
}

// drawsFor applies the effective-n rule to counts c: the design effect is
// estimated from the per-connection counts whatever balancing is declared,
// n* = clamp(n/deff, n²/Σm², n); with too few connections to estimate it
// (estimable), or every request in one bucket and no routing estimate, the
// worst case n²/Σm².
//
// nulls are shares the split tests (its expected shares, by bucket): for
// the PASS side each bucket's design effect is also evaluated there, and
// the larger taken. Evaluated at the estimate alone, a connection carrying
// much of a bucket's requests pulls p̂ to itself and shrinks its own
// residual, so few uneven connections pinned to buckets look less
// clustered than they are; evaluated at the share under test, the
// residuals are what that hypothesis implies (the robust score test's
// variance, better calibrated with few clusters than the robust Wald's:
// Guo et al. 2005; §9.2 uses it for the same reason). A PASS is claimed
// near the expected share, where the two evaluations agree but for that
// bias.
//
// failN is the FAIL side's effective n, from the design effect at the
// estimate alone; failInterval says how it is used and why.
func drawsFor(c Counts, s Sampling, nulls ...map[string]float64) draws {
	n := c.Total()
	d := draws{sampling: s, Evidence: Evidence{N: n, EffectiveN: float64(n), DesignEffect: 1,
		Balancing: s.balancing(), BalancingReason: s.Reason, Dependence: DependenceNone}}
	d.failN = d.EffectiveN
	u := c.Units
	atNull := 0.0 // the largest design effect at the shares under test
	if u != nil {
		d.Connections = u.Units
		d.ObservedDesignEffect = observedDesignEffect(c)
		atNull = d.ObservedDesignEffect
		// With every request in one bucket the counts show nothing about
		// dependence, at any share: no null makes them estimable.
		if !spread(c) {
			nulls = nil
		}
		for _, null := range nulls {
			for i, b := range c.Buckets {
				atNull = math.Max(atNull, designEffectAt(c, i, null[b]))
			}
		}
	}
	if n == 0 {
		return d
	}
	nf := float64(n)
	if u == nil || u.Units < 1 || !(u.SumMM > 0) {
		if d.Balancing == PerConnection {
			d.noUnits, d.Dependence = true, DependenceUnknown
		}
		return d
	}
	// Σ m_j² ≥ Σ m_j = n, so n²/Σm² ≤ n; the min guards round-off.
	worst := math.Min(nf, nf*nf/u.SumMM)
	d.EffectiveConnections = worst
	deff, failDeff, none := atNull, d.ObservedDesignEffect, DependenceOneBucket
	d.Dependence = DependenceEstimated
	switch {
	case s.routingOnly:
		deff, d.Dependence, none = s.RoutingDesignEffect, DependenceRouting, DependenceNoRouting
	case deff == 0 && s.RoutingDesignEffect > 0:
		deff, d.Dependence = s.RoutingDesignEffect, DependenceRouting
	}
	switch {
	case nf-worst < 1e-9*nf:
		d.Dependence = DependenceNone
		return d
	case !estimable(u, n):
		d.EffectiveN, d.Dependence = worst, DependenceFewConnections
	case deff == 0:
		d.EffectiveN, d.Dependence = worst, none
	default:
		d.EffectiveN = math.Max(worst, math.Min(nf, nf/deff))
		if failDeff > 0 {
			d.failN = math.Max(worst, math.Min(nf, nf/failDeff))
		}
	}
	if d.Dependence != DependenceEstimated || d.failN < d.EffectiveN {
		d.failN = d.EffectiveN
	}
	d.DesignEffect = nf / d.EffectiveN
	return d
}

// failInterval is bucket i's FAIL interval at level 1-a, given pass, the
// interval at the PASS side's n* (drawsFor). A split's PASS side evaluates
// the design effect at the expected shares too, which is right near them,
// where a PASS is claimed; but a FAIL is claimed far from them, and there
// the residuals x − p₀m grow with (p̂ − p₀)²·Σm², a term that measures the
// deviation, not the clustering. CI saw a per-request 50/50 data plane
// judged against 90/10 over 21 uneven connections get a "design effect"
// of 207, n* at the floor n_K and an INCONCLUSIVE verdict
// (docs/statistics.md §3.3). Neither alternative alone calibrates:
//
//   - the design effect at the estimate (failN) is the robust Wald
//     variance, liberal over few uneven connections pinned to buckets
//     (false FAIL up to 5α at 16 connections: the bias drawsFor names);
//   - the robust score test at the band's edge, reject p_e when
//     (x − p_e·n)² > t²·C/(C−1)·Σ_j (x_j − p_e·m_j)², t at n_K − 1
//     degrees of freedom (the variance under the hypothesis tested, as in
//     §9.2), holds its level there but, resting on the data alone, cannot
//     reject past about t² ≈ n_K, and on small counts is the score
//     interval Clopper–Pearson replaced (§2.3).
//
// So a share p is rejected when the PASS side's interval rejects it (the
// rule before, conservative), or when both the interval at failN and the
// score test do: the interval returned is pass ∩ (atEstimate ∪ score),
// each of which contains p̂, so the union is an interval. Calibrated by
// TestCalibrationDependence (docs/statistics.md §7.2). Only when the
// design effect was estimated from the counts (failN > EffectiveN), and
// never with requests whose bucket is unknown: where they came from on
// each connection is not known, so the score cannot be evaluated.
func (d draws) failInterval(c Counts, i int, x int64, m IntervalMethod, a float64, pass Interval) Interval {
	if !(d.failN > d.EffectiveN) || d.N == 0 {
		return pass
	}
	est := BinomialInterval(m, float64(x)*d.failN/float64(d.N), d.failN, a)
	score := robustScoreInterval(c, i, x, d.EffectiveConnections, a)
	return Interval{Lo: math.Max(pass.Lo, math.Min(est.Lo, score.Lo)), Hi: math.Min(pass.Hi, math.Max(est.Hi, score.Hi))}
}

// robustScoreInterval is the set of shares p in [0,1] that the robust
// score test does not reject at level a (two-sided): (x − p·n)² ≤
// t²·C/(C−1)·R(p), R(p) = Σ_j (x_ij − p·m_j)² = SumXX − 2p·SumXM + p²·SumMM,
// t the Student quantile at 1 − a/2 with n_K − 1 degrees of freedom
// (the effective number of connections less one: fewer than C − 1 when
// connections are uneven). A quadratic inequality in p, a·p² − 2b·p + e ≤
// 0: when a > 0 an interval around p̂ (Fieller's form); otherwise the test
// cannot reject a bounded set of shares on its own, and it is [0,1].
func robustScoreInterval(c Counts, i int, x int64, nK, a float64) Interval {
	u := c.Units
	all := Interval{0, 1}
	if u == nil || u.Units < 2 || !(nK > 1) {
		return all
	}
	// A bucket only expected (i < 0) got nothing on any connection.
	var sxx, sxm float64
	if i >= 0 {
		if i >= len(u.SumXX) || i >= len(u.SumXM) {
			return all
		}
		sxx, sxm = u.SumXX[i], u.SumXM[i]
	}
	n, xf, cf := float64(c.Total()), float64(x), float64(u.Units)
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: nK - 1}.Quantile(1 - a/2)
	k := t * t * cf / (cf - 1)
	qa := n*n - k*u.SumMM
	qb := xf*n - k*sxm
	qe := xf*xf - k*sxx
	disc := qb*qb - qa*qe
	if !(qa > 0) || disc < 0 {
		// disc < 0 with qa > 0 would leave no share at all, p̂ included,
		// which only round-off in R(p̂) ≥ 0 can make: reject nothing.
		return all
	}
	root := math.Sqrt(disc)
	return Interval{Lo: clamp01((qb - root) / qa), Hi: clamp01((qb + root) / qa)}
}

// ratio is the effective draws per request.
func (d draws) ratio() float64 {
	if d.N == 0 {
		return 1
	}
	return d.EffectiveN / float64(d.N)
}

// scaled is a count of requests as effective draws.
func (d draws) scaled(x int64) float64 { return float64(x) * d.ratio() }

// connectionLimited reports whether more requests on the same connections
// would add no evidence: the attack's fixed keep-alive connections, and
// the verdict took each connection as one draw (declared per-connection
// balancing, clustering found in the data, or too little data to show its
// absence).
//
// When the worst case was taken, connections limit the evidence even if the
// attack's are not known to be fixed: the counts show them reused.
func (d draws) connectionLimited() bool {
	switch d.Dependence {
	case DependenceFewConnections, DependenceOneBucket, DependenceNoRouting:
		return true
	case DependenceNone, DependenceUnknown:
		// Nothing counted yet: the plan's unit.
		return d.N == 0 && d.sampling.FixedConnections > 0 && d.Balancing == PerConnection
	}
	return d.sampling.FixedConnections > 0 && (d.Balancing == PerConnection || d.DesignEffect >= suspectDesignEffect)
}

// describe says what the requests were worth, quoting real requests and
// connections, never effective counts as if they were requests.
func (d draws) describe() string {
	switch d.Dependence {
	case DependenceUnknown:
		return fmt.Sprintf("%d requests without per-connection counts, each taken as its own connection", d.N)
	case DependenceNone:
		if d.Connections > 0 {
			return fmt.Sprintf("%d requests on as many connections, each an independent draw", d.N)
		}
		return fmt.Sprintf("%d requests, each taken as an independent draw (no per-connection counts)", d.N)
	case DependenceFewConnections:
		return fmt.Sprintf("%d requests on %d connections, worth %s independent draws: with fewer than %d connections (or connections this uneven) the data cannot show that requests on one connection are routed independently, so each connection counts as one draw",
			d.N, d.Connections, fmtDraws(d.EffectiveN), MinEstimateConnections)
	case DependenceOneBucket:
		return fmt.Sprintf("%d requests on %d connections, worth %s independent draws: every request is in one bucket, so the data cannot show that requests on one connection are routed independently, and each connection counts as one draw",
			d.N, d.Connections, fmtDraws(d.EffectiveN))
	case DependenceNoRouting:
		return fmt.Sprintf("%d requests on %d connections, worth %s independent draws: the routing of these requests was not attributed, so the data cannot show that requests on one connection fail independently, and each connection counts as one draw",
			d.N, d.Connections, fmtDraws(d.EffectiveN))
	}
	from := "the counts"
	if d.Dependence == DependenceRouting {
		from = "the routing of the same requests"
	}
	text := fmt.Sprintf("%d requests on %d connections, worth %s independent draws (design effect %.3g estimated from %s, connections as clusters; %s if each connection were one draw)",
		d.N, d.Connections, fmtDraws(d.EffectiveN), d.DesignEffect, from, fmtDraws(d.EffectiveConnections))
	if d.failN > d.EffectiveN*(1+1e-9) {
		text += fmt.Sprintf("; FAIL also at %s draws (design effect %.3g at the observed shares, not the expected ones) where the robust score test at the band's edge agrees",
			fmtDraws(d.failN), float64(d.N)/d.failN)
	}
	return text
}

// diagnostic is the remark on clustering found under assumed per-request
// balancing: requests on one connection went to the same bucket far more
// often than independent draws would. The verdict already accounts for it
// (docs/statistics.md §3.3); the remark says how to plan for it.
//
// The design effect quoted and compared is the one at the observed shares
// (ObservedDesignEffect), never a split's PASS-side one evaluated at the
// expected shares: far from them that one grows with the deviation itself
// and would call a per-request data plane that is simply off "clustered".
func (d draws) diagnostic() string {
	if d.Balancing == PerConnection || d.Dependence != DependenceEstimated && d.Dependence != DependenceRouting {
		return ""
	}
	what, deff := "requests on one connection went to the same bucket", d.ObservedDesignEffect
	if d.Dependence == DependenceRouting {
		// A success rate's counts (or one bucket's) show no clustering of
		// their own: the estimate quoted is the routing's that was used.
		what, deff = "requests on one connection were routed to the same place", d.sampling.RoutingDesignEffect
	}
	// Compared capped by the worst case n/n_K, as the factor a verdict
	// uses is; quoted as estimated.
	factor := deff
	if d.EffectiveConnections > 0 {
		factor = math.Min(deff, float64(d.N)/d.EffectiveConnections)
	}
	if factor < suspectDesignEffect {
		return ""
	}
	return fmt.Sprintf("; note: %s more often than independent draws would (observed design effect %.3g over %d connections), which the verdict accounts for; the mesh may balance per connection: set balancing: connection so that plan asks for connections",
		what, deff, d.Connections)
}

// suspectDesignEffect is where the clustering found is worth a remark and
// makes connections, not requests, the advice: below 2 it costs little.
const suspectDesignEffect = 2

// advise converts the effective draws that would settle a verdict into
// requests, or into connections when connections limit the evidence.
// need <= 0 means nothing settles it.
func (d draws) advise(need float64) Advice {
	if !(need > 0) || math.IsInf(need, 1) {
		return Advice{}
	}
	if d.connectionLimited() {
		// The same unevenness of connection sizes on more connections:
		// n_eff grows with C at the rate it has now (one draw per
		// connection before any was seen).
		perConn := 1.0
		if d.Connections > 0 && d.EffectiveN > 0 {
			perConn = d.EffectiveN / float64(d.Connections)
		}
		return Advice{RequiredConnections: ceilN(need / perConn), draws: ceilN(need)}
	}
	r := d.ratio()
	if d.N == 0 || !(r > 0) {
		r = 1
	}
	return Advice{RequiredN: ceilN(need / r), draws: ceilN(need)}
}

// text is the reason's clause for an Advice.
func (a Advice) text() string {
	switch {
	case a.RequiredConnections > 0:
		return fmt.Sprintf(": more requests on the same connections settle little while each connection counts as one draw; about %d connections would (attack.concurrency, or attack.connections in open loop), or keepAlive: false with about %d requests; under a balancer that picks per connection, declare balancing: connection so that plan asks for connections",
			a.RequiredConnections, a.draws)
	case a.RequiredN > 0:
		return fmt.Sprintf(": about %d requests in total would settle it", a.RequiredN)
	}
	return ""
}

// observedDesignEffect is the cluster-robust estimate of the design
// effect: for each bucket whose share p̂ lies strictly inside (0,1), the
// between-connection variance C/(C-1)·Σ_j (x_ij - p̂ m_j)²/n² over the
// binomial p̂(1-p̂)/n; the largest over the buckets. 0 when it cannot be
// estimated.
func observedDesignEffect(c Counts) float64 {
	u := c.Units
	n := c.Total()
	if u == nil || u.Units < 2 || n == 0 || len(u.SumXX) != len(c.N) || len(u.SumXM) != len(c.N) {
		return 0
	}
	deff := 0.0
	for i, x := range c.N {
		deff = math.Max(deff, designEffectAt(c, i, float64(x)/float64(n)))
	}
	return deff
}

// spread reports whether some bucket holds some but not all requests.
func spread(c Counts) bool {
	n := c.Total()
	for _, x := range c.N {
		if x > 0 && x < n {
			return true
		}
	}
	return false
}

// designEffectAt is bucket i's cluster-robust design effect evaluated at
// the share p, C/(C-1)·Σ_j (x_ij - p m_j)² / (n p(1-p)); 0 when p is not
// strictly inside (0,1) or it cannot be estimated.
func designEffectAt(c Counts, i int, p float64) float64 {
	u := c.Units
	n := float64(c.Total())
	if u == nil || u.Units < 2 || n == 0 || !(p > 0 && p < 1) || i >= len(u.SumXX) || i >= len(u.SumXM) {
		return 0
	}
	cf := float64(u.Units)
	resid := math.Max(u.SumXX[i]-2*p*u.SumXM[i]+p*p*u.SumMM, 0)
	return cf / (cf - 1) * resid / (n * p * (1 - p))
}

// fmtDraws prints an effective number of draws: whole when it is one.
func fmtDraws(v float64) string {
	if math.Abs(v-math.Round(v)) < 1e-6 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// ceilN rounds a number of draws up, saturating far beyond any real run.
func ceilN(v float64) int64 {
	if v >= float64(math.MaxInt64/2) || math.IsNaN(v) {
		return math.MaxInt64 / 2
	}
	return int64(math.Ceil(v - 1e-9))
}

// RoutingDesignEffect is the routing's design effect for
// Sampling.RoutingDesignEffect: over the given dimensions' counts (the
// routing of one source's requests: by cluster, pod, version) with enough
// connections to estimate it from (estimable), the largest pooled
// estimate, Σ_i resid_i / Σ_i n·p̂_i(1-p̂_i) (the mean design effect of
// Rao and Scott 1981, with the buckets' residuals of observedDesignEffect);
// pooling over the buckets gives it (C-1)(k-1) degrees of freedom under
// independent routing instead of one bucket's C-1. 0 when none shows it.
func RoutingDesignEffect(dims ...Counts) float64 {
	deff := 0.0
	for _, c := range dims {
		u := c.Units
		n := float64(c.Total())
		if !estimable(u, c.Total()) || len(u.SumXX) != len(c.N) || len(u.SumXM) != len(c.N) {
			continue
		}
		var resid, binom float64
		for i, x := range c.N {
			p := float64(x) / n
			if p <= 0 || p >= 1 {
				continue
			}
			resid += math.Max(u.SumXX[i]-2*p*u.SumXM[i]+p*p*u.SumMM, 0)
			binom += n * p * (1 - p)
		}
		if binom > 0 {
			cf := float64(u.Units)
			deff = math.Max(deff, cf/(cf-1)*resid/binom)
		}
	}
	return deff
}
