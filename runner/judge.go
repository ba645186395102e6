package runner

import (
	"fmt"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// judge maps each scenario expectation onto the assert call that decides it.
type judge struct {
	sc          *scenarios.Scenario
	connections int
}

func newJudge(sc *scenarios.Scenario, o attack.Options) *judge {
	c := o.Concurrency
	if o.Connections > 0 {
		c = o.Connections
	} else if c == 0 {
		c = attack.DefaultLanes
	}
	return &judge{sc: sc, connections: c}
}

// settled reports whether every expectation already has a PASS or FAIL at
// the given (interim) confidence, which is when early stopping may stop.
func (j *judge) settled(s tally.Snapshot, confidence float64) bool {
	for _, e := range j.evaluate(s, confidence) {
		if e.Verdict == assert.Inconclusive {
			return false
		}
	}
	return true
}

func (j *judge) evaluate(s tally.Snapshot, confidence float64) []reports.Expectation {
	out := make([]reports.Expectation, 0, len(j.sc.Expect))
	for _, e := range j.sc.Expect {
		out = append(out, j.one(e, s, confidence))
	}
	return out
}

func (j *judge) one(e scenarios.Expectation, s tally.Snapshot, confidence float64) reports.Expectation {
	st := j.sc.Statistics
	method := assert.IntervalMethod(st.Interval)
	r := reports.Expectation{Name: e.Name}
	switch {
	case e.Split != nil:
		sp := e.Split
		r.Kind, r.By = "split", sp.By
		model, err := j.model(sp)
		if err != nil {
			r.Verdict, r.Reason = assert.Fail, "expected split: "+err.Error()
			return r
		}
		spec := assert.SplitSpec{
			Expected:   model.Shares,
			Margin:     st.Margin.Fraction(),
			Relative:   st.Relative,
			Confidence: confidence,
			Method:     method,
			Power:      st.Power,
		}
		if sp.Margin != nil {
			spec.Margin = sp.Margin.Fraction()
		}
		if sp.Relative != nil {
			spec.Relative = *sp.Relative
		}
		if sp.Confidence > 0 && confidence == st.Confidence {
			spec.Confidence = sp.Confidence
		}
		res := assert.Split(s.Dimensions[sp.By], spec)
		r.Model, r.Split = &model, &res
		r.Verdict, r.Reason, r.RequiredN = res.Verdict, res.Reason, res.RequiredN
	case e.Reached != nil:
		r.Kind, r.By = "reached", e.Reached.By
		res := assert.Reached(s.Dimensions[e.Reached.By], e.Reached.Buckets)
		setResult(&r, res)
	case e.Only != nil:
		r.Kind, r.By = "only", e.Only.By
		res := assert.Only(s.Dimensions[e.Only.By], e.Only.Buckets, margin(e.Only.Margin), confidence, method)
		setResult(&r, res)
	case e.Never != nil:
		r.Kind, r.By = "never", e.Never.By
		res := assert.Never(s.Dimensions[e.Never.By], e.Never.Buckets, margin(e.Never.Margin), confidence, method)
		setResult(&r, res)
	case e.SuccessRate != nil:
		r.Kind = "successRate"
		oc := s.Dimensions[tally.Outcome]
		var ok int64
		for i, b := range oc.Buckets {
			if b == tally.Success {
				ok = oc.N[i]
			}
		}
		units := outcomeUnits(oc)
		n := s.Total
		if ok == n && n > 0 {
			// With no failure at all the per-connection variance of the
			// success rate cannot be estimated and assert would assume every
			// connection is one draw. How sticky connections are to backends
			// is measured by the cluster split, so its design effect stands in.
			if deff, known := clusterDesignEffect(s); known {
				units = nil
				n = int64(float64(n) / deff)
				ok = n
			}
		}
		res := assert.SuccessRate(ok, n, e.SuccessRate.AtLeast.Fraction(), confidence, method, units)
		setResult(&r, res)
	case e.Latency != nil:
		r.Kind = "latency"
		setResult(&r, latency(e.Latency, s))
	}
	return r
}

func setResult(r *reports.Expectation, res assert.Result) {
	r.Result = &res
	r.Verdict, r.Reason, r.RequiredN = res.Verdict, res.Reason, res.RequiredN
}

func margin(p *scenarios.Percent) float64 {
	if p == nil {
		return 0
	}
	return p.Fraction()
}

// outcomeUnits reorders the outcome dimension's per-connection sums into
// the [success, failure] order assert.SuccessRate expects.
func outcomeUnits(c assert.Counts) *assert.UnitStats {
	if c.Units == nil {
		return nil
	}
	u := &assert.UnitStats{Units: c.Units.Units, SumMM: c.Units.SumMM, SumXX: make([]float64, 2), SumXM: make([]float64, 2)}
	for i, b := range c.Buckets {
		k := 1
		if b == tally.Success {
			k = 0
		}
		u.SumXX[k], u.SumXM[k] = c.Units.SumXX[i], c.Units.SumXM[i]
	}
	return u
}

// latency compares the estimated percentile with the bound. Percentiles come
// from vegeta's t-digest, an estimate, so no interval is claimed.
func latency(l *scenarios.Latency, s tally.Snapshot) assert.Result {
	if s.Metrics.Requests == 0 {
		return assert.Result{Verdict: assert.Inconclusive, Reason: "no requests, no latency"}
	}
	q := s.Metrics.Latencies.Quantile(l.Percentile / 100)
	res := assert.Result{Observed: q.Seconds()}
	if q < l.Below.Duration {
		res.Verdict = assert.Pass
		res.Reason = fmt.Sprintf("p%g latency %s is below %s", l.Percentile, q.Round(time.Microsecond), l.Below.Duration)
	} else {
		res.Verdict = assert.Fail
		res.Reason = fmt.Sprintf("p%g latency %s is not below %s", l.Percentile, q.Round(time.Microsecond), l.Below.Duration)
	}
	return res
}

// SplitModel computes the expected shares of a split expectation from the
// scenario alone (no inventory), as `mesh-verify plan` needs them.
func SplitModel(sc *scenarios.Scenario, sp *scenarios.Split) (assert.Shares, error) {
	ao := attackOptions(sc, "", "")
	return newJudge(sc, ao).model(sp)
}

// PlannedRequests is how many requests the scenario's attack will send, or
// 0 when only its duration bounds it in closed loop.
func PlannedRequests(sc *scenarios.Scenario) int64 {
	return plannedRequests(attackOptions(sc, "", ""))
}

// model computes the expected shares of a split expectation.
func (j *judge) model(sp *scenarios.Split) (assert.Shares, error) {
	switch sp.Model {
	case "weights":
		return assert.WeightsModel(sp.Weights)
	case "equal":
		b := sp.Buckets
		if len(b) == 0 && sp.By == "cluster" {
			for _, c := range j.sc.Clusters {
				b = append(b, c.Name)
			}
		}
		if len(b) == 0 {
			return assert.Shares{}, fmt.Errorf("model equal by %s needs buckets", sp.By)
		}
		return assert.EqualModel(b)
	case "equal-per-pod":
		return assert.EqualPerPodModel(sp.Pods)
	case "link-cost-inverse", "link-cost-balanced":
		costs := map[string]float64{}
		for _, c := range j.sc.Clusters {
			if _, in := sp.Pods[c.Name]; in && c.Cost != nil {
				costs[c.Name] = *c.Cost
			}
		}
		if sp.Model == "link-cost-inverse" {
			return assert.LinkCostInverseModel(costs, sp.Pods)
		}
		conns := sp.Connections
		if conns == 0 {
			conns = j.connections
		}
		if conns == 0 {
			return assert.Shares{}, fmt.Errorf("model link-cost-balanced needs split.connections (the concurrent connections the router balances)")
		}
		return assert.LinkCostBalancedModel(costs, sp.Pods, conns)
	}
	return assert.Shares{}, fmt.Errorf("unknown model %q", sp.Model)
}

// clusterDesignEffect is the design effect of the observed cluster split:
// near 1 when a connection's requests spread over clusters like independent
// draws, near the requests per connection when connections stick to one.
func clusterDesignEffect(s tally.Snapshot) (float64, bool) {
	c := s.Dimensions["cluster"]
	if len(c.Buckets) < 2 || c.Units == nil {
		return 0, false
	}
	exp := map[string]float64{}
	for _, b := range c.Buckets {
		exp[b] = 1 / float64(len(c.Buckets))
	}
	res := assert.Split(c, assert.SplitSpec{Expected: exp})
	if res.DesignEffect < 1 {
		return 1, true
	}
	return res.DesignEffect, true
}
