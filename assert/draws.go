package assert

import (
	"fmt"
	"math"
)

// Evidence is what the counts behind a verdict were worth, reported with
// every verdict so that a reader sees which sampling unit was assumed and
// why (docs/statistics.md §3).
type Evidence struct {
	// N is the number of requests counted.
	N int64 `json:"n"`
	// EffectiveN is what they are worth as independent draws: N under
	// per-request balancing, N²/Σ m_j² (Kish) under per-connection
	// balancing, with m_j the requests counted on connection j.
	EffectiveN float64 `json:"effectiveN"`
	// DesignEffect is N / EffectiveN, the factor the decision used.
	DesignEffect float64 `json:"designEffect"`
	// Connections is the number of connections the requests came over;
	// 0 when not known.
	Connections int64 `json:"connections,omitempty"`
	// Balancing is the sampling unit assumed: request or connection.
	Balancing       Balancing `json:"balancing"`
	BalancingReason string    `json:"balancingReason,omitempty"`
	// ObservedDesignEffect is the cluster-robust estimate of how much more
	// the counts vary between connections than independent draws would,
	// a diagnostic only: a value well above 1 under per-request balancing
	// suggests the mesh balances per connection. 0 when it cannot be
	// estimated (fewer than 2 connections, or every request in one bucket).
	ObservedDesignEffect float64 `json:"observedDesignEffect,omitempty"`
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

// draws is the effective-n rule of docs/statistics.md §3 applied to one
// set of counts. It depends only on how the attack spread the requests
// over connections, never on the outcomes, so every verdict built on it
// is monotone in the evidence.
type draws struct {
	Evidence
	sampling Sampling
	// noUnits is set under per-connection balancing when the counts carry
	// no per-connection statistics: each request then counts as its own
	// connection, which the reason says.
	noUnits bool
}

// drawsFor applies the effective-n rule to counts c.
func drawsFor(c Counts, s Sampling) draws {
	n := c.Total()
	d := draws{sampling: s, Evidence: Evidence{N: n, EffectiveN: float64(n), DesignEffect: 1,
		Balancing: s.balancing(), BalancingReason: s.Reason}}
	if u := c.Units; u != nil {
		d.Connections = u.Units
		d.ObservedDesignEffect = observedDesignEffect(c)
	}
	if d.Balancing != PerConnection || n == 0 {
		return d
	}
	u := c.Units
	if u == nil || u.Units < 1 || !(u.SumMM > 0) {
		d.noUnits = true
		return d
	}
	nf := float64(n)
	// Σ m_j² ≥ Σ m_j = n, so n_eff ≤ n; the min guards round-off.
	d.EffectiveN = math.Min(nf, nf*nf/u.SumMM)
	d.DesignEffect = nf / d.EffectiveN
	return d
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
// would add no evidence: per-connection balancing over the attack's fixed
// keep-alive connections.
func (d draws) connectionLimited() bool {
	return d.Balancing == PerConnection && d.sampling.FixedConnections > 0 && !d.noUnits
}

// describe says what the requests were worth, quoting real requests and
// connections, never effective counts as if they were requests.
func (d draws) describe() string {
	switch {
	case d.Balancing != PerConnection:
		return fmt.Sprintf("%d requests, each an independent draw under per-request balancing", d.N)
	case d.noUnits:
		return fmt.Sprintf("%d requests without per-connection counts, each taken as its own connection under per-connection balancing", d.N)
	case float64(d.N)-d.EffectiveN < 1e-9:
		return fmt.Sprintf("%d requests on as many connections, each an independent draw under per-connection balancing", d.N)
	}
	return fmt.Sprintf("%d requests on %d connections, worth %s independent draws under per-connection balancing",
		d.N, d.Connections, fmtDraws(d.EffectiveN))
}

// diagnostic is the remark on the observed design effect, when the
// assumption of per-request balancing looks wrong: requests on one
// connection went to the same bucket far more often than independent
// draws would (docs/statistics.md §3.3).
func (d draws) diagnostic() string {
	if d.Balancing == PerConnection || d.Connections < minDiagnosticConnections || d.ObservedDesignEffect < suspectDesignEffect {
		return ""
	}
	return fmt.Sprintf("; note: requests on one connection went to the same bucket more often than independent draws would (observed design effect %.3g over %d connections), so the mesh may balance per connection: set balancing: connection",
		d.ObservedDesignEffect, d.Connections)
}

// The diagnostic's thresholds: with fewer connections the estimate is too
// noisy to say anything, and below 2 the clustering costs little.
const (
	minDiagnosticConnections = 5
	suspectDesignEffect      = 2
)

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
		return fmt.Sprintf(": more requests on the same connections settle nothing under per-connection balancing; about %d connections would (attack.concurrency, or attack.connections in open loop), or keepAlive: false with about %d requests",
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
	nf, cf := float64(n), float64(u.Units)
	deff := 0.0
	for i, x := range c.N {
		p := float64(x) / nf
		if p <= 0 || p >= 1 {
			continue
		}
		resid := math.Max(u.SumXX[i]-2*p*u.SumXM[i]+p*p*u.SumMM, 0)
		deff = math.Max(deff, cf/(cf-1)*resid/(nf*p*(1-p)))
	}
	return deff
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
