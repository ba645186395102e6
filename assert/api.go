// Package assert turns observed counts into verdicts: PASS when the data
// show the mesh behaves as expected within a margin, FAIL when they show it
// does not, INCONCLUSIVE when there is not enough evidence either way.
// The method is DESIGN.md section 4: simultaneous per-bucket intervals,
// an equivalence (two one-sided tests) decision, Pearson chi-square for the
// sample-ratio-mismatch view, and a cluster-robust variance when requests
// share connections.
package assert

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

// IntervalMethod selects the binomial confidence interval.
type IntervalMethod string

// Interval methods.
const (
	Wilson         IntervalMethod = "wilson"
	ClopperPearson IntervalMethod = "clopper-pearson"
)

// Interval is a closed interval of shares in [0,1].
type Interval struct {
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

// UnitStats are the sufficient statistics of per-connection (per sampling
// unit) counts for the cluster-robust variance of DESIGN.md section 4:
// with x_ij the requests of connection j in bucket i and m_j = sum_i x_ij,
//
//	Units = C, SumMM = sum_j m_j^2, SumXX[i] = sum_j x_ij^2, SumXM[i] = sum_j x_ij*m_j
//
// so that sum_j (x_ij - p*m_j)^2 = SumXX[i] - 2p*SumXM[i] + p^2*SumMM.
// They are kept instead of the per-connection matrix so memory does not grow
// with the number of connections. Index i follows Counts.Buckets.
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
