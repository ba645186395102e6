package meshconfig

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/mesh-verify/mesh-verify/assert"
)

// Skupper v1's link Secrets: their label and the cost annotation that
// `skupper link create --cost` writes.
const (
	SkupperTypeLabel     = "skupper.io/type"
	SkupperTypeLinkToken = "connection-token"
	SkupperCost          = "skupper.io/cost"
	// skupperDefaultCost is a link's cost without one (v1 --cost default;
	// v2 clamps costs below 1 to 1, internal/site/link.go).
	skupperDefaultCost = 1
)

// resolveSkupper reads the link costs of a Skupper network whose sites
// are the scenario's clusters, in the Ref's namespace. The sites form a
// star around the cluster the traffic enters (the Ref's cluster): a link
// made in cluster X reaches it, at the link's cost. Skupper does not
// split by weight: its router sends each new connection to the site with
// the fewest open connections plus path cost, local targets costing 0
// (skupper-router forwarder.c, qdr_forward_balanced_CT), so the split
// follows from the costs, the ready pods and the concurrency
// (assert.LinkCostBalancedModel).
func resolveSkupper(q Query, objs Objects) (Expected, error) {
	if err := needBy(q, ByCluster); err != nil {
		return Expected{}, err
	}
	if q.Selector == "" {
		return Expected{}, fmt.Errorf("%s: Skupper's connectors name no Service mesh-verify can read: give the selector of the pods that serve the address", q.Ref)
	}
	sel, err := labels.Parse(q.Selector)
	if err != nil {
		return Expected{}, fmt.Errorf("%s: selector %q: %w", q.Ref, q.Selector, err)
	}
	local, ns := q.cluster(), q.Ref.Namespace
	costs := map[string]float64{local: 0}
	ready := map[string]int{}
	var e Expected
	for _, c := range q.Clusters {
		ready[c] = len(readyPods(objs, c, ns, sel))
		var links []*obj
		for _, u := range objs.all(c, "Secret", ns) {
			if u.GetLabels()[SkupperTypeLabel] == SkupperTypeLinkToken {
				links = append(links, newObj(u, c))
			}
		}
		for _, u := range objs.all(c, "Link", ns) {
			links = append(links, newObj(u, c))
		}
		for _, l := range links {
			if c == local {
				e.Explanation = append(e.Explanation, fmt.Sprintf("%s %s/%s in cluster %s links the entry site to another site; which cluster that is cannot be told from the link, so only links made in the other clusters count", l.u.GetKind(), ns, l.u.GetName(), c))
				continue
			}
			cost, err := skupperCost(l)
			if err != nil {
				return Expected{}, err
			}
			if old, ok := costs[c]; !ok || cost < old {
				costs[c] = cost // of several links, the router takes the cheapest path
			}
			e.Sources = append(e.Sources, l.source())
		}
	}
	connections := max(q.Connections, 1)
	s, err := assert.LinkCostBalancedModel(costs, ready, connections)
	if err != nil {
		return Expected{}, fmt.Errorf("%s (link costs %v, ready pods %v): %w", q.Ref, costs, ready, err)
	}
	e.Shares, e.Model = s.Shares, s.Model
	for _, c := range slices.Sorted(maps.Keys(costs)) {
		e.Explanation = append(e.Explanation, fmt.Sprintf("cluster %s: cost %g, %d ready pods", c, costs[c], ready[c]))
	}
	e.Explanation = append(e.Explanation, s.Explanation...)
	if connections == 1 {
		e.Explanation = append(e.Explanation, "one connection at a time: sequential traffic stays on the cheapest site with a ready pod, the local one while it has one (cost 0)")
	} else {
		e.Explanation = append(e.Explanation, fmt.Sprintf("holds only while the attack keeps %d connections open together; with connections that open and close at different times the split depends on their timing and cannot be determined from the objects", connections))
	}
	e.Backends, e.BackendsOf = ready, fmt.Sprintf("pods %s in namespace %s", q.Selector, ns)
	return e, nil
}

// skupperCost is a v1 link Secret's skupper.io/cost or a v2 Link's
// spec.cost.
func skupperCost(l *obj) (float64, error) {
	if l.u.GetKind() == "Secret" {
		v, ok := l.u.GetAnnotations()[SkupperCost]
		if !ok {
			return skupperDefaultCost, nil
		}
		path := "metadata.annotations." + SkupperCost
		l.use(path)
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, l.errf(path, "%q: want a whole number >= 0 (skupper link create --cost)", v)
		}
		return float64(n), nil
	}
	c := l.root().get("spec").get("cost")
	cost, set, err := c.num()
	if err != nil {
		return 0, err
	}
	if set {
		l.use(c.path)
	}
	if !set || cost < skupperDefaultCost {
		return skupperDefaultCost, nil
	}
	return cost, nil
}
