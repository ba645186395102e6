package judge

import (
	"fmt"
	"slices"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

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

// Margin is a tolerance an expectation may set: its fraction, 0 when left
// out.
func Margin(p *scenarios.Percent) float64 {
	if p == nil {
		return 0
	}
	return p.Fraction()
}

// baseSpec is the spec of a split or a mirror: the scenario's margin and
// relative unless the expectation sets its own, at the given confidence.
// Margins are resolved here and nowhere else.
func (j *Judge) baseSpec(margin *scenarios.Percent, relative *bool, expected map[string]float64, conf float64) assert.SplitSpec {
	st := j.sc.Statistics
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

// margined is a kind judged as shares against a model: split and mirror.
type margined interface {
	margins() (*scenarios.Percent, *bool)
}

// splitSpec is the spec a split or mirror expectation is judged with at
// its own confidence, sampling unit included, as plans need it.
func (j *Judge) splitSpec(e Expectation, expected map[string]float64, conf float64) assert.SplitSpec {
	var margin *scenarios.Percent
	var relative *bool
	if m, ok := e.kind.(margined); ok {
		margin, relative = m.margins()
	}
	spec := j.baseSpec(margin, relative, expected, conf)
	spec.Sampling = j.Sampling(e)
	return spec
}

// sameSplit finds the expected shares of rc's buckets in a split of the
// same dimension and source that gives every one of them a share: what
// reached's minimum share is taken from (docs/statistics.md §4).
func (j *Judge) sameSplit(e Expectation, rc *scenarios.BucketSet, ready map[string][]string) ([]float64, string, bool) {
	for _, other := range j.exps {
		sk, ok := other.kind.(splitKind)
		if !ok || sk.sp.By != rc.By || other.Source() != e.Source() {
			continue
		}
		model, err := j.model(sk.sp, ready)
		if err != nil {
			continue
		}
		shares := make([]float64, len(rc.Buckets))
		all := true
		for i, b := range rc.Buckets {
			shares[i] = model.Shares[b]
			all = all && shares[i] > 0
		}
		if all {
			return shares, other.Name(), true
		}
	}
	return nil, "", false
}

// minShare is the share below which reached calls an unseen bucket missing
// (docs/statistics.md §4): reached.minShare when set; else the smallest
// expected share of the named buckets in a split of the same by and
// source that gives every one of them a share; else assert's default,
// half an equal share.
func (j *Judge) minShare(e Expectation, rc *scenarios.BucketSet, ready map[string][]string) assert.MinShare {
	if rc.MinShare != nil {
		return assert.MinShare{Share: rc.MinShare.Fraction(), From: "reached.minShare"}
	}
	if shares, name, ok := j.sameSplit(e, rc, ready); ok {
		return assert.MinShare{Share: slices.Min(append(shares, 1)), From: fmt.Sprintf("the smallest expected share of these buckets in %q", name)}
	}
	return assert.MinShare{}
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
func (j *Judge) model(sp *scenarios.Split, ready map[string][]string) (assert.Shares, error) {
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
func (j *Judge) clusterModel(sp *scenarios.Split, ready map[string][]string) (assert.Shares, error) {
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
			conns = j.attack.Connections
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
