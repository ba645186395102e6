package assert

import (
	"encoding/json"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
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

// betaQuantile is the Beta(a, b) quantile: Clopper–Pearson's ends by
// their definition.
func betaQuantile(a, b, p float64) float64 { return distuv.Beta{Alpha: a, Beta: b}.Quantile(p) }

var (
	half         = map[string]float64{"c2": 0.5, "c3": 0.5}
	perRequest   = Sampling{Balancing: PerRequest}
	perConnNoFix = Sampling{Balancing: PerConnection}
)

// perConn is per-connection balancing over c fixed keep-alive connections.
func perConn(c int64) Sampling { return Sampling{Balancing: PerConnection, FixedConnections: c} }
