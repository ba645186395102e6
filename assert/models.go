package assert

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Shares are the expected shares a model computed and the sentences that
// explain them, assumptions included, so a report can say why.
type Shares struct {
	Shares map[string]float64 `json:"shares"`
	// PodShares are keyed "cluster/podindex" (0-based) when only pod counts are known.
	PodShares   map[string]float64 `json:"podShares,omitempty"`
	Model       string             `json:"model"`
	Explanation []string           `json:"explanation"`
}

// Model names as they appear in Shares.Model.
const (
	ModelWeights          = "weights"
	ModelEqual            = "equal"
	ModelEqualPerPod      = "equal-per-pod"
	ModelLinkCostInverse  = "link-cost-inverse"
	ModelLinkCostBalanced = "link-cost-balanced"
	ModelMirror           = "mirror"
	BucketMirrored        = "mirrored"
	BucketNotMirrored     = "not-mirrored"
)

// maxBalancedConnections bounds the greedy loop against a typo like 1e9.
const maxBalancedConnections = 1 << 20

// WeightsModel normalises explicit weights (by cluster, pod or version).
func WeightsModel(w map[string]float64) (Shares, error) {
	if len(w) == 0 {
		return Shares{}, fmt.Errorf("weights: no buckets")
	}
	sum := 0.0
	names := slices.Sorted(maps.Keys(w))
	for _, b := range names {
		v := w[b]
		switch {
		case b == "":
			return Shares{}, fmt.Errorf("weights: empty bucket name")
		case math.IsNaN(v) || math.IsInf(v, 0):
			return Shares{}, fmt.Errorf("weights: bucket %s has weight %g", b, v)
		case v < 0:
			return Shares{}, fmt.Errorf("weights: bucket %s has negative weight %g", b, v)
		}
		sum += v
	}
	if sum == 0 {
		return Shares{}, fmt.Errorf("weights: all weights are zero")
	}
	s := Shares{Shares: map[string]float64{}, Model: ModelWeights}
	parts := make([]string, len(names))
	for i, b := range names {
		s.Shares[b] = w[b] / sum
		parts[i] = fmt.Sprintf("%s=%g", b, w[b])
	}
	s.Explanation = []string{
		fmt.Sprintf("explicit weights %s, each divided by their sum %g: %s", strings.Join(parts, ", "), sum, fmtShares(s.Shares)),
	}
	return s, nil
}

// EqualModel gives every bucket the same share.
func EqualModel(buckets []string) (Shares, error) {
	if len(buckets) == 0 {
		return Shares{}, fmt.Errorf("equal: no buckets")
	}
	s := Shares{Shares: map[string]float64{}, Model: ModelEqual}
	for _, b := range buckets {
		if b == "" {
			return Shares{}, fmt.Errorf("equal: empty bucket name")
		}
		if _, dup := s.Shares[b]; dup {
			return Shares{}, fmt.Errorf("equal: bucket %s named twice", b)
		}
		s.Shares[b] = 1 / float64(len(buckets))
	}
	s.Explanation = []string{fmt.Sprintf("equal share 1/%d = %s for each of %s", len(buckets), pct(1/float64(len(buckets))), strings.Join(buckets, ", "))}
	return s, nil
}

// EqualPerPodModel is a Cilium global service: the endpoints of all
// clusters are merged and balanced per pod, so a cluster's share is its
// ready pods over all ready pods.
func EqualPerPodModel(readyPods map[string]int) (Shares, error) {
	if err := checkPods("equal per pod", readyPods); err != nil {
		return Shares{}, err
	}
	total := 0
	for _, p := range readyPods {
		total += p
	}
	if total == 0 {
		return Shares{}, fmt.Errorf("equal per pod: no ready pods in %s", strings.Join(slices.Sorted(maps.Keys(readyPods)), ", "))
	}
	s := Shares{Shares: map[string]float64{}, Model: ModelEqualPerPod}
	for c, p := range readyPods {
		s.Shares[c] = float64(p) / float64(total)
	}
	s.PodShares = evenPods(s.Shares, readyPods)
	s.Explanation = []string{
		fmt.Sprintf("global service: every ready pod of every cluster is one endpoint, so each cluster gets its ready pods out of %d: %s", total, fmtShares(s.Shares)),
		"assumes the client's balancer picks endpoints uniformly and the ready-pod counts held for the whole run",
	}
	return s, nil
}

// LinkCostInverseModel gives clusters with ready pods a share ∝ 1/cost.
// A cost of 0 is the local site: a local endpoint is always preferred, so
// the cost-0 clusters with ready pods take everything (equally between
// them) and the remote ones nothing. Clusters without ready pods, and
// clusters in readyPods without a link cost (not reachable), get 0. A nil
// readyPods means every cluster in costs has ready pods (then no
// PodShares).
func LinkCostInverseModel(costs map[string]float64, readyPods map[string]int) (Shares, error) {
	el, s, err := linkCostSetup("link cost inverse", ModelLinkCostInverse, costs, readyPods)
	if err != nil {
		return Shares{}, err
	}
	var local []string
	for _, c := range el {
		if costs[c] == 0 {
			local = append(local, c)
		}
	}
	if len(local) > 0 {
		for _, c := range local {
			s.Shares[c] = 1 / float64(len(local))
		}
		s.Explanation = append(s.Explanation, fmt.Sprintf("%s at cost 0 (local) takes all traffic while it has ready pods", strings.Join(local, ", ")))
	} else {
		sum := 0.0
		for _, c := range el {
			sum += 1 / costs[c]
		}
		for _, c := range el {
			s.Shares[c] = 1 / costs[c] / sum
		}
		s.Explanation = append(s.Explanation, fmt.Sprintf("share proportional to 1/cost among the clusters with ready pods: %s", fmtShares(s.Shares)))
	}
	if readyPods != nil {
		s.PodShares = evenPods(s.Shares, readyPods)
		s.Explanation = append(s.Explanation, "each cluster spreads its share evenly over its ready pods")
	}
	return s, nil
}

// LinkCostBalancedModel is the Skupper router's balanced distribution for
// C concurrent connections. The router (skupper-router
// src/router_core/forwarder.c, qdr_forward_balanced_CT) sends each new
// delivery — for TCP, each connection — to the destination with the least
// outstanding deliveries + link cost, scanning local consumers first
// (cost 0) and replacing the best only on a strictly lower value, so:
//
//   - a local site wins ties against remote sites;
//   - ties between remote sites go to the one the router meets first, its
//     internal router order, which cannot be seen from outside. The model
//     breaks them towards the lower cost, then the name, and when the other
//     order would change the result the explanation gives both.
//
// Assumptions: the C connections are open at once and stay open for the
// run (each is one outstanding delivery), each carries the same number of
// requests, no other traffic to this address shares the router, and a site
// spreads its connections evenly over its ready pods (PodShares). Clusters
// without ready pods get nothing, as do clusters without a link cost.
func LinkCostBalancedModel(costs map[string]float64, readyPods map[string]int, connections int) (Shares, error) {
	if connections < 1 || connections > maxBalancedConnections {
		return Shares{}, fmt.Errorf("link cost balanced: %d concurrent connections, want 1..%d", connections, maxBalancedConnections)
	}
	el, s, err := linkCostSetup("link cost balanced", ModelLinkCostBalanced, costs, readyPods)
	if err != nil {
		return Shares{}, err
	}
	byCost := func(a, b string) int {
		if costs[a] != costs[b] {
			if costs[a] < costs[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	}
	order := slices.SortedFunc(slices.Values(el), byCost)
	open := assignGreedy(order, costs, connections)
	// The other order for remote ties: locals first still, remotes reversed.
	alt := slices.Clone(order)
	firstRemote := slices.IndexFunc(alt, func(c string) bool { return costs[c] > 0 })
	if firstRemote >= 0 {
		slices.Reverse(alt[firstRemote:])
	}
	altOpen := assignGreedy(alt, costs, connections)

	parts := make([]string, len(order))
	for i, c := range order {
		s.Shares[c] = float64(open[c]) / float64(connections)
		parts[i] = fmt.Sprintf("%s %d", c, open[c])
	}
	s.Explanation = append(s.Explanation,
		fmt.Sprintf("Skupper balanced routing: each of %d concurrent connections goes to the site with the fewest open connections + link cost (local cost 0); ties go to the local site, then the lower cost", connections),
		fmt.Sprintf("connections per site: %s, so %s", strings.Join(parts, ", "), fmtShares(s.Shares)),
		"assumes the connections open together and stay open for the run, carry equal numbers of requests, and no other traffic to this address shares the router",
	)
	if !maps.Equal(open, altOpen) {
		altShares := map[string]float64{}
		for c, k := range altOpen {
			altShares[c] = float64(k) / float64(connections)
		}
		s.Explanation = append(s.Explanation, fmt.Sprintf("the router breaks ties between remote sites by its internal order; the other order would give %s", fmtShares(altShares)))
	}
	if readyPods != nil {
		s.PodShares = evenPods(s.Shares, readyPods)
		s.Explanation = append(s.Explanation, "each site spreads its connections evenly over its ready pods")
	}
	return s, nil
}

// assignGreedy gives each connection in turn to argmin(open + cost); the
// first in order wins ties, as the router keeps its first best.
func assignGreedy(order []string, costs map[string]float64, connections int) map[string]int {
	open := make(map[string]int, len(order))
	for range connections {
		best, bestV := "", math.Inf(1)
		for _, c := range order {
			if v := float64(open[c]) + costs[c]; v < bestV {
				best, bestV = c, v
			}
		}
		open[best]++
	}
	return open
}

// linkCostSetup validates the inputs of the link-cost models and returns
// the eligible clusters (with a cost and ready pods) and the Shares with
// every known cluster at 0, so that the ineligible ones are tested as
// getting nothing.
func linkCostSetup(what, model string, costs map[string]float64, readyPods map[string]int) ([]string, Shares, error) {
	if err := checkPods(what, readyPods); err != nil {
		return nil, Shares{}, err
	}
	s := Shares{Shares: map[string]float64{}, Model: model}
	var el, noPods, noCost []string
	for _, c := range slices.Sorted(maps.Keys(costs)) {
		v := costs[c]
		switch {
		case c == "":
			return nil, Shares{}, fmt.Errorf("%s: empty cluster name", what)
		case math.IsNaN(v) || math.IsInf(v, 0) || v < 0:
			return nil, Shares{}, fmt.Errorf("%s: cluster %s has cost %g, want a finite cost >= 0", what, c, v)
		}
		s.Shares[c] = 0
		if readyPods != nil && readyPods[c] == 0 {
			noPods = append(noPods, c)
			continue
		}
		el = append(el, c)
	}
	for _, c := range slices.Sorted(maps.Keys(readyPods)) {
		if _, ok := costs[c]; !ok {
			s.Shares[c] = 0
			noCost = append(noCost, c)
		}
	}
	if len(el) == 0 {
		return nil, Shares{}, fmt.Errorf("%s: no cluster with a link cost has ready pods", what)
	}
	if len(noPods) > 0 {
		s.Explanation = append(s.Explanation, fmt.Sprintf("%s: no ready pods, so no traffic", strings.Join(noPods, ", ")))
	}
	if len(noCost) > 0 {
		s.Explanation = append(s.Explanation, fmt.Sprintf("%s: no link cost (not linked), so no traffic", strings.Join(noCost, ", ")))
	}
	return el, s, nil
}

func checkPods(what string, readyPods map[string]int) error {
	for _, c := range slices.Sorted(maps.Keys(readyPods)) {
		if readyPods[c] < 0 {
			return fmt.Errorf("%s: cluster %s has %d ready pods", what, c, readyPods[c])
		}
	}
	return nil
}

// evenPods splits each cluster's share evenly over its ready pods.
func evenPods(shares map[string]float64, readyPods map[string]int) map[string]float64 {
	ps := map[string]float64{}
	for c, p := range readyPods {
		for i := range p {
			ps[fmt.Sprintf("%s/%d", c, i)] = shares[c] / float64(p)
		}
	}
	return ps
}

// MirrorModel is an N% mirror: each primary request is copied to the
// mirror target with probability percent/100. The buckets are the primary
// requests that were (or were not) also seen at the mirror, so the share
// tested is q̂ = mirrored / primary requests (docs/statistics.md §4, mirror).
func MirrorModel(percent float64) (Shares, error) {
	if math.IsNaN(percent) || percent < 0 || percent > 100 {
		return Shares{}, fmt.Errorf("mirror: %g%%, want a percentage in [0,100]", percent)
	}
	q := percent / 100
	return Shares{
		Shares: map[string]float64{BucketMirrored: q, BucketNotMirrored: 1 - q},
		Model:  ModelMirror,
		Explanation: []string{
			fmt.Sprintf("mirror %g%%: each primary request is also sent to the mirror with probability %s;", percent, pct(q)),
			"the mirror's responses are discarded, so the copies are counted where they arrive, in the mirror target's logs (the reason says how: by request id, by the data plane's request id, or in the attack window)",
		},
	}, nil
}

func fmtShares(m map[string]float64) string {
	names := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(names))
	for i, b := range names {
		parts[i] = b + " " + pct(m[b])
	}
	return strings.Join(parts, ", ")
}
