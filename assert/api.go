// Package assert turns observed counts into verdicts: PASS when the data
// show the mesh behaves as expected within a margin, FAIL when they show it
// does not, INCONCLUSIVE when there is not enough evidence either way.
// The method is docs/statistics.md: PASS by exact one-sided tests per
// bucket (an intersection–union test), FAIL by Bonferroni intervals whose
// ends hold exactly, one effective-n rule from the attack's sampling units
// for every kind of expectation, a planner from the exact power of that rule,
// and Pearson chi-square as the sample-ratio-mismatch view.
package assert

import "fmt"

// Verdict is the outcome of one expectation or of a whole run.
type Verdict int

// Verdicts, ordered so that the worst of several is the maximum.
const (
	Pass Verdict = iota
	Inconclusive
	Fail
)

// String returns PASS, INCONCLUSIVE or FAIL.
func (v Verdict) String() string {
	switch v {
	case Pass:
		return "PASS"
	case Inconclusive:
		return "INCONCLUSIVE"
	default:
		return "FAIL"
	}
}

// MarshalText makes verdicts readable in JSON reports.
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// Worst combines verdicts: any FAIL fails, else any INCONCLUSIVE, else PASS.
func Worst(vs ...Verdict) Verdict {
	w := Pass
	for _, v := range vs {
		if v > w {
			w = v
		}
	}
	return w
}

// IntervalMethod selects the interval a split's FAIL is judged with
// (docs/statistics.md §2); PASS always uses Clopper–Pearson.
type IntervalMethod string

// Interval methods. Wilson is the score interval with continuity
// correction and Clopper–Pearson ends at small counts (WilsonCC).
const (
	Wilson         IntervalMethod = "wilson"
	ClopperPearson IntervalMethod = "clopper-pearson"
)

// String names the method as reports print it.
func (m IntervalMethod) String() string {
	switch m {
	case Wilson:
		return "Wilson (small-count corrected)"
	case ClopperPearson, "":
		return "Clopper–Pearson"
	}
	return string(m)
}

// Interval is a closed interval of shares in [0,1].
type Interval struct {
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

// UnitStats are the sufficient statistics of per-connection (per sampling
// unit) counts (docs/statistics.md §3): with x_ij the requests of
// connection j in bucket i and m_j = sum_i x_ij,
//
//	Units = C, SumMM = sum_j m_j^2, SumXX[i] = sum_j x_ij^2, SumXM[i] = sum_j x_ij*m_j
//
// SumMM alone gives the effective number of draws under per-connection
// balancing, n²/SumMM (Kish); the other sums give the cluster-robust
// estimate of the design effect that is reported as a diagnostic, since
// sum_j (x_ij - p*m_j)^2 = SumXX[i] - 2p*SumXM[i] + p^2*SumMM.
// They are kept instead of the per-connection matrix so memory does not grow
// with the number of connections. Index i follows Counts.Buckets; SumXX and
// SumXM may both be nil when only the connection sizes are known.
type UnitStats struct {
	Units int64     `json:"units"`
	SumMM float64   `json:"sumMM"`
	SumXX []float64 `json:"sumXX"`
	SumXM []float64 `json:"sumXM"`
}

// Counts are the observations of one dimension (cluster, pod or version).
type Counts struct {
	Buckets []string `json:"buckets"`
	N       []int64  `json:"n"`
	// Units is nil when requests are independent draws (no connection
	// reuse known); otherwise the per-connection statistics.
	Units *UnitStats `json:"units,omitempty"`
}

// Balancing is how the mesh's entry picks a backend, which decides what an
// independent draw is (docs/statistics.md §3).
type Balancing string

// Balancings.
const (
	// PerRequest: every request is routed on its own (an Envoy sidecar or
	// gateway's HTTP balancing, weighted clusters, mirror decisions).
	PerRequest Balancing = "request"
	// PerConnection: every request on a connection goes where the
	// connection went (Skupper's router, L4 balancing).
	PerConnection Balancing = "connection"
)

// Sampling says how the counts were drawn: how the mesh balances and
// whether the attack's connections are fixed, which decides whether more
// requests or more connections would add evidence.
type Sampling struct {
	// Balancing is "" for PerRequest.
	Balancing Balancing
	// Reason says why this balancing was assumed, for the report.
	Reason string
	// FixedConnections is how many connections the attack keeps open and
	// reuses (closed loop with keep-alive: its concurrency; open loop with
	// keep-alive: its lanes); 0 when every request may open its own
	// connection (keepAlive false) or it is not known. Under per-connection
	// balancing with fixed connections, more requests settle nothing and the
	// advice is a number of connections.
	FixedConnections int64
	// RoutingDesignEffect is the observed design effect of the routing of
	// the same requests (the largest over the source's attributed
	// dimensions with at least MinEstimateConnections effective
	// connections; RoutingDesignEffect computes it), 0 when unknown. It
	// stands in for the counts' own when those show nothing (every request
	// in one bucket: a 100% only), and it alone decides a success rate's
	// effective n (docs/statistics.md §3.3).
	RoutingDesignEffect float64
	// routingOnly takes the design effect from RoutingDesignEffect alone:
	// set by SuccessRate, whose failures follow the routing, so that its
	// effective n does not depend on the outcomes and the verdict stays
	// monotone in the failures.
	routingOnly bool
}

func (s Sampling) balancing() Balancing {
	if s.Balancing == "" {
		return PerRequest
	}
	return s.Balancing
}

// Validate reports an unknown balancing.
func (s Sampling) Validate() error {
	switch s.Balancing {
	case "", PerRequest, PerConnection:
		return nil
	}
	return fmt.Errorf("balancing %q: want %s or %s", s.Balancing, PerRequest, PerConnection)
}
