package meshconfig

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// clusterDomain is the Kubernetes DNS suffix Istio expands short hosts to.
const clusterDomain = ".svc.cluster.local"

// istioDefaultMirrorPercent is the share a mirror copies when the rule
// sets no percentage (istio pilot route.go MirrorPercent).
const istioDefaultMirrorPercent = 100

// istioFQDN expands a host as Istio does: a name without a dot is
// relative to the namespace of the object that names it; anything else
// is taken as written.
func istioFQDN(host, ns string) string {
	if !strings.Contains(host, ".") && host != "*" {
		return host + "." + ns + clusterDomain
	}
	return host
}

// serviceOf splits NAME.NS.svc.cluster.local; ok is false for a host that
// is not a Kubernetes Service (a ServiceEntry's, an external name).
func serviceOf(fqdn string) (ns, name string, ok bool) {
	rest, found := strings.CutSuffix(fqdn, clusterDomain)
	if !found {
		return "", "", false
	}
	name, ns, found = strings.Cut(rest, ".")
	if !found || ns == "" || strings.Contains(ns, ".") {
		return "", "", false
	}
	return ns, name, true
}

// istio is one VirtualService's resolution in progress.
type istio struct {
	q    Query
	objs Objects
	vs   *obj
	// drs and svcs are the objects used, keyed by namespace/name.
	drs, svcs map[string]*obj
	notes     []string
}

func resolveIstio(q Query, objs Objects) (Expected, error) {
	if err := needBy(q, ByVersion); err != nil {
		return Expected{}, fmt.Errorf("%w (the cluster share behind a route depends on locality load balancing and endpoint counts, not on the VirtualService)", err)
	}
	cl := q.cluster()
	u := objs.find(cl, KindVirtualService, q.Ref.Namespace, q.Ref.Name)
	if u == nil {
		return Expected{}, notFound(q)
	}
	s := &istio{q: q, objs: objs, vs: newObj(u, cl), drs: map[string]*obj{}, svcs: map[string]*obj{}}
	return s.resolve()
}

func (s *istio) resolve() (Expected, error) {
	spec := s.vs.root().get("spec")
	if _, err := spec.object(); err != nil {
		return Expected{}, err
	}
	gw := s.q.Request.gateway()
	gws, err := strings2(spec.get("gateways"))
	if err != nil {
		return Expected{}, err
	}
	if len(gws) > 0 {
		s.vs.use("spec.gateways")
	}
	if !gatewayListed(gw, gws, s.vs.u.GetNamespace(), true) {
		return Expected{}, spec.get("gateways").errf("the routes apply to %v; the attack's requests come through %s (fromMesh.gateway names the Gateway they enter through)", orMesh(gws), gw)
	}
	if s.q.Request.Host != "" {
		hosts, err := strings2(spec.get("hosts"))
		if err != nil {
			return Expected{}, err
		}
		s.vs.use("spec.hosts")
		if !slices.ContainsFunc(hosts, func(h string) bool { return hostCovers(h, s.q.Request.Host, s.vs.u.GetNamespace()) }) {
			return Expected{}, spec.get("hosts").errf("%v does not cover the attack's host %s", hosts, s.q.Request.Host)
		}
	}
	rule, err := s.rule(spec.get("http"))
	if err != nil {
		return Expected{}, err
	}
	e := Expected{Rule: rule.path}
	weights, err := s.destinations(rule, &e)
	if err != nil {
		return Expected{}, err
	}
	if err := weighted(&e, weights); err != nil {
		return Expected{}, rule.get("route").errf("%v", err)
	}
	if e.Mirrors, err = s.mirrors(rule); err != nil {
		return Expected{}, err
	}
	e.Explanation = append(e.Explanation, s.notes...)
	e.Sources = append(e.Sources, s.vs.source())
	for _, k := range slices.Sorted(maps.Keys(s.drs)) {
		e.Sources = append(e.Sources, s.drs[k].source())
	}
	for _, k := range slices.Sorted(maps.Keys(s.svcs)) {
		e.Sources = append(e.Sources, s.svcs[k].source())
	}
	return e, nil
}

// rule is the http route the requests take: the one the Ref's section
// names, else the first whose match the request meets.
func (s *istio) rule(http node) (node, error) {
	rules, err := http.list()
	if err != nil {
		return node{}, err
	}
	if len(rules) == 0 {
		return node{}, http.errf("no HTTP route (tcp and tls routes split connections, not requests)")
	}
	if sec := s.q.Ref.Section; sec != "" {
		var names []string
		for _, r := range rules {
			name, err := r.get("name").str()
			if err != nil {
				return node{}, err
			}
			if name == sec {
				s.vs.use(r.path + ".name")
				return r, nil
			}
			if name != "" {
				names = append(names, name)
			}
		}
		return node{}, http.errf("no route named %q (named routes: %v)", sec, names)
	}
	for _, r := range rules {
		ok, err := s.matches(r)
		if err != nil {
			return node{}, err
		}
		if ok {
			if !r.get("match").missing() {
				s.vs.use(r.path + ".match")
			}
			return r, nil
		}
		s.vs.use(r.path + ".match")
	}
	return node{}, http.errf("no route matches the attack's requests (%s); Envoy answers them 404", s.q.Request)
}

// matches reports whether the request meets any of the rule's match
// blocks (OR), each block all of its conditions (AND).
func (s *istio) matches(rule node) (bool, error) {
	ms, err := rule.get("match").list()
	if err != nil || len(ms) == 0 {
		return err == nil, err
	}
	for _, m := range ms {
		ok, err := s.match(m)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func (s *istio) match(m node) (bool, error) {
	req := s.q.Request
	fold := m.get("ignoreUriCase").v == true
	for _, k := range m.keys() {
		c := m.get(k)
		var ok bool
		var err error
		switch k {
		case "name", "statPrefix", "ignoreUriCase":
			continue
		case "uri":
			ok, err = stringMatch(c, req.pathOnly(), fold)
		case "method":
			ok, err = stringMatch(c, req.method(), false)
		case "scheme":
			ok, err = stringMatch(c, req.Scheme, false)
		case "authority":
			ok, err = stringMatch(c, req.Host, false)
		case "headers", "withoutHeaders":
			ok, err = headersMatch(c, req, k == "withoutHeaders")
		case "queryParams":
			ok, err = queryMatch(c, req)
		case "gateways":
			var gws []string
			if gws, err = strings2(c); err == nil {
				ok = gatewayListed(req.gateway(), gws, s.vs.u.GetNamespace(), false)
			}
		default: // port, sourceLabels, sourceNamespace: the caller's, unknown here
			return false, c.errf("whether the attack's requests meet %s cannot be told from the request mesh-verify sends (method, path, host, headers, gateway); name the route with #SECTION in the reference", k)
		}
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// headersMatch: every header's StringMatch holds (or, for
// withoutHeaders, none does).
func headersMatch(n node, req Request, negate bool) (bool, error) {
	if _, err := n.object(); err != nil {
		return false, err
	}
	for _, name := range n.keys() {
		v, sent := req.header(name)
		ok := false
		if sent {
			var err error
			if ok, err = stringMatch(n.get(name), v, false); err != nil {
				return false, err
			}
		}
		if ok == negate {
			return false, nil
		}
	}
	return true, nil
}

func queryMatch(n node, req Request) (bool, error) {
	if _, err := n.object(); err != nil {
		return false, err
	}
	q := req.query()
	for _, name := range n.keys() {
		if !q.Has(name) {
			return false, nil
		}
		ok, err := stringMatch(n.get(name), q.Get(name), false)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// destinations reads the rule's route[]: weights per bucket.
func (s *istio) destinations(rule node, e *Expected) (map[string]float64, error) {
	route := rule.get("route")
	dests, err := route.list()
	if err != nil {
		return nil, err
	}
	if len(dests) == 0 {
		for _, k := range []string{"redirect", "directResponse"} {
			if !rule.get(k).missing() {
				return nil, rule.get(k).errf("the matched route answers itself; no destination to split")
			}
		}
		return nil, route.errf("no destination")
	}
	weights := map[string]float64{}
	positive := 0
	for _, d := range dests {
		w, set, err := d.get("weight").num()
		if err != nil {
			return nil, err
		}
		if set {
			s.vs.use(d.path + ".weight")
		}
		if w < 0 || w != math.Trunc(w) || w > math.MaxInt32 {
			return nil, d.get("weight").errf("%v: a weight is a whole number >= 0 (istiod refuses a negative one)", w)
		}
		if len(dests) == 1 {
			w = 1 // one destination takes everything, whatever its weight (pilot route.go)
		} else if !set {
			e.Explanation = append(e.Explanation, fmt.Sprintf("%s has no weight: 0, so it takes no traffic", d.path))
		}
		if w > 0 {
			positive++
		}
		bucket, err := s.bucket(d.get("destination"), w > 0)
		if err != nil {
			return nil, err
		}
		weights[bucket] += w
	}
	if positive == 0 {
		return nil, route.errf("%d destinations and no weight above 0: istiod refuses it (total destination weight = 0)", len(dests))
	}
	return weights, nil
}

// bucket is the version a destination (host and subset) sends to: the
// subset's version label, else the one version of the pods it selects.
// Pods are checked when it takes traffic: a subset that selects none
// turns its share into 503s, not a redistribution.
func (s *istio) bucket(d node, takesTraffic bool) (string, error) {
	if _, err := d.object(); err != nil {
		return "", err
	}
	if d.missing() {
		return "", d.errf("missing")
	}
	host, err := d.get("host").str()
	if err != nil {
		return "", err
	}
	s.vs.use(d.path + ".host")
	fqdn := istioFQDN(host, s.vs.u.GetNamespace())
	ns, name, ok := serviceOf(fqdn)
	if !ok {
		return "", d.get("host").errf("%q is not a Kubernetes Service (NAME or NAME.NAMESPACE.svc.cluster.local): hosts of ServiceEntries are not resolved", host)
	}
	subset, err := d.get("subset").str()
	if err != nil {
		return "", err
	}
	sel := labels.Set{}
	var subsetLabels map[string]string
	var sub node
	if subset != "" {
		s.vs.use(d.path + ".subset")
		var dr *obj
		if dr, sub, err = s.subset(d.get("subset"), fqdn, subset); err != nil {
			return "", err
		}
		if subsetLabels, err = sub.get("labels").strMap(); err != nil {
			return "", err
		}
		dr.use(sub.path + ".labels")
		maps.Copy(sel, subsetLabels)
	}
	svc, err := s.service(d.get("host"), ns, name)
	if err != nil {
		return "", err
	}
	svcSel, err := svc.root().get("spec").get("selector").strMap()
	if err != nil {
		return "", err
	}
	svc.use("spec.selector")
	if len(svcSel) == 0 {
		return "", svc.errf("spec.selector", "empty: the Service's endpoints are not pods mesh-verify can tell versions of")
	}
	maps.Copy(sel, svcSel)
	vl := s.q.versionLabel()
	version, fromSubset := subsetLabels[vl]
	if !takesTraffic && fromSubset {
		return version, nil
	}
	vs, count := podVersions(s.objs, s.q.Clusters, ns, labels.SelectorFromSet(sel), vl)
	if count == 0 && takesTraffic {
		where := "Service " + ns + "/" + name
		if subset != "" {
			return "", sub.errf("subset %q (%v with Service %s/%s's selector) matches no ready pod in clusters %s: its share would fail with 503, not move elsewhere", subset, subsetLabels, ns, name, strings.Join(s.q.Clusters, ", "))
		}
		return "", d.get("host").errf("%s selects no ready pod in clusters %s", where, strings.Join(s.q.Clusters, ", "))
	}
	if fromSubset {
		s.notes = append(s.notes, fmt.Sprintf("subset %s of %s: version %s, %d ready pods", subset, host, version, count))
		return version, nil
	}
	switch {
	case len(vs) == 1 && vs[0] != "":
		s.notes = append(s.notes, fmt.Sprintf("%s%s: its %d ready pods are all version %s (pod label %s)", host, subsetSuffix(subset), count, vs[0], vl))
		return vs[0], nil
	case len(vs) == 0:
		return "", d.get("host").errf("takes no traffic and selects no ready pod: its version cannot be told")
	case slices.Contains(vs, ""):
		return "", d.errf("some of its ready pods have no label %s: their version cannot be told", vl)
	}
	return "", d.errf("%s%s reaches pods of several versions %v: a split by version needs a destination per version (a subset)", host, subsetSuffix(subset), vs)
}

func subsetSuffix(subset string) string {
	if subset == "" {
		return ""
	}
	return " subset " + subset
}

// subset finds the subset of host a DestinationRule defines (of the
// VirtualService's cluster and the namespaces read).
func (s *istio) subset(at node, fqdn, subset string) (*obj, node, error) {
	var defined []string
	var found *obj
	var foundNode node
	cl := s.vs.cluster
	for _, u := range s.objs.all(cl, "DestinationRule", "") {
		dr := s.drs[u.GetNamespace()+"/"+u.GetName()]
		if dr == nil {
			dr = newObj(u, cl)
		}
		spec := dr.root().get("spec")
		host, err := spec.get("host").str()
		if err != nil {
			return nil, node{}, err
		}
		if istioFQDN(host, u.GetNamespace()) != fqdn {
			continue
		}
		subs, err := spec.get("subsets").list()
		if err != nil {
			return nil, node{}, err
		}
		for _, sub := range subs {
			name, err := sub.get("name").str()
			if err != nil {
				return nil, node{}, err
			}
			defined = append(defined, name)
			if name != subset {
				continue
			}
			if found != nil {
				return nil, node{}, sub.errf("subset %q of host %s is also defined by DestinationRule %s/%s", subset, fqdn, found.u.GetNamespace(), found.u.GetName())
			}
			dr.use("spec.host")
			dr.use(sub.path + ".name")
			s.drs[u.GetNamespace()+"/"+u.GetName()] = dr
			found, foundNode = dr, sub
		}
	}
	if found == nil {
		return nil, node{}, at.errf("subset %q is defined by no DestinationRule for host %s in cluster %s (defined: %v)", subset, fqdn, cl, defined)
	}
	return found, foundNode, nil
}

// service is the Kubernetes Service behind a host, from the first
// cluster that has it.
func (s *istio) service(at node, ns, name string) (*obj, error) {
	if o := s.svcs[ns+"/"+name]; o != nil {
		return o, nil
	}
	for _, c := range s.q.Clusters {
		if u := s.objs.find(c, "Service", ns, name); u != nil {
			o := newObj(u, c)
			s.svcs[ns+"/"+name] = o
			return o, nil
		}
	}
	return nil, at.errf("no Service %s/%s in clusters %s", ns, name, strings.Join(s.q.Clusters, ", "))
}

// mirrors reads mirror with mirrorPercentage (or the deprecated
// mirrorPercent), and mirrors[], with Istio's defaults: 100% when no
// percentage is set, none at 0.
func (s *istio) mirrors(rule node) ([]Mirror, error) {
	type one struct {
		dest node
		pct  node
	}
	var all []one
	if m := rule.get("mirror"); !m.missing() {
		pct := rule.get("mirrorPercentage").get("value")
		if pct.missing() {
			pct = rule.get("mirrorPercent")
		}
		all = append(all, one{m, pct})
	}
	ms, err := rule.get("mirrors").list()
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		all = append(all, one{m.get("destination"), m.get("percentage").get("value")})
	}
	var out []Mirror
	for _, m := range all {
		p, set, err := m.pct.num()
		if err != nil {
			return nil, err
		}
		mi := Mirror{Percent: istioDefaultMirrorPercent}
		if set {
			if !(p >= 0 && p <= 100) {
				return nil, m.pct.errf("%v: want 0..100", p)
			}
			mi.Percent, mi.Field = p, m.pct.path
			s.vs.use(m.pct.path)
		}
		if mi.Percent == 0 {
			continue // Istio: 0% mirrors nothing
		}
		if mi.Bucket, err = s.bucket(m.dest, true); err != nil {
			return nil, err
		}
		out = append(out, mi)
	}
	return out, nil
}

// strings2 reads a list of strings.
func strings2(n node) ([]string, error) {
	l, err := n.list()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(l))
	for i, x := range l {
		if out[i], err = x.str(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func orMesh(gws []string) []string {
	if len(gws) == 0 {
		return []string{"mesh"}
	}
	return gws
}

// gatewayListed reports whether gw is among gws ("ns/name", or a name
// relative to ns). An empty list means "mesh" for the VirtualService's
// spec.gateways, and any gateway for a match block's gateways.
func gatewayListed(gw string, gws []string, ns string, specLevel bool) bool {
	if len(gws) == 0 {
		return !specLevel || gw == "mesh"
	}
	for _, g := range gws {
		if g == gw || (g != "mesh" && !strings.Contains(g, "/") && ns+"/"+g == gw) {
			return true
		}
	}
	return false
}

// hostCovers reports whether a VirtualService host (maybe a wildcard)
// covers the request's Host header (its port dropped).
func hostCovers(vsHost, reqHost, ns string) bool {
	h, _, _ := strings.Cut(reqHost, ":")
	if vsHost == "*" {
		return true
	}
	if rest, ok := strings.CutPrefix(vsHost, "*"); ok {
		return strings.HasSuffix(h, rest)
	}
	if h == vsHost {
		return true
	}
	// A client in the mesh reaches a Service by its short names too.
	f := istioFQDN(vsHost, ns)
	if sns, name, ok := serviceOf(f); ok {
		switch h {
		case name, name + "." + sns, name + "." + sns + ".svc", f:
			return true
		}
	}
	return false
}
