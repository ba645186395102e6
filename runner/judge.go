package runner

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/measure"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// judge maps each scenario expectation onto the assert call that decides it.
type judge struct {
	sc *scenarios.Scenario
	// connections is the concurrency a link-cost-balanced model assumes.
	connections int
	// looks is the number of sequential looks of an early-stopping run,
	// 0 without early stopping.
	looks int
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

// fixedConnections is how many connections an attack keeps open and reuses
// (docs/statistics.md §3.4), as attack's transport sets them up: with
// keep-alive, its lanes (attack.connections; 10 in an open loop without
// concurrency), else one per worker, at most maxConnections; 0 without
// keep-alive, where every request opens its own.
func fixedConnections(o attack.Options) int64 {
	if !o.KeepAlive {
		return 0
	}
	lanes := o.Connections
	if lanes == 0 && o.Concurrency == 0 {
		lanes = attack.DefaultLanes
	}
	c := lanes
	if lanes <= 1 && o.Concurrency > 0 {
		c = o.Concurrency
	}
	if o.MaxConnections > 0 {
		c = min(c, o.MaxConnections)
	}
	return int64(max(c, 1))
}

// AttackConnections is how many connections the scenario's attack keeps
// open and reuses, 0 when every request opens its own (keepAlive false):
// what per-connection balancing can draw on, for `mesh-verify plan`.
func AttackConnections(sc *scenarios.Scenario) int64 {
	return fixedConnections(measure.AttackConfig(sc, "", ""))
}

// Sampling is the sampling unit an expectation's verdict assumes
// (docs/statistics.md §3): the split's own balancing, else the scenario's;
// a mirror is always per request, as Envoy decides per request.
func Sampling(sc *scenarios.Scenario, e scenarios.Expectation) assert.Sampling {
	s := assert.Sampling{Balancing: assert.Balancing(sc.BalancingOf(&e)), Reason: sc.Statistics.BalancingReason}
	switch {
	case e.Mirror != nil:
		s = assert.MirrorSampling()
	case e.Split != nil && e.Split.Balancing != "":
		s.Reason = "set by split.balancing"
	}
	s.FixedConnections = AttackConnections(sc)
	return s
}

// Confidence is an expectation's own confidence: split.confidence, else
// statistics.confidence.
func Confidence(sc *scenarios.Scenario, e scenarios.Expectation) float64 {
	if e.Split != nil && e.Split.Confidence > 0 {
		return e.Split.Confidence
	}
	return sc.Statistics.Confidence
}

// level is the confidence an expectation is judged at: its own, or with
// early stopping the spending level of its own confidence at this look
// (docs/statistics.md §6); look < 0 means no sequential looks.
func (j *judge) level(e scenarios.Expectation, look int) float64 {
	conf := Confidence(j.sc, e)
	if look < 0 || j.looks == 0 {
		return conf
	}
	return assert.SpendingLevels(j.looks, conf)[look]
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
	// logSeconds counts the served log lines per cluster and second (Unix
	// time), for the timeline.
	logSeconds map[string]map[int64]int
	// from is the bodies' counts of each source's workers, for the
	// expectations judged from one source (attack.sources, from:).
	from map[string]tally.Snapshot
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
// its level for this interim look, which is when early stopping may stop.
// Expectations on logs or metrics are never settled early: those sources
// lag the responses and are read in full only after the attack.
func (j *judge) settled(ev evidence, look int) bool {
	for _, e := range j.evaluate(ev, look) {
		if e.Verdict == assert.Inconclusive || e.Source != "" && e.Source != scenarios.SourceBody {
			return false
		}
	}
	return true
}

// plan sets, on the final judgements of the split and mirror
// expectations, the draws a correct mesh needs to pass with the
// scenario's power, as `mesh-verify plan` computes them: a search, done
// once for the report, never at the interim looks.
func (j *judge) plan(out []reports.Expectation) {
	for i, e := range j.sc.Expect {
		if (e.Split == nil && e.Mirror == nil) || out[i].Model == nil {
			continue
		}
		spec := SplitSpec(j.sc, e, out[i].Model.Shares, out[i].Confidence)
		out[i].Planned, out[i].PlannedUnit = plannedOf(assert.PlanSplit(spec))
	}
}

// plannedOf is what a plan asks the attack for: connections when they
// limit the evidence, else requests (docs/statistics.md §5).
func plannedOf(p assert.Plan) (int64, string) {
	if p.Connections > 0 && p.Requests == 0 {
		return p.Connections, "connections"
	}
	return p.Requests, "requests"
}

// evaluate judges every expectation; look is the sequential look (its
// spending level per expectation), or -1 without early stopping.
func (j *judge) evaluate(ev evidence, look int) []reports.Expectation {
	out := make([]reports.Expectation, 0, len(j.sc.Expect))
	for _, e := range j.sc.Expect {
		out = append(out, j.one(e, ev, look))
	}
	return out
}

func (j *judge) one(e scenarios.Expectation, ev evidence, look int) reports.Expectation {
	st := j.sc.Statistics
	conf := j.level(e, look)
	sampling := Sampling(j.sc, e)
	r := reports.Expectation{Name: e.Name, Source: e.JudgedFrom(), Confidence: conf}
	if r.Source == "" {
		r.Source = scenarios.SourceBody
	}
	s, ok := ev.source(r.Source)
	if !ok {
		r.Kind, r.Verdict = e.Kind(), assert.Inconclusive
		r.Reason = fmt.Sprintf("no %s were read (yet): nothing to judge", r.Source)
		return r
	}
	if e.From != "" {
		// Only the requests the workers in that cluster sent.
		r.From = e.From
		if s, ok = ev.from[e.From]; !ok || s.Total == 0 {
			r.Kind, r.Verdict = e.Kind(), assert.Inconclusive
			r.Reason = fmt.Sprintf("no request from source %s was measured: nothing to judge", e.From)
			return r
		}
	}
	if why := ev.unusable(e, r.Source); why != "" {
		r.Kind, r.Verdict, r.Reason = e.Kind(), assert.Inconclusive, why
		return r
	}
	if e.Mirror == nil {
		sampling.RoutingDesignEffect = routingDesignEffect(s)
	}
	share := assert.ShareSpec{Confidence: conf, Power: st.Power, Evidence: st.Margin.Fraction(), Sampling: sampling}
	// Answered bodies whose bucket is unknown are judged by their worst
	// case (docs/statistics.md §3.6); logs and metrics are reconciled.
	missing := func(by string) int64 {
		if r.Source != scenarios.SourceBody {
			return 0
		}
		return s.Unattributed[by]
	}
	switch {
	case e.Mirror != nil:
		r.Kind = "mirror"
		j.mirror(&r, e.Mirror, ev, conf)
	case e.Split != nil:
		sp := e.Split
		r.Kind, r.By = "split", sp.By
		model, err := j.model(sp, ev.readyPods)
		if err != nil {
			r.Verdict, r.Reason = assert.Fail, "expected split: "+err.Error()
			return r
		}
		spec := splitSpec(j.sc, sp.Margin, sp.Relative, model.Shares, conf)
		spec.Sampling, spec.Missing = sampling, missing(sp.By)
		res := assert.Split(byName(s, sp.By, slices.Collect(maps.Keys(model.Shares))), spec)
		r.Model, r.Split = &model, &res
		r.Verdict, r.Reason, r.Advice = res.Verdict, res.Reason, res.Advice
	case e.Reached != nil:
		r.Kind, r.By = "reached", e.Reached.By
		share.Missing = missing(e.Reached.By)
		res := assert.Reached(byName(s, e.Reached.By, e.Reached.Buckets), e.Reached.Buckets, j.minShare(e, ev), share)
		setResult(&r, res)
	case e.Only != nil:
		r.Kind, r.By = "only", e.Only.By
		share.Missing = missing(e.Only.By)
		setResult(&r, assert.Only(byName(s, e.Only.By, e.Only.Buckets), e.Only.Buckets, margin(e.Only.Margin), share))
	case e.Never != nil:
		r.Kind, r.By = "never", e.Never.By
		share.Missing = missing(e.Never.By)
		setResult(&r, assert.Never(byName(s, e.Never.By, e.Never.Buckets), e.Never.Buckets, margin(e.Never.Margin), share))
	case e.SuccessRate != nil:
		r.Kind = "successRate"
		oc := s.Dimensions[tally.Outcome]
		setResult(&r, assert.SuccessRate(oc.Count(tally.Success), oc, e.SuccessRate.AtLeast.Fraction(), share))
	case e.Latency != nil:
		r.Kind = "latency"
		r.Confidence = 0 // a percentile estimate claims no confidence
		setResult(&r, latency(e.Latency, s))
	}
	return r
}

// routingDesignEffect is the design effect of the routing of one
// source's requests, from its attributed dimensions (cluster, pod,
// version): what a success rate's effective n, and a share whose own
// counts show nothing, are judged with (docs/statistics.md §3.3).
func routingDesignEffect(s tally.Snapshot) float64 {
	fields := attribution.Fields()
	dims := make([]assert.Counts, 0, len(fields))
	for _, f := range fields {
		dims = append(dims, s.Dimensions[string(f)])
	}
	return assert.RoutingDesignEffect(dims...)
}

// splitSpec is the spec of a split or a mirror: the scenario's margin and
// relative unless the expectation sets its own, at the given confidence.
func splitSpec(sc *scenarios.Scenario, margin *scenarios.Percent, relative *bool, expected map[string]float64, conf float64) assert.SplitSpec {
	st := sc.Statistics
	spec := assert.SplitSpec{
		Expected:   expected,
		Margin:     st.Margin.Fraction(),
		Relative:   st.Relative,
		Confidence: conf,
		Method:     assert.IntervalMethod(st.Interval),
		Power:      st.Power,
	}
	if margin != nil {
		spec.Margin = margin.Fraction()
	}
	if relative != nil {
		spec.Relative = *relative
	}
	return spec
}

// SplitSpec is the spec a split or mirror expectation is judged with at
// its own confidence, sampling unit included, for `mesh-verify plan`.
func SplitSpec(sc *scenarios.Scenario, e scenarios.Expectation, expected map[string]float64, conf float64) assert.SplitSpec {
	var spec assert.SplitSpec
	if e.Mirror != nil {
		spec = splitSpec(sc, e.Mirror.Margin, nil, expected, conf)
	} else {
		spec = splitSpec(sc, e.Split.Margin, e.Split.Relative, expected, conf)
	}
	spec.Sampling = Sampling(sc, e)
	return spec
}

// minShare is the share below which reached calls an unseen bucket missing
// (docs/statistics.md §4): reached.minShare when set; else the smallest
// expected share of the named buckets in a split of the same by and
// source that gives every one of them a share; else assert's default,
// half an equal share.
func (j *judge) minShare(e scenarios.Expectation, ev evidence) assert.MinShare {
	rc := e.Reached
	if rc.MinShare != nil {
		return assert.MinShare{Share: rc.MinShare.Fraction(), From: "reached.minShare"}
	}
	for _, other := range j.sc.Expect {
		sp := other.Split
		if sp == nil || sp.By != rc.By || other.JudgedFrom() != e.JudgedFrom() {
			continue
		}
		model, err := j.model(sp, ev.readyPods)
		if err != nil {
			continue
		}
		least := 1.0
		for _, b := range rc.Buckets {
			least = math.Min(least, model.Shares[b])
		}
		if least > 0 {
			return assert.MinShare{Share: least, From: fmt.Sprintf("the smallest expected share of these buckets in %q", other.Name)}
		}
	}
	return assert.MinShare{}
}

func setResult(r *reports.Expectation, res assert.Result) {
	r.Result = &res
	r.Verdict, r.Reason, r.Advice = res.Verdict, res.Reason, res.Advice
}

func margin(p *scenarios.Percent) float64 {
	if p == nil {
		return 0
	}
	return p.Fraction()
}

// latency compares the percentile with the bound. Percentiles come from
// tally's latency histogram (within tally.LatencyRelativeError of the
// exact order statistic, for one process's run or workers' merged), the
// same the report shows; no interval is claimed.
func latency(l *scenarios.Latency, s tally.Snapshot) assert.Result {
	if s.Metrics.Requests == 0 {
		return assert.Result{Verdict: assert.Inconclusive, Reason: "no requests, no latency"}
	}
	q := s.LatencyQuantile(l.Percentile / 100)
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
	ao := measure.AttackConfig(sc, "", "")
	return newJudge(sc, ao).model(sp, nil)
}

// PlannedRequests is how many requests the scenario's attack will send, or
// 0 when only its duration bounds it in closed loop.
func PlannedRequests(sc *scenarios.Scenario) int64 {
	return measure.PlannedRequests(measure.AttackConfig(sc, "", ""))
}

// byName is the counts of dimension by, where a pod the scenario names
// by its name alone ("web-0") stands for the pod bucket of that name
// ("c1/web-0", tally.PodKey) when exactly one cluster has it. A name
// several clusters share stays unmatched (its count 0): the scenario
// must say which, as "c1/web-0".
func byName(s tally.Snapshot, by string, names []string) assert.Counts {
	c := s.Dimensions[by]
	if by != string(attribution.Pod) || len(names) == 0 {
		return c
	}
	match := map[string][]int{}
	for i, b := range c.Buckets {
		if n := tally.PodName(b, s.PodClusters[b]); n != b {
			match[n] = append(match[n], i)
		}
	}
	var renamed []string
	for _, n := range names {
		if slices.Contains(c.Buckets, n) || len(match[n]) != 1 {
			continue
		}
		if renamed == nil {
			renamed = slices.Clone(c.Buckets)
		}
		renamed[match[n][0]] = n
	}
	if renamed != nil {
		c.Buckets = renamed
	}
	return c
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
			// The observed buckets' names: a StatefulSet's web-0 in two
			// clusters is two pods.
			byPod.Shares[tally.PodKey(c, n)] = share / float64(len(names))
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
				for _, n := range ready[c.Name] {
					b = append(b, tally.PodKey(c.Name, n))
				}
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
	case scenarios.ModelFromMesh:
		// meshconfig.Fetch and Resolve derive them; the run does not call
		// them yet (docs/expect-from-mesh.md, "Status").
		ref, _, _ := sp.FromMesh.Ref()
		return assert.Shares{}, fmt.Errorf("split.fromMesh: the expected shares from %s are not yet read by run (docs/expect-from-mesh.md); give the weights", ref.Object())
	}
	return assert.Shares{}, fmt.Errorf("unknown model %q", sp.Model)
}

// mirror judges the share of primary requests whose copy reached the mirror
// target, q̂ = k / n, from the counts mirrorCounts finds (README.md,
// mirroring), with the statistics of docs/statistics.md §4 (mirror).
func (j *judge) mirror(r *reports.Expectation, m *scenarios.MirrorExpect, ev evidence, confidence float64) {
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
	res := assert.Mirror(k, n, splitSpec(j.sc, m.Margin, nil, model.Shares, confidence))
	r.By, r.Model, r.Split = "mirror", &model, &res
	r.Verdict, r.Advice = res.Verdict, res.Advice
	r.Reason = fmt.Sprintf("%d of %d %s were also seen at %s: ", k, n, basis, m.To) + res.Reason
}
