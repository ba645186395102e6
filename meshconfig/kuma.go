package meshconfig

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// Kuma's tags that tell backends apart: a version (the pod label the
// query names) or a zone, which mesh-verify takes as the cluster of the
// same name.
const (
	kumaService     = "kuma.io/service"
	kumaZone        = "kuma.io/zone"
	kumaDisplayName = "kuma.io/display-name"
	// kumaDefaultWeight is a backendRef's weight when it sets none
	// (+kubebuilder:default=1).
	kumaDefaultWeight = 1
	kumaFullPercent   = 100
)

// kumaBucket is the bucket a backend's tags (or MeshService labels) name
// for q.By.
func kumaBucket(q Query, n node, tags map[string]string) (string, error) {
	key := q.versionLabel()
	if q.By == ByCluster {
		key = kumaZone
	}
	if v, ok := tags[key]; ok && v != "" {
		return v, nil
	}
	return "", n.errf("%v has no %s: the backend is not one %s (split by %s needs it)", tags, key, q.By, q.By)
}

// kumaWeight reads a weight: a whole number >= 0, def when unset.
func kumaWeight(n node, def float64) (float64, error) {
	w, set, err := n.num()
	if err != nil {
		return 0, err
	}
	if !set {
		return def, nil
	}
	n.o.use(n.path)
	if w < 0 || w != math.Trunc(w) || w > math.MaxUint32 {
		return 0, n.errf("%v: a weight is a whole number >= 0", w)
	}
	return w, nil
}

func resolveMeshHTTPRoute(q Query, objs Objects) (Expected, error) {
	if err := needBy(q, ByVersion, ByCluster); err != nil {
		return Expected{}, err
	}
	u := objs.find(q.cluster(), KindMeshHTTPRoute, q.Ref.Namespace, q.Ref.Name)
	if u == nil {
		return Expected{}, notFound(q)
	}
	o := newObj(u, q.cluster())
	to, err := kumaTo(q, o)
	if err != nil {
		return Expected{}, err
	}
	rule, err := kumaRule(q, to.get("rules"))
	if err != nil {
		return Expected{}, err
	}
	e := Expected{Rule: rule.path}
	def := rule.get("default")
	refs, err := def.get("backendRefs").list()
	if err != nil {
		return Expected{}, err
	}
	if len(refs) == 0 {
		return Expected{}, def.get("backendRefs").errf("none: the rule routes to %s itself, over all its endpoints; that is no split by %s", to.path+".targetRef", q.By)
	}
	weights := map[string]float64{}
	for _, b := range refs {
		bucket, err := kumaBackendRef(q, b)
		if err != nil {
			return Expected{}, err
		}
		w, err := kumaWeight(b.get("weight"), kumaDefaultWeight)
		if err != nil {
			return Expected{}, err
		}
		if len(refs) == 1 {
			w = 1 // a single backend is a plain cluster: its weight does not matter
		}
		weights[bucket] += w
	}
	if err := weighted(&e, weights); err != nil {
		return Expected{}, def.get("backendRefs").errf("%v", err)
	}
	filters, err := def.get("filters").list()
	if err != nil {
		return Expected{}, err
	}
	for _, f := range filters {
		if t, _ := f.get("type").str(); t != "RequestMirror" {
			continue
		}
		rm := f.get("requestMirror")
		bucket, err := kumaBackendRef(q, rm.get("backendRef"))
		if err != nil {
			return Expected{}, err
		}
		m := Mirror{Bucket: bucket, Percent: kumaFullPercent}
		if p := rm.get("percentage"); !p.missing() {
			if m.Percent, err = kumaPercent(p); err != nil {
				return Expected{}, err
			}
			m.Field = p.path
			o.use(p.path)
		}
		if m.Percent > 0 {
			e.Mirrors = append(e.Mirrors, m)
		}
	}
	e.Sources = []Source{o.source()}
	return e, nil
}

// kumaPercent reads an IntOrString percentage ("12.5" or 12).
func kumaPercent(n node) (float64, error) {
	var p float64
	switch v := n.v.(type) {
	case string:
		f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
		if err != nil {
			return 0, n.errf("%q: want a number of percent", v)
		}
		p = f
	default:
		f, _, err := n.num()
		if err != nil {
			return 0, err
		}
		p = f
	}
	if !(p >= 0 && p <= 100) {
		return 0, n.errf("%v: want 0..100", p)
	}
	return p, nil
}

// kumaTo picks the spec.to[] entry: the one the Ref's section names (its
// targetRef name), else the only one.
func kumaTo(q Query, o *obj) (node, error) {
	tos, err := o.root().get("spec").get("to").list()
	if err != nil {
		return node{}, err
	}
	var names []string
	for _, t := range tos {
		name, err := t.get("targetRef").get("name").str()
		if err != nil {
			return node{}, err
		}
		names = append(names, name)
		if q.Ref.Section != "" && name == q.Ref.Section {
			o.use(t.path + ".targetRef.name")
			return t, nil
		}
	}
	switch {
	case q.Ref.Section != "":
		return node{}, o.errf("spec.to", "no entry whose targetRef names %q (have %v)", q.Ref.Section, names)
	case len(tos) == 1:
		o.use(tos[0].path + ".targetRef")
		return tos[0], nil
	case len(tos) == 0:
		return node{}, o.errf("spec.to", "no entry: the route routes nothing")
	}
	return node{}, o.errf("spec.to", "%d entries (%v): name the one the attack reaches with #SERVICE in the reference", len(tos), names)
}

// kumaBackendRef is the bucket of a backendRef: MeshServiceSubset tags,
// or a MeshService's labels (Kuma 2.9+ and 3.x select a zone's
// MeshService by kuma.io/zone).
func kumaBackendRef(q Query, b node) (string, error) {
	kind, err := b.get("kind").str()
	if err != nil {
		return "", err
	}
	b.o.use(b.path + ".kind")
	var tags map[string]string
	switch kind {
	case "MeshServiceSubset":
		tags, err = b.get("tags").strMap()
		b.o.use(b.path + ".tags")
	case "MeshService", "MeshMultiZoneService":
		tags, err = b.get("labels").strMap()
		b.o.use(b.path + ".labels")
	default:
		return "", b.get("kind").errf("%q: want MeshService or MeshServiceSubset", kind)
	}
	if err != nil {
		return "", err
	}
	return kumaBucket(q, b, tags)
}

// kumaRule is the rule the requests take: of the rules with a match the
// request meets, the most specific, as Kuma orders them (Gateway API's
// precedence, kuma#9472): an exact path before a prefix, a longer prefix
// before a shorter one, then a method, then more headers, then more
// query parameters, then the earlier rule.
func kumaRule(q Query, rules node) (node, error) {
	rs, err := rules.list()
	if err != nil {
		return node{}, err
	}
	if len(rs) == 0 {
		return node{}, rules.errf("no rule: the route sends everything to the target service unsplit")
	}
	type cand struct {
		rule node
		rank []int
	}
	var cands []cand
	for _, r := range rs {
		ms, err := r.get("matches").list()
		if err != nil {
			return node{}, err
		}
		r.o.use(r.path + ".matches")
		if len(ms) == 0 { // a rule without matches takes everything
			cands = append(cands, cand{r, []int{0, 0, 0, 0, 0}})
		}
		for _, m := range ms {
			ok, rank, err := kumaMatch(q.Request, m)
			if err != nil {
				return node{}, err
			}
			if ok {
				cands = append(cands, cand{r, rank})
			}
		}
	}
	if len(cands) == 0 {
		return node{}, rules.errf("no rule matches the attack's requests (%s): they would go to the target service unsplit", q.Request)
	}
	best := slices.MaxFunc(cands, func(a, b cand) int {
		if c := slices.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		return strings.Compare(b.rule.path, a.rule.path) // the earlier rule wins ties
	})
	return best.rule, nil
}

// kumaMatch evaluates one MeshHTTPRoute (or TrafficRoute http) match and
// its precedence rank: path kind (exact 3, prefix 2, regex 1), prefix
// length, method set, headers, query parameters.
func kumaMatch(req Request, m node) (ok bool, rank []int, err error) {
	rank = make([]int, 5)
	if p := m.get("path"); !p.missing() {
		typ, err := p.get("type").str()
		if err != nil {
			return false, nil, err
		}
		val, err := p.get("value").str()
		if err != nil {
			return false, nil, err
		}
		path := req.pathOnly()
		switch typ {
		case "Exact":
			ok, rank[0] = path == val, 3
		case "PathPrefix":
			ok, rank[0], rank[1] = prefixElements(path, val), 2, len(val)
		case "RegularExpression":
			if ok, err = fullMatch(p.get("value"), val, path); err != nil {
				return false, nil, err
			}
			rank[0] = 1
		default:
			return false, nil, p.get("type").errf("%q: want Exact, PathPrefix or RegularExpression", typ)
		}
		if !ok {
			return false, nil, nil
		}
	}
	if meth := m.get("method"); !meth.missing() {
		v, err := meth.str()
		if err != nil {
			return false, nil, err
		}
		if !strings.EqualFold(v, req.method()) {
			return false, nil, nil
		}
		rank[2] = 1
	}
	hs, err := m.get("headers").list()
	if err != nil {
		return false, nil, err
	}
	for _, h := range hs {
		name, _ := h.get("name").str()
		v, sent := req.header(name)
		if ok, err = kumaValueMatch(h, v, sent); err != nil || !ok {
			return false, nil, err
		}
	}
	rank[3] = len(hs)
	qs, err := m.get("queryParams").list()
	if err != nil {
		return false, nil, err
	}
	query := req.query()
	for _, x := range qs {
		name, _ := x.get("name").str()
		if ok, err = kumaValueMatch(x, query.Get(name), query.Has(name)); err != nil || !ok {
			return false, nil, err
		}
	}
	rank[4] = len(qs)
	return true, rank, nil
}

// kumaValueMatch is a header or query match {type, name, value}; type
// defaults to Exact.
func kumaValueMatch(n node, v string, sent bool) (bool, error) {
	typ, err := n.get("type").str()
	if err != nil {
		return false, err
	}
	want, err := n.get("value").str()
	if err != nil {
		return false, err
	}
	switch typ {
	case "", "Exact":
		return sent && v == want, nil
	case "Prefix":
		return sent && strings.HasPrefix(v, want), nil
	case "RegularExpression":
		if !sent {
			return false, nil
		}
		return fullMatch(n.get("value"), want, v)
	case "Present":
		return sent, nil
	case "Absent":
		return !sent, nil
	}
	return false, n.get("type").errf("%q: want Exact, Prefix, RegularExpression, Present or Absent", typ)
}

// prefixElements is Gateway API's PathPrefix: whole path elements, a
// trailing slash of the prefix ignored.
func prefixElements(path, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return true
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// resolveTrafficRoute reads Kuma 2.x's legacy, cluster-scoped
// TrafficRoute: the first conf.http[] entry whose match the request
// meets, else conf.split (or conf.destination, one backend).
func resolveTrafficRoute(q Query, objs Objects) (Expected, error) {
	if err := needBy(q, ByVersion, ByCluster); err != nil {
		return Expected{}, err
	}
	u := objs.find(q.cluster(), KindTrafficRoute, "", q.Ref.Name)
	if u == nil {
		return Expected{}, notFound(q)
	}
	o := newObj(u, q.cluster())
	conf := o.root().get("spec").get("conf")
	if _, err := conf.object(); err != nil {
		return Expected{}, err
	}
	target := conf
	https, err := conf.get("http").list()
	if err != nil {
		return Expected{}, err
	}
	for _, h := range https {
		ok, err := trafficRouteMatch(q.Request, h.get("match"))
		if err != nil {
			return Expected{}, err
		}
		o.use(h.path + ".match")
		if ok {
			target = h
			break
		}
	}
	e := Expected{Rule: target.path}
	weights := map[string]float64{}
	split, err := target.get("split").list()
	if err != nil {
		return Expected{}, err
	}
	if len(split) == 0 {
		d := target.get("destination")
		if d.missing() {
			return Expected{}, target.errf("neither split nor destination")
		}
		tags, err := d.strMap()
		if err != nil {
			return Expected{}, err
		}
		o.use(d.path)
		b, err := trafficRouteBucket(q, objs, d, tags, true)
		if err != nil {
			return Expected{}, err
		}
		weights[b] = 1
	}
	for _, s := range split {
		wn := s.get("weight")
		if wn.missing() {
			return Expected{}, wn.errf("missing: Kuma requires a weight on every split entry")
		}
		w, err := kumaWeight(wn, 0)
		if err != nil {
			return Expected{}, err
		}
		tags, err := s.get("destination").strMap()
		if err != nil {
			return Expected{}, err
		}
		o.use(s.path + ".destination")
		b, err := trafficRouteBucket(q, objs, s.get("destination"), tags, w > 0)
		if err != nil {
			return Expected{}, err
		}
		if b == "" {
			continue // weight 0, no pods: it takes nothing (Flagger scales the canary to 0)
		}
		weights[b] += w
	}
	if err := weighted(&e, weights); err != nil {
		return Expected{}, target.get("split").errf("%v", err)
	}
	e.Sources = []Source{o.source()}
	return e, nil
}

// trafficRouteMatch is a TrafficRoute http match: method, path and
// headers, each {exact|prefix|regex}.
func trafficRouteMatch(req Request, m node) (bool, error) {
	if _, err := m.object(); err != nil {
		return false, err
	}
	for _, k := range m.keys() {
		c := m.get(k)
		var ok bool
		var err error
		switch k {
		case "method":
			ok, err = stringMatch(c, req.method(), false)
		case "path":
			ok, err = stringMatch(c, req.pathOnly(), false)
		case "headers":
			ok, err = headersMatch(c, req, false)
		default:
			return false, c.errf("unknown match %q: want method, path or headers", k)
		}
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// trafficRouteBucket is the bucket of a TrafficRoute destination: its
// version or zone tag, else, for a split by version, the one version of
// the ready pods of the Kubernetes Service its kuma.io/service names
// (<name>_<namespace>_svc_<port>) in the query's clusters. Flagger's Kuma
// router writes such destinations, <apex>-primary_… and <apex>-canary_…,
// with no other tag (docs/expect-from-mesh.md). A destination that takes
// no traffic (weight 0) and whose Service has no ready pod (Flagger scales
// the canary to 0 after a promotion) is no bucket: "" and no error.
func trafficRouteBucket(q Query, objs Objects, n node, tags map[string]string, takesTraffic bool) (string, error) {
	key := q.versionLabel()
	if q.By == ByCluster {
		key = kumaZone
	}
	svcTag, named := tags[kumaService]
	if _, ok := tags[key]; ok || !named || len(tags) != 1 {
		return kumaBucket(q, n, tags)
	}
	ns, name, ok := KumaService(svcTag)
	if !ok {
		return "", n.errf("kuma.io/service %q is not a Kubernetes Service's (NAME_NAMESPACE_svc_PORT), and the destination has no %s", svcTag, key)
	}
	if q.By == ByCluster {
		return "", n.errf("%v names service %s/%s in no one zone: Kuma spreads its share over the service's endpoints in every zone; split by version, or route to kuma.io/zone subsets", tags, ns, name)
	}
	var found bool
	var count int
	var vs []string
	for _, c := range q.Clusters {
		u := objs.find(c, "Service", ns, name)
		if u == nil {
			continue
		}
		found = true
		sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector")
		if len(sel) == 0 {
			return "", newObj(u, c).errf("spec.selector", "empty: the Service's endpoints are not pods mesh-verify can tell versions of")
		}
		cvs, n := podVersions(objs, []string{c}, ns, labels.SelectorFromSet(sel), key)
		count += n
		for _, v := range cvs {
			if !slices.Contains(vs, v) {
				vs = append(vs, v)
			}
		}
	}
	slices.Sort(vs)
	switch {
	case !takesTraffic && count == 0:
		n.o.use(n.path)
		return "", nil
	case !found:
		return "", n.errf("kuma.io/service %s: no Service %s/%s in clusters %s", svcTag, ns, name, strings.Join(q.Clusters, ", "))
	case count == 0:
		return "", n.errf("kuma.io/service %s: Service %s/%s selects no ready pod in clusters %s: its share would fail, not move elsewhere", svcTag, ns, name, strings.Join(q.Clusters, ", "))
	case slices.Contains(vs, ""):
		return "", n.errf("kuma.io/service %s: some ready pods of Service %s/%s have no label %s: their version cannot be told", svcTag, ns, name, key)
	case len(vs) > 1:
		return "", n.errf("kuma.io/service %s: Service %s/%s reaches pods of several versions %v: a split by version needs a destination per version", svcTag, ns, name, vs)
	}
	n.o.use(n.path)
	return vs[0], nil
}

// KumaService parses the kuma.io/service tag Kuma gives a Kubernetes
// Service's port, NAME_NAMESPACE_svc_PORT (names hold no underscore).
// The lab's data plane reads Flagger's TrafficRoutes with it too.
func KumaService(tag string) (ns, name string, ok bool) {
	parts := strings.Split(tag, "_")
	if len(parts) != 4 || parts[2] != "svc" || parts[0] == "" || parts[1] == "" {
		return "", "", false
	}
	if _, err := strconv.ParseUint(parts[3], 10, 16); err != nil {
		return "", "", false
	}
	return parts[1], parts[0], true
}

// trafficRouteDestinations lists the tags of every destination of a
// TrafficRoute: conf.split[], conf.destination and the same under each
// conf.http[].
func trafficRouteDestinations(tr *unstructured.Unstructured) []map[string]string {
	var out []map[string]string
	add := func(conf map[string]any) {
		if d, ok := conf["destination"].(map[string]any); ok {
			out = append(out, stringTags(d))
		}
		split, _ := conf["split"].([]any)
		for _, x := range split {
			if e, ok := x.(map[string]any); ok {
				if d, ok := e["destination"].(map[string]any); ok {
					out = append(out, stringTags(d))
				}
			}
		}
	}
	conf, _, _ := unstructured.NestedMap(tr.Object, "spec", "conf")
	add(conf)
	https, _ := conf["http"].([]any)
	for _, h := range https {
		if m, ok := h.(map[string]any); ok {
			add(m)
		}
	}
	return out
}

func stringTags(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}
