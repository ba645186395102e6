package meshroute

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/mesh-verify/mesh-verify/lab/meshsim"
)

// skupperDefaultCost is a link's cost without --cost (v1) or spec.cost
// (v2); v2 clamps costs below 1 to 1 (internal/site/link.go).
const skupperDefaultCost = 1

// deriveSkupper reads the links of the entry's Skupper network: v1 link
// Secrets (labelled skupper.io/type=connection-token, cost in the
// annotation skupper.io/cost, as `skupper link create --cost` writes it)
// and v2 Links (spec.cost), in the entry's namespace of every other
// cluster. The lab's sites form a star: a link made in cluster X (the
// tutorial links c2 and c3 to c1) connects X to the entry's site. The
// router balances each new connection to the site with the fewest open
// connections plus path cost, its own site costing 0; a site without a
// link is out of reach.
func deriveSkupper(e Entry, objs Objects) (Route, error) {
	r := Route{Policy: meshsim.Policy{Mode: meshsim.ModeBalanced, Costs: map[string]float64{}}}
	r.Clusters = []string{e.Cluster}
	for _, c := range e.Clusters {
		for _, s := range objs.of(c, "Secret", e.Namespace) {
			if s.GetLabels()[SkupperTypeLabel] != SkupperTypeLinkToken {
				continue
			}
			if c == e.Cluster {
				r.Ignored = append(r.Ignored, where(s, c)+": a link made in the router's own site (the lab's sites link to it)")
				continue
			}
			cost := float64(skupperDefaultCost)
			if v, ok := s.GetAnnotations()[SkupperCost]; ok {
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					return Route{}, fieldError(s, c, "metadata.annotations."+SkupperCost, "%q: want a whole number >= 0 (skupper link create --cost)", v)
				}
				cost = float64(n)
			}
			addLink(&r, c, cost, where(s, c))
		}
		for _, l := range objs.of(c, "Link", e.Namespace) {
			if c == e.Cluster {
				r.Ignored = append(r.Ignored, where(l, c)+": a link made in the router's own site (the lab's sites link to it)")
				continue
			}
			spec, err := mapAt(l.Object["spec"], l, c, "spec")
			if err != nil {
				return Route{}, err
			}
			cost, set, err := numberAt(spec["cost"], l, c, "spec.cost")
			if err != nil {
				return Route{}, err
			}
			if !set || cost < skupperDefaultCost {
				cost = skupperDefaultCost
			}
			r.Ignored = append(r.Ignored, prefixed(where(l, c), ignoredFields(spec, "spec", "cost", "endpoints", "tlsCredentials"))...)
			addLink(&r, c, cost, where(l, c))
		}
	}
	sortClusters(r.Clusters, e.Clusters)
	return r, nil
}

// addLink records a link of cluster c; of several, the cheapest is the
// router's path.
func addLink(r *Route, c string, cost float64, from string) {
	r.From = append(r.From, fmt.Sprintf("%s (cost %g)", from, cost))
	if old, ok := r.Policy.Costs[c]; ok && old <= cost {
		return
	}
	r.Policy.Costs[c] = cost
	if !slices.Contains(r.Clusters, c) {
		r.Clusters = append(r.Clusters, c)
	}
}

// sortClusters orders cs as the lab lists its clusters.
func sortClusters(cs, order []string) {
	slices.SortFunc(cs, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) })
}
