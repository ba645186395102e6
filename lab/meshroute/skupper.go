package meshroute

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/mesh-verify/mesh-verify/lab/meshsim"
	"github.com/mesh-verify/mesh-verify/meshconfig"
)

// skupperDefaultCost is a link's cost without --cost (v1) or spec.cost
// (v2); v2 clamps costs below 1 to 1 (internal/site/link.go).
const skupperDefaultCost = 1

// deriveSkupper reads the entry's Skupper network: which sites are linked
// and at what cost, and in which sites the app is exposed.
//
// Links: v1 link Secrets (labelled skupper.io/type=connection-token, cost
// in the annotation skupper.io/cost, as `skupper link create --cost`
// writes it) and v2 Links (spec.cost), in the entry's namespace of every
// other cluster. The lab's sites form a star: a link made in cluster X
// (the tutorial links c2 and c3 to c1) connects X to the entry's site.
//
// Exposure: a Skupper network connects nothing until the app is exposed
// (the tutorial runs `skupper expose deployment/… --port 8080` in c2 and
// c3). A site serves the router's address when it has v1's
// skupper-services entry for the entry's Service with a target selecting
// the app's pods, or a v2 Connector selecting them whose routingKey is
// that of a Listener in the router's site for the entry's Service
// (host/port). The router's own site counts the same way (cost 0); a
// remote one also needs a link.
//
// The router balances each new connection to the site with the fewest
// open connections plus path cost. With no exposed target anywhere it
// has no target: the real router then stops listening for the address
// (its TCP listener is active only while a connector is reachable) and a
// client's connection is refused; the lab's data plane is an HTTP server
// that cannot refuse per entry, so it answers as when no backend is left
// (503, no healthy upstream) — a failed request that no cluster served,
// as with the real router.
func deriveSkupper(e Entry, objs Objects) (Route, error) {
	r := Route{Policy: meshsim.Policy{Mode: meshsim.ModeBalanced, Costs: map[string]float64{}}, Clusters: []string{}}
	links := map[string]float64{}
	exposed := map[string]bool{}
	keys, err := skupperListeners(e, objs, &r)
	if err != nil {
		return Route{}, err
	}
	for _, c := range e.Clusters {
		if err := skupperLinks(e, objs, c, links, &r); err != nil {
			return Route{}, err
		}
		for _, cm := range objs.of(c, "ConfigMap", e.Namespace) {
			if cm.GetName() != meshconfig.SkupperServices {
				continue
			}
			ok, err := skupperExposedV1(e, cm, c, &r)
			if err != nil {
				return Route{}, err
			}
			exposed[c] = exposed[c] || ok
		}
		for _, cn := range objs.of(c, "Connector", e.Namespace) {
			ok, err := skupperConnector(e, cn, c, keys, &r)
			if err != nil {
				return Route{}, err
			}
			exposed[c] = exposed[c] || ok
		}
	}
	for _, c := range e.Clusters {
		if !exposed[c] {
			continue
		}
		if c != e.Cluster {
			cost, linked := links[c]
			if !linked {
				r.Ignored = append(r.Ignored, fmt.Sprintf("the app is exposed in cluster %s, which has no link to the router's site %s", c, e.Cluster))
				continue
			}
			r.Policy.Costs[c] = cost
		}
		r.Clusters = append(r.Clusters, c)
	}
	return r, nil
}

// skupperLinks records the links made in cluster c: of several, the
// cheapest is the router's path.
func skupperLinks(e Entry, objs Objects, c string, links map[string]float64, r *Route) error {
	add := func(cost float64, from string) {
		r.From = append(r.From, fmt.Sprintf("%s (cost %g)", from, cost))
		if old, ok := links[c]; !ok || cost < old {
			links[c] = cost
		}
	}
	for _, s := range objs.of(c, "Secret", e.Namespace) {
		if s.GetLabels()[meshconfig.SkupperTypeLabel] != meshconfig.SkupperTypeLinkToken {
			continue
		}
		if c == e.Cluster {
			r.Ignored = append(r.Ignored, where(s, c)+": a link made in the router's own site (the lab's sites link to it)")
			continue
		}
		cost := float64(skupperDefaultCost)
		if v, ok := s.GetAnnotations()[meshconfig.SkupperCost]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fieldError(s, c, "metadata.annotations."+meshconfig.SkupperCost, "%q: want a whole number >= 0 (skupper link create --cost)", v)
			}
			cost = float64(n)
		}
		add(cost, where(s, c))
	}
	for _, l := range objs.of(c, "Link", e.Namespace) {
		if c == e.Cluster {
			r.Ignored = append(r.Ignored, where(l, c)+": a link made in the router's own site (the lab's sites link to it)")
			continue
		}
		spec, err := mapAt(l.Object["spec"], l, c, "spec")
		if err != nil {
			return err
		}
		cost, set, err := numberAt(spec["cost"], l, c, "spec.cost")
		if err != nil {
			return err
		}
		if !set || cost < skupperDefaultCost {
			cost = skupperDefaultCost
		}
		r.Ignored = append(r.Ignored, prefixed(where(l, c), ignoredFields(spec, "spec", "cost", "endpoints", "tlsCredentials"))...)
		add(cost, where(l, c))
	}
	return nil
}

// skupperListeners are the routing keys of the v2 Listeners in the
// router's site that serve the entry's Service (spec.host names it,
// spec.port is its port), each with the Listener that names it.
// Listeners of other sites serve their own callers, not this router.
func skupperListeners(e Entry, objs Objects, r *Route) (map[string]string, error) {
	keys := map[string]string{}
	for _, l := range objs.of(e.Cluster, "Listener", e.Namespace) {
		spec, err := mapAt(l.Object["spec"], l, e.Cluster, "spec")
		if err != nil {
			return nil, err
		}
		key, host, port, err := skupperKeyHostPort(spec, l, e.Cluster)
		if err != nil {
			return nil, err
		}
		if host == "" {
			return nil, fieldError(l, e.Cluster, "spec.host", "required: the Service name the Listener creates")
		}
		if !hostMatches(host, e.To, e.Namespace) || (e.ServicePort != 0 && port != int(e.ServicePort)) {
			continue
		}
		r.From = append(r.From, where(l, e.Cluster))
		r.Ignored = append(r.Ignored, prefixed(where(l, e.Cluster), ignoredFields(spec, "spec", "routingKey", "host", "port", "tlsCredentials"))...)
		keys[key] = where(l, e.Cluster)
	}
	return keys, nil
}

// skupperConnector reports whether v2 Connector cn of cluster c exposes
// the app to the router: its routingKey is one of a Listener for the
// entry's Service in the router's site (keys), and its selector selects
// the app's pods (or its host names the app's Service).
func skupperConnector(e Entry, cn *unstructured.Unstructured, c string, keys map[string]string, r *Route) (bool, error) {
	spec, err := mapAt(cn.Object["spec"], cn, c, "spec")
	if err != nil {
		return false, err
	}
	key, host, _, err := skupperKeyHostPort(spec, cn, c)
	if err != nil {
		return false, err
	}
	sel, err := stringAt(spec["selector"], cn, c, "spec.selector")
	if err != nil {
		return false, err
	}
	if (sel == "") == (host == "") {
		return false, fieldError(cn, c, "spec", "want one of selector or host (the Connector CRD's oneOf)")
	}
	selects := host != "" && hostMatches(host, e.To, e.Namespace)
	if sel != "" {
		if selects, err = selectsApp(sel, e.PodLabels); err != nil {
			return false, fieldError(cn, c, "spec.selector", "%q: %v", sel, err)
		}
	}
	if _, ok := keys[key]; !ok {
		if selects {
			r.Ignored = append(r.Ignored, fmt.Sprintf("%s: routing key %q matches no Listener for %s:%d in the router's site %s", where(cn, c), key, e.To, e.ServicePort, e.Cluster))
		}
		return false, nil
	}
	if !selects {
		r.Ignored = append(r.Ignored, fmt.Sprintf("%s: routing key %q, but it selects none of %s's pods", where(cn, c), key, e.To))
		return false, nil
	}
	r.From = append(r.From, where(cn, c))
	r.Ignored = append(r.Ignored, prefixed(where(cn, c), ignoredFields(spec, "spec", "routingKey", "port", "selector", "host", "tlsCredentials", "useClientCert", "verifyHostname"))...)
	return true, nil
}

// skupperKeyHostPort reads the fields v2's Listener and Connector share:
// routingKey and port are required, as their CRDs say.
func skupperKeyHostPort(spec map[string]any, u *unstructured.Unstructured, c string) (key, host string, port int, err error) {
	if key, err = stringAt(spec["routingKey"], u, c, "spec.routingKey"); err != nil {
		return "", "", 0, err
	}
	if key == "" {
		return "", "", 0, fieldError(u, c, "spec.routingKey", "required")
	}
	if host, err = stringAt(spec["host"], u, c, "spec.host"); err != nil {
		return "", "", 0, err
	}
	n, set, err := numberAt(spec["port"], u, c, "spec.port")
	if err != nil {
		return "", "", 0, err
	}
	if !set || n != float64(int(n)) || n < 1 || n > 65535 {
		return "", "", 0, fieldError(u, c, "spec.port", "%v: want a port in 1..65535", spec["port"])
	}
	return key, host, int(n), nil
}

// skupperExposedV1 reports whether the skupper-services ConfigMap cm of
// cluster c defines the entry's Service with a target selecting the
// app's pods, as `skupper expose deployment/<app> --port <port>` leaves
// it in the site that runs the app.
func skupperExposedV1(e Entry, cm *unstructured.Unstructured, c string, r *Route) (bool, error) {
	data, err := stringMapAt(cm.Object["data"], cm, c, "data")
	if err != nil {
		return false, err
	}
	exposed := false
	for _, key := range slices.Sorted(maps.Keys(data)) {
		path := "data." + key
		def, err := meshconfig.ParseSkupperService(data[key])
		if err != nil {
			return false, fieldError(cm, c, path, "%v", err)
		}
		addr, err := stringAt(def["address"], cm, c, path+".address")
		if err != nil {
			return false, err
		}
		if addr != e.To {
			continue // another service's definition
		}
		ok, err := skupperServiceTargets(e, cm, c, path, def, r)
		if err != nil {
			return false, err
		}
		exposed = exposed || ok
	}
	return exposed, nil
}

// skupperServiceTargets checks a skupper-services definition of the
// entry's Service (protocol, ports) and reports whether one of its
// targets selects the app's pods.
func skupperServiceTargets(e Entry, cm *unstructured.Unstructured, c, path string, def map[string]any, r *Route) (bool, error) {
	proto, err := stringAt(def["protocol"], cm, c, path+".protocol")
	if err != nil {
		return false, err
	}
	switch proto {
	case "", "tcp": // the CLI's default
	case "http", "http2":
		// The router's HTTP adaptors balance per request, the lab per
		// connection.
		r.Ignored = append(r.Ignored, fmt.Sprintf("%s: %s.protocol %s (the lab's router balances per connection, as for tcp)", where(cm, c), path, proto))
	default:
		return false, fieldError(cm, c, path+".protocol", "%q: want tcp, http or http2 (skupper expose --protocol)", proto)
	}
	ports, err := listAt(def["ports"], cm, c, path+".ports")
	if err != nil {
		return false, err
	}
	served := e.ServicePort == 0
	for i, p := range ports {
		n, _, err := numberAt(p, cm, c, fmt.Sprintf("%s.ports[%d]", path, i))
		if err != nil {
			return false, err
		}
		if n != float64(int(n)) || n < 1 || n > 65535 {
			return false, fieldError(cm, c, fmt.Sprintf("%s.ports[%d]", path, i), "%v: want a port in 1..65535", p)
		}
		served = served || int(n) == int(e.ServicePort)
	}
	targets, err := listAt(def["targets"], cm, c, path+".targets")
	if err != nil {
		return false, err
	}
	selects := false
	for i, t := range targets {
		tp := fmt.Sprintf("%s.targets[%d]", path, i)
		tm, err := mapAt(t, cm, c, tp)
		if err != nil {
			return false, err
		}
		sel, err := stringAt(tm["selector"], cm, c, tp+".selector")
		if err != nil {
			return false, err
		}
		svc, err := stringAt(tm["service"], cm, c, tp+".service")
		if err != nil {
			return false, err
		}
		switch {
		case sel != "":
			ok, err := selectsApp(sel, e.PodLabels)
			if err != nil {
				return false, fieldError(cm, c, tp+".selector", "%q: %v", sel, err)
			}
			selects = selects || ok
		case svc != "":
			selects = selects || hostMatches(svc, e.To, e.Namespace)
		default:
			return false, fieldError(cm, c, tp, "want a selector or a service (skupper expose deployment|service)")
		}
		r.Ignored = append(r.Ignored, prefixed(where(cm, c), ignoredFields(tm, tp, "name", "selector", "service", "targetPorts"))...)
	}
	r.Ignored = append(r.Ignored, prefixed(where(cm, c), ignoredFields(def, path, "address", "protocol", "ports", "targets", "origin", "labels", "annotations"))...)
	switch {
	case !served:
		r.Ignored = append(r.Ignored, fmt.Sprintf("%s: %s.ports has not the Service's port %d", where(cm, c), path, e.ServicePort))
		return false, nil
	case !selects:
		if len(targets) > 0 {
			r.Ignored = append(r.Ignored, fmt.Sprintf("%s: %s.targets select none of %s's pods", where(cm, c), path, e.To))
		}
		return false, nil
	}
	r.From = append(r.From, where(cm, c)+" "+path)
	return true, nil
}

// selectsApp reports whether label selector sel (Kubernetes syntax,
// as Skupper's selector fields take it) selects the pods of one of the
// apps whose label sets are pods.
func selectsApp(sel string, pods []map[string]string) (bool, error) {
	s, err := labels.Parse(sel)
	if err != nil {
		return false, err
	}
	for _, p := range pods {
		if s.Matches(labels.Set(p)) {
			return true, nil
		}
	}
	return false, nil
}

// sortClusters orders cs as the lab lists its clusters.
func sortClusters(cs, order []string) {
	slices.SortFunc(cs, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) })
}
