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

// evidence is everything a verdict may draw on: the counts of each
// attribution source, the mirror join of the logs, and the ready pods.
type evidence struct {
	body    tally.Snapshot
	logs    *tally.Snapshot
	metrics *tally.Snapshot
	// logInfo is what the logs say beyond the counts (runner/evidence.go).
	logInfo *logEvidence
	// readyPods names the serving pods of the observed workloads per cluster.
	readyPods map[string][]string
	// recon reconciles each counting source with the requests answered;
	// config lists the scenario's mistakes the run revealed, by source;
	// rules says what each rule matched.
	recon  map[string]*reports.Reconciliation
	config map[string][]reports.ConfigError
	rules  []reports.RuleReport
}

// source returns the counts of one source; logs and metrics exist only
// once the attack is over and the logs settled.
func (ev evidence) source(name string) (tally.Snapshot, bool) {
	switch name {
	case scenarios.SourceLogs:
		if ev.logs == nil {
			return tally.Snapshot{}, false
		}
		return *ev.logs, true
	case scenarios.SourceMetrics:
		if ev.metrics == nil {
			return tally.Snapshot{}, false
		}
		return *ev.metrics, true
	}
	return ev.body, true
}

// settled reports whether every expectation already has a PASS or FAIL at
// the given (interim) confidence, which is when early stopping may stop.
// Expectations on logs or metrics are never settled early: those sources
// lag the responses and are read in full only after the attack.
func (j *judge) settled(ev evidence, confidence float64) bool {
	for _, e := range j.evaluate(ev, confidence) {
		if e.Verdict == assert.Inconclusive || e.Source != "" && e.Source != scenarios.SourceBody {
			return false
		}
	}
	return true
}

func (j *judge) evaluate(ev evidence, confidence float64) []reports.Expectation {
	out := make([]reports.Expectation, 0, len(j.sc.Expect))
	for _, e := range j.sc.Expect {
		out = append(out, j.one(e, ev, confidence))
	}
	return out
}

// sourceOf is the source an expectation reads (resolved by scenario defaults).
func sourceOf(e scenarios.Expectation) string {
	switch {
	case e.Split != nil:
		return e.Split.Source
	case e.Reached != nil:
		return e.Reached.Source
	case e.Only != nil:
		return e.Only.Source
	case e.Never != nil:
		return e.Never.Source
	case e.Mirror != nil:
		return scenarios.SourceLogs
	}
	return scenarios.SourceBody
}

func (j *judge) one(e scenarios.Expectation, ev evidence, confidence float64) reports.Expectation {
	st := j.sc.Statistics
	method := assert.IntervalMethod(st.Interval)
	r := reports.Expectation{Name: e.Name, Source: sourceOf(e)}
	if r.Source == "" {
		r.Source = scenarios.SourceBody
	}
	s, ok := ev.source(r.Source)
	if !ok {
		r.Kind, r.Verdict = e.Kind(), assert.Inconclusive
		r.Reason = fmt.Sprintf("no %s were read (yet): nothing to judge", r.Source)
		return r
	}
	if why := ev.unusable(e, r.Source); why != "" {
		r.Kind, r.Verdict, r.Reason = e.Kind(), assert.Inconclusive, why
		return r
	}
	switch {
	case e.Mirror != nil:
		r.Kind = "mirror"
		j.mirror(&r, e.Mirror, ev, confidence)
	case e.Split != nil:
		sp := e.Split
		r.Kind, r.By = "split", sp.By
		model, err := j.model(sp, ev.readyPods)
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
// scenario alone (no inventory), as `mesh-verify plan` needs them; a split
// by pod over inventoried pods cannot be planned this way.
func SplitModel(sc *scenarios.Scenario, sp *scenarios.Split) (assert.Shares, error) {
	ao := attackOptions(sc, "", "")
	return newJudge(sc, ao).model(sp, nil)
}

// PlannedRequests is how many requests the scenario's attack will send, or
// 0 when only its duration bounds it in closed loop.
func PlannedRequests(sc *scenarios.Scenario) int64 {
	return plannedRequests(attackOptions(sc, "", ""))
}

// model computes the expected shares of a split expectation; ready pods
// come from the scenario, else from the inventory. By pod, each cluster's
// share is spread evenly over its ready pods, named by the inventory.
func (j *judge) model(sp *scenarios.Split, ready map[string][]string) (assert.Shares, error) {
	s, err := j.clusterModel(sp, ready)
	if err != nil || sp.By != "pod" || !perPodModel(sp.Model) {
		return s, err
	}
	if len(ready) == 0 {
		return assert.Shares{}, fmt.Errorf("model %s by pod needs the inventory's pod names: nothing was inventoried", sp.Model)
	}
	byPod := assert.Shares{Shares: map[string]float64{}, Model: s.Model + " by pod", Explanation: s.Explanation}
	for c, share := range s.Shares {
		names := ready[c]
		if share > 0 && len(names) == 0 {
			return assert.Shares{}, fmt.Errorf("model %s by pod: cluster %s has a share but no ready pod in the inventory", sp.Model, c)
		}
		for _, n := range names {
			byPod.Shares[n] = share / float64(len(names))
		}
	}
	byPod.Explanation = append(append([]string(nil), s.Explanation...),
		"each cluster's share is spread evenly over its ready pods (from the inventory).")
	return byPod, nil
}

func perPodModel(m string) bool {
	return m == "equal-per-pod" || m == "link-cost-inverse" || m == "link-cost-balanced"
}

// clusterModel computes the expected shares per cluster (or per the
// scenario's own buckets for weights and equal).
func (j *judge) clusterModel(sp *scenarios.Split, ready map[string][]string) (assert.Shares, error) {
	pods := sp.Pods
	if len(pods) == 0 && len(ready) > 0 {
		pods = map[string]int{}
		in := map[string]bool{}
		for _, b := range sp.Buckets {
			in[b] = true
		}
		for _, c := range j.sc.Clusters {
			if len(in) == 0 || in[c.Name] {
				pods[c.Name] = len(ready[c.Name])
			}
		}
		if j.sc.Target.Forward != nil {
			// The entry's own cluster serves nothing unless observed pods run there.
			if n, ok := pods[j.sc.Target.Forward.Cluster]; ok && n == 0 {
				delete(pods, j.sc.Target.Forward.Cluster)
			}
		}
	}
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
		if len(b) == 0 && sp.By == "pod" {
			for _, c := range j.sc.Clusters {
				b = append(b, ready[c.Name]...)
			}
		}
		if len(b) == 0 {
			return assert.Shares{}, fmt.Errorf("model equal by %s needs buckets", sp.By)
		}
		return assert.EqualModel(b)
	case "equal-per-pod":
		return assert.EqualPerPodModel(pods)
	case "link-cost-inverse", "link-cost-balanced":
		costs := map[string]float64{}
		for _, c := range j.sc.Clusters {
			if _, in := pods[c.Name]; in && c.Cost != nil {
				costs[c.Name] = *c.Cost
			}
		}
		if sp.Model == "link-cost-inverse" {
			return assert.LinkCostInverseModel(costs, pods)
		}
		conns := sp.Connections
		if conns == 0 {
			conns = j.connections
		}
		if conns == 0 {
			return assert.Shares{}, fmt.Errorf("model link-cost-balanced needs split.connections (the concurrent connections the router balances)")
		}
		return assert.LinkCostBalancedModel(costs, pods, conns)
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

// mirror judges the share of primary requests whose copy reached the mirror
// target, q̂ = k / n, from the counts mirrorCounts finds (README.md,
// mirroring).
func (j *judge) mirror(r *reports.Expectation, m *scenarios.MirrorExpect, ev evidence, confidence float64) {
	st := j.sc.Statistics
	mc := ev.mirrorCounts(m)
	if mc.unusable != "" {
		r.Verdict, r.Reason = assert.Inconclusive, mc.unusable
		return
	}
	n, k, basis := mc.n, mc.k, mc.basis
	model, err := assert.MirrorModel(100 * m.Percent.Fraction())
	if err != nil {
		r.Verdict, r.Reason = assert.Fail, err.Error()
		return
	}
	spec := assert.SplitSpec{Expected: model.Shares, Margin: st.Margin.Fraction(), Confidence: confidence,
		Method: assert.IntervalMethod(st.Interval), Power: st.Power}
	if m.Margin != nil {
		spec.Margin = m.Margin.Fraction()
	}
	// Envoy decides per request whether to mirror, so the requests are
	// independent draws here whatever connection carried them.
	c := assert.Counts{Buckets: []string{assert.BucketMirrored, assert.BucketNotMirrored}, N: []int64{k, n - k}}
	res := assert.Split(c, spec)
	r.By, r.Model, r.Split = "mirror", &model, &res
	r.Verdict, r.RequiredN = res.Verdict, res.RequiredN
	r.Reason = fmt.Sprintf("%d of %d %s were also seen at %s: ", k, n, basis, m.To) + res.Reason
}
