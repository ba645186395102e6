package meshconfig

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// SkupperServices is the ConfigMap in which Skupper 1.x keeps a site's
// service definitions: `skupper expose` writes one entry per address
// (key: the address, value: the JSON of a types.ServiceInterface), see
// skupperproject/skupper client/serviceinterface_update.go and
// api/types/types.go (ServiceInterface, ServiceInterfaceTarget). The lab's
// router reads the same ConfigMap through this name and
// ParseSkupperService; which sites are exposed it decides by rules of its
// own (lab/meshroute/skupper.go), so that the two do not agree by
// construction.
const SkupperServices = "skupper-services"

// MaxSkupperServiceBytes bounds the one skupper-services entry read: a
// definition is an address, a few ports and targets; a bigger one is a
// mistake, refused with its key named rather than decoded.
const MaxSkupperServiceBytes = 64 << 10

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
	exposed, err := skupperExposure(q, objs, &e)
	if err != nil {
		return Expected{}, err
	}
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
	// A site where the address is not exposed has no target for the
	// router: it takes no part in the choice, whatever its pods and link.
	modelCosts, modelReady := maps.Clone(costs), maps.Clone(ready)
	for _, c := range q.Clusters {
		if !exposed[c] {
			delete(modelCosts, c)
			delete(modelReady, c)
		}
	}
	connections := max(q.Connections, 1)
	s, err := assert.LinkCostBalancedModel(modelCosts, modelReady, connections)
	if err != nil {
		return Expected{}, fmt.Errorf("%s (link costs %v, ready pods %v, exposed in %v): %w", q.Ref, costs, ready, exposedList(exposed), err)
	}
	e.Shares, e.Model = s.Shares, s.Model
	for _, c := range q.Clusters {
		if !exposed[c] {
			e.Shares[c] = 0
		}
	}
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

// skupperExposure reports the clusters whose site exposes the address
// (the Ref's name): v1's skupper-services entry for it with a target
// selecting the serving pods, or a v2 Connector selecting them whose
// routingKey is that of a Listener for the address in the entry site. It
// adds the objects that decided to e.Sources and one Explanation line per
// cluster left out. Nothing exposed anywhere is an error naming what is
// missing: the router would have no target at all.
func skupperExposure(q Query, objs Objects, e *Expected) (map[string]bool, error) {
	local, ns, addr := q.cluster(), q.Ref.Namespace, q.Ref.Name
	keys := map[string]bool{}
	for _, u := range objs.all(local, "Listener", ns) {
		l := newObj(u, local)
		key, host, err := skupperKeyHost(l)
		if err != nil {
			return nil, err
		}
		if !skupperHostIs(host, addr, ns) {
			continue
		}
		keys[key] = true
		e.Sources = append(e.Sources, l.source())
	}
	exposed := map[string]bool{}
	var why []string
	for _, c := range q.Clusters {
		pods := objs.all(c, "Pod", ns)
		reasons := []string{}
		if u := objs.find(c, "ConfigMap", ns, SkupperServices); u == nil {
			reasons = append(reasons, fmt.Sprintf("no ConfigMap %s/%s (Skupper v1: skupper expose)", ns, SkupperServices))
		} else {
			ok, reason, err := skupperExposedV1(newObj(u, c), addr, pods, q.Selector, e)
			if err != nil {
				return nil, err
			}
			exposed[c] = ok
			if !ok {
				reasons = append(reasons, reason)
			}
		}
		connectors := objs.all(c, "Connector", ns)
		for _, u := range connectors {
			ok, reason, err := skupperConnector(newObj(u, c), addr, keys, pods, q.Selector, e)
			if err != nil {
				return nil, err
			}
			exposed[c] = exposed[c] || ok
			if !ok && reason != "" {
				reasons = append(reasons, reason)
			}
		}
		if len(connectors) == 0 {
			reasons = append(reasons, fmt.Sprintf("no Connector in namespace %s (Skupper v2)", ns))
		}
		if !exposed[c] {
			line := fmt.Sprintf("cluster %s: address %s is not exposed there, so no share: %s", c, addr, strings.Join(reasons, "; "))
			why = append(why, line)
			e.Explanation = append(e.Explanation, line)
		}
	}
	if len(keys) == 0 {
		e.Explanation = append(e.Explanation, fmt.Sprintf("no Listener in namespace %s of the entry site %s has spec.host %s: no v2 Connector counts", ns, local, addr))
	}
	if len(exposedList(exposed)) == 0 {
		return nil, fmt.Errorf("%s: the address is exposed in none of the clusters %s, so the router has no target: want in namespace %s either a ConfigMap %s with the key %s whose targets[].selector selects the pods (%s) (Skupper v1, as skupper expose writes it), or a Connector (spec.routingKey, spec.selector) whose routingKey a Listener in cluster %s with spec.host %s has (Skupper v2); %s",
			q.Ref, strings.Join(q.Clusters, ", "), ns, SkupperServices, addr, q.Selector, local, addr, strings.Join(why, "; "))
	}
	return exposed, nil
}

// exposedList is the exposed clusters, sorted.
func exposedList(exposed map[string]bool) []string {
	var out []string
	for _, c := range slices.Sorted(maps.Keys(exposed)) {
		if exposed[c] {
			out = append(out, c)
		}
	}
	return out
}

// skupperExposedV1 reads the one key of the skupper-services ConfigMap
// that is the address (other keys, other addresses, are not decoded) and
// reports whether one of its targets selects the serving pods (or names
// a Service, as `skupper expose service/…` writes it), with the reason
// when not.
func skupperExposedV1(cm *obj, addr string, pods []*unstructured.Unstructured, serving string, e *Expected) (bool, string, error) {
	path := "data." + addr
	data, ok := cm.u.Object["data"].(map[string]any)
	if !ok && cm.u.Object["data"] != nil {
		return false, "", cm.errf("data", "want an object, have %T", cm.u.Object["data"])
	}
	v, ok := data[addr]
	if !ok {
		e.Sources = append(e.Sources, cm.source())
		return false, fmt.Sprintf("ConfigMap %s/%s has no key %s", cm.u.GetNamespace(), SkupperServices, addr), nil
	}
	raw, ok := v.(string)
	if !ok {
		return false, "", cm.errf(path, "want a string, have %T", v)
	}
	def, err := ParseSkupperService(raw)
	if err != nil {
		return false, "", cm.errf(path, "%v", err)
	}
	cm.use(path)
	e.Sources = append(e.Sources, cm.source())
	n := node{o: cm, path: path, v: def}
	a, err := n.get("address").str()
	if err != nil {
		return false, "", err
	}
	if a != "" && a != addr {
		return false, "", n.get("address").errf("%q: the entry of key %s must define that address (skupper expose writes the key as the address)", a, addr)
	}
	targets, err := n.get("targets").list()
	if err != nil {
		return false, "", err
	}
	for _, t := range targets {
		if _, err := t.object(); err != nil {
			return false, "", err
		}
		sel, err := t.get("selector").str()
		if err != nil {
			return false, "", err
		}
		svc, err := t.get("service").str()
		if err != nil {
			return false, "", err
		}
		switch {
		case sel != "":
			ok, err := selectsPods(sel, pods, serving)
			if err != nil {
				return false, "", t.get("selector").errf("%q: %v", sel, err)
			}
			if ok {
				return true, "", nil
			}
		case svc != "":
			return true, "", nil // skupper expose service/…: the Service's pods are the selector's
		default:
			return false, "", t.errf("want a selector or a service (skupper expose deployment|service)")
		}
	}
	return false, fmt.Sprintf("ConfigMap %s/%s key %s: no target selects a pod that serves it", cm.u.GetNamespace(), SkupperServices, addr), nil
}

// ParseSkupperService decodes one skupper-services entry: a JSON object
// of at most MaxSkupperServiceBytes.
func ParseSkupperService(v string) (map[string]any, error) {
	if len(v) > MaxSkupperServiceBytes {
		return nil, fmt.Errorf("%d bytes; a Skupper service definition holds at most %d", len(v), MaxSkupperServiceBytes)
	}
	var def map[string]any
	if err := json.Unmarshal([]byte(v), &def); err != nil {
		return nil, fmt.Errorf("not the JSON of a Skupper service definition: %v", err)
	}
	if def == nil {
		return nil, fmt.Errorf("not the JSON of a Skupper service definition: want an object")
	}
	return def, nil
}

// skupperConnector reports whether v2 Connector cn exposes the address to
// the entry site's router: its routingKey is one of a Listener for the
// address there (keys) and its selector selects the serving pods (or its
// host is set: a Connector to a host forwards to whatever serves it).
func skupperConnector(cn *obj, addr string, keys map[string]bool, pods []*unstructured.Unstructured, serving string, e *Expected) (bool, string, error) {
	key, host, err := skupperKeyHost(cn)
	if err != nil {
		return false, "", err
	}
	selNode := cn.root().get("spec").get("selector")
	sel, err := selNode.str()
	if err != nil {
		return false, "", err
	}
	if (sel == "") == (host == "") {
		return false, "", cn.errf("spec", "want one of selector or host (the Connector CRD's oneOf)")
	}
	selects := host != ""
	if sel != "" {
		if selects, err = selectsPods(sel, pods, serving); err != nil {
			return false, "", selNode.errf("%q: %v", sel, err)
		}
	}
	where := fmt.Sprintf("Connector %s/%s", cn.u.GetNamespace(), cn.u.GetName())
	switch {
	case !keys[key]:
		if !selects {
			return false, "", nil // another app's Connector
		}
		return false, fmt.Sprintf("%s: routing key %q has no Listener for %s in the entry site", where, key, addr), nil
	case !selects:
		return false, fmt.Sprintf("%s: routing key %q, but its selector %q selects no pod that serves it", where, key, sel), nil
	}
	cn.use("spec.routingKey")
	e.Sources = append(e.Sources, cn.source())
	return true, "", nil
}

// skupperKeyHost reads the fields v2's Listener and Connector share that
// matter here: routingKey (required by their CRDs) and host.
func skupperKeyHost(o *obj) (key, host string, err error) {
	spec := o.root().get("spec")
	if key, err = spec.get("routingKey").str(); err != nil {
		return "", "", err
	}
	if key == "" {
		return "", "", spec.get("routingKey").errf("required")
	}
	if host, err = spec.get("host").str(); err != nil {
		return "", "", err
	}
	if o.u.GetKind() == "Listener" {
		if host == "" {
			return "", "", spec.get("host").errf("required: the Service name the Listener creates")
		}
		o.use("spec.host")
		o.use("spec.routingKey")
	}
	return key, host, nil
}

// skupperHostIs reports whether a Listener's host names the address's
// Service: its short name or a qualified name in the namespace.
func skupperHostIs(host, addr, ns string) bool {
	for _, h := range []string{addr, addr + "." + ns, addr + "." + ns + ".svc", addr + "." + ns + ".svc.cluster.local"} {
		if host == h {
			return true
		}
	}
	return false
}

// selectsPods reports whether label selector sel (Kubernetes syntax, as
// Skupper's selector fields take it) selects one of pods, the pods of
// the scenario's selector in the site, or the labels that selector
// requires when it is a plain list of equalities (app=x): a site scaled
// to zero stays exposed, with no ready pod, as the router sees it.
func selectsPods(sel string, pods []*unstructured.Unstructured, serving string) (bool, error) {
	s, err := labels.Parse(sel)
	if err != nil {
		return false, err
	}
	if set, err := labels.ConvertSelectorToLabelsMap(serving); err == nil && len(set) > 0 && s.Matches(set) {
		return true, nil
	}
	for _, p := range pods {
		if s.Matches(labels.Set(p.GetLabels())) {
			return true, nil
		}
	}
	return false, nil
}
