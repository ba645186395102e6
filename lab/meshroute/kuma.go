package meshroute

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mesh-verify/mesh-verify/lab/meshsim"
	"github.com/mesh-verify/mesh-verify/meshconfig"
)

// Kuma's tags the lab's backends are known by: a subset selects by
// version or by zone (the lab's zones are named after its clusters).
const (
	kumaService = "kuma.io/service"
	kumaZone    = "kuma.io/zone"
	kumaVersion = "version"
	// kumaDefaultWeight is a backendRef's weight when it sets none
	// (+kubebuilder:default=1).
	kumaDefaultWeight = 1
)

// kumaServiceTag is the kuma.io/service of a Kubernetes Service:
// <name>_<namespace>_svc_<port>.
func kumaServiceTag(e Entry) string {
	return fmt.Sprintf("%s_%s_svc_%d", e.To, e.Namespace, e.ServicePort)
}

// deriveKuma reads a MeshHTTPRoute whose to[] targets the entry's Service
// (it wins, as the targetRef policies do over the legacy ones), else a
// TrafficRoute whose destinations match its kuma.io/service. The objects
// are the entry cluster's: in the lab the first cluster plays the global
// control plane and its zone. Without either, Kuma balances over every
// endpoint of the service.
func deriveKuma(e Entry, objs Objects) (Route, error) {
	for _, mr := range objs.of(e.Cluster, "MeshHTTPRoute", "") {
		r, ok, err := kumaMeshHTTPRoute(e, mr)
		if err != nil || ok {
			return r, err
		}
	}
	for _, tr := range objs.of(e.Cluster, "TrafficRoute", "") {
		r, ok, err := kumaTrafficRoute(e, tr)
		if err != nil || ok {
			return r, err
		}
	}
	return Route{Policy: meshsim.Policy{Mode: meshsim.ModePerPod}}, nil
}

// kumaGroups collects weights keyed by version or zone, refusing a mix.
type kumaGroups struct {
	by      string
	weights map[string]float64
	// own is the entry's kuma.io/service; other, when set, names the
	// Service of the entry's namespace another kuma.io/service tag is
	// (a TrafficRoute may split between Services); services collects them.
	own      string
	other    func(tag string) (string, bool)
	services []string
}

func (g *kumaGroups) add(u *unstructured.Unstructured, cluster, path string, tags map[string]string, w float64) error {
	by, key, n := "", "", 0
	for k, v := range tags {
		switch k {
		case kumaVersion:
			by, key, n = meshsim.ByVersion, v, n+1
		case kumaZone:
			by, key, n = meshsim.ByCluster, v, n+1
		case kumaService:
		default:
			return fieldError(u, cluster, path+"."+k, "the lab's backends are told apart by %s or %s only", kumaVersion, kumaZone)
		}
	}
	if n == 0 && g.other != nil && tags[kumaService] != g.own {
		// Another Service of the namespace named by its kuma.io/service
		// alone, as Flagger's Kuma router splits <apex>-primary and
		// <apex>-canary: its pods are the group.
		name, ok := g.other(tags[kumaService])
		if !ok {
			return fieldError(u, cluster, path+"."+kumaService, "%q is neither %s nor another Service of the namespace (NAME_NAMESPACE_svc_PORT)", tags[kumaService], g.own)
		}
		by, key, n = meshsim.ByService, name, 1
		if !slices.Contains(g.services, name) {
			g.services = append(g.services, name)
		}
	}
	switch {
	case n == 0:
		return fieldError(u, cluster, path, "%v selects the whole service; the lab splits by %s or %s", tags, kumaVersion, kumaZone)
	case n > 1:
		return fieldError(u, cluster, path, "%v: select by one of %s, %s", tags, kumaVersion, kumaZone)
	}
	if g.by != "" && g.by != by {
		return fieldError(u, cluster, path, "mixes subsets by %s and by %s; the lab splits by one", g.by, by)
	}
	g.by = by
	if g.weights == nil {
		g.weights = map[string]float64{}
	}
	g.weights[key] += w
	return nil
}

func (g *kumaGroups) policy(u *unstructured.Unstructured, cluster, path string) (meshsim.Policy, error) {
	sum := 0.0
	for _, w := range g.weights {
		sum += w
	}
	if sum == 0 {
		return meshsim.Policy{}, fieldError(u, cluster, path, "every weight is 0: no backend takes traffic")
	}
	return meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: g.by, Weights: g.weights}, nil
}

func kumaWeight(u *unstructured.Unstructured, cluster, path string, v any, def float64) (float64, error) {
	w, set, err := numberAt(v, u, cluster, path)
	if err != nil {
		return 0, err
	}
	if !set {
		return def, nil
	}
	if w < 0 || w != math.Trunc(w) || w > math.MaxUint32 {
		return 0, fieldError(u, cluster, path, "%v: want a whole number >= 0", w)
	}
	return w, nil
}

func kumaMeshHTTPRoute(e Entry, mr *unstructured.Unstructured) (Route, bool, error) {
	spec, err := mapAt(mr.Object["spec"], mr, e.Cluster, "spec")
	if err != nil {
		return Route{}, false, err
	}
	tos, err := listAt(spec["to"], mr, e.Cluster, "spec.to")
	if err != nil {
		return Route{}, false, err
	}
	for i, x := range tos {
		p := fmt.Sprintf("spec.to[%d]", i)
		to, err := mapAt(x, mr, e.Cluster, p)
		if err != nil {
			return Route{}, false, err
		}
		ref, err := mapAt(to["targetRef"], mr, e.Cluster, p+".targetRef")
		if err != nil {
			return Route{}, false, err
		}
		name, _ := ref["name"].(string)
		if name != e.To && name != kumaServiceTag(e) {
			continue
		}
		r := Route{From: []string{where(mr, e.Cluster)}}
		r.Ignored = append(r.Ignored, prefixed(where(mr, e.Cluster), ignoredFields(spec, "spec", "targetRef", "to"))...)
		r.Ignored = append(r.Ignored, prefixed(where(mr, e.Cluster), ignoredFields(to, p, "targetRef", "rules", "hostnames"))...)
		rules, err := listAt(to["rules"], mr, e.Cluster, p+".rules")
		if err != nil {
			return Route{}, false, err
		}
		if len(rules) == 0 {
			r.Policy = meshsim.Policy{Mode: meshsim.ModePerPod}
			return r, true, nil
		}
		if len(rules) > 1 {
			r.Ignored = append(r.Ignored, fmt.Sprintf("%s: %s.rules[1:] (the lab routes by the first rule)", where(mr, e.Cluster), p))
		}
		rp := p + ".rules[0]"
		rule, err := mapAt(rules[0], mr, e.Cluster, rp)
		if err != nil {
			return Route{}, false, err
		}
		if ms, _ := rule["matches"].([]any); len(ms) > 0 {
			r.Ignored = append(r.Ignored, fmt.Sprintf("%s: %s.matches (every request is taken to match)", where(mr, e.Cluster), rp))
		}
		def, err := mapAt(rule["default"], mr, e.Cluster, rp+".default")
		if err != nil {
			return Route{}, false, err
		}
		r.Ignored = append(r.Ignored, prefixed(where(mr, e.Cluster), ignoredFields(def, rp+".default", "backendRefs"))...)
		refs, err := listAt(def["backendRefs"], mr, e.Cluster, rp+".default.backendRefs")
		if err != nil {
			return Route{}, false, err
		}
		if len(refs) == 0 {
			r.Policy = meshsim.Policy{Mode: meshsim.ModePerPod} // Kuma's DefaultBackendRef: the target itself
			return r, true, nil
		}
		var g kumaGroups
		for j, x := range refs {
			bp := fmt.Sprintf("%s.default.backendRefs[%d]", rp, j)
			b, err := mapAt(x, mr, e.Cluster, bp)
			if err != nil {
				return Route{}, false, err
			}
			r.Ignored = append(r.Ignored, prefixed(where(mr, e.Cluster), ignoredFields(b, bp, "kind", "name", "tags", "labels", "weight", "port", "namespace"))...)
			kind, _ := b["kind"].(string)
			var tags map[string]string
			switch kind {
			case "MeshServiceSubset":
				if tags, err = stringMapAt(b["tags"], mr, e.Cluster, bp+".tags"); err != nil {
					return Route{}, false, err
				}
			case "MeshService":
				if tags, err = stringMapAt(b["labels"], mr, e.Cluster, bp+".labels"); err != nil {
					return Route{}, false, err
				}
				delete(tags, "kuma.io/display-name")
			default:
				return Route{}, false, fieldError(mr, e.Cluster, bp+".kind", "%q: the lab routes to MeshService or MeshServiceSubset", kind)
			}
			if n, _ := b["name"].(string); n != "" && n != e.To && n != kumaServiceTag(e) {
				return Route{}, false, fieldError(mr, e.Cluster, bp+".name", "%q is not service %s, the one entry %s routes", n, e.To, e.Name)
			}
			w, err := kumaWeight(mr, e.Cluster, bp+".weight", b["weight"], kumaDefaultWeight)
			if err != nil {
				return Route{}, false, err
			}
			if err := g.add(mr, e.Cluster, bp, tags, w); err != nil {
				return Route{}, false, err
			}
		}
		if r.Policy, err = g.policy(mr, e.Cluster, rp+".default.backendRefs"); err != nil {
			return Route{}, false, err
		}
		return r, true, nil
	}
	return Route{}, false, nil
}

func kumaTrafficRoute(e Entry, tr *unstructured.Unstructured) (Route, bool, error) {
	spec, err := mapAt(tr.Object["spec"], tr, e.Cluster, "spec")
	if err != nil {
		return Route{}, false, err
	}
	dsts, err := listAt(spec["destinations"], tr, e.Cluster, "spec.destinations")
	if err != nil {
		return Route{}, false, err
	}
	ours := false
	for i, x := range dsts {
		d, err := mapAt(x, tr, e.Cluster, fmt.Sprintf("spec.destinations[%d]", i))
		if err != nil {
			return Route{}, false, err
		}
		m, err := stringMapAt(d["match"], tr, e.Cluster, fmt.Sprintf("spec.destinations[%d].match", i))
		if err != nil {
			return Route{}, false, err
		}
		if s := m[kumaService]; s == kumaServiceTag(e) || s == "*" {
			ours = true
		}
	}
	if !ours {
		return Route{}, false, nil
	}
	r := Route{From: []string{where(tr, e.Cluster)}}
	r.Ignored = append(r.Ignored, prefixed(where(tr, e.Cluster), ignoredFields(spec, "spec", "sources", "destinations", "conf"))...)
	conf, err := mapAt(spec["conf"], tr, e.Cluster, "spec.conf")
	if err != nil {
		return Route{}, false, err
	}
	r.Ignored = append(r.Ignored, prefixed(where(tr, e.Cluster), ignoredFields(conf, "spec.conf", "split", "destination"))...)
	split, err := listAt(conf["split"], tr, e.Cluster, "spec.conf.split")
	if err != nil {
		return Route{}, false, err
	}
	if len(split) == 0 {
		if conf["destination"] == nil {
			return Route{}, false, fieldError(tr, e.Cluster, "spec.conf", "neither split nor destination")
		}
		tags, err := stringMapAt(conf["destination"], tr, e.Cluster, "spec.conf.destination")
		if err != nil {
			return Route{}, false, err
		}
		if len(tags) == 1 && tags[kumaService] != "" {
			r.Policy = meshsim.Policy{Mode: meshsim.ModePerPod}
			return r, true, nil
		}
		split = []any{map[string]any{"weight": int64(1), "destination": conf["destination"]}}
	}
	g := kumaGroups{own: kumaServiceTag(e), other: func(tag string) (string, bool) { return namespaceService(e, tag) }}
	for i, x := range split {
		sp := fmt.Sprintf("spec.conf.split[%d]", i)
		s, err := mapAt(x, tr, e.Cluster, sp)
		if err != nil {
			return Route{}, false, err
		}
		if s["weight"] == nil {
			// Kuma's TrafficRoute validation: every split entry needs a weight.
			return Route{}, false, fieldError(tr, e.Cluster, sp+".weight", "missing: every split entry needs a weight")
		}
		w, err := kumaWeight(tr, e.Cluster, sp+".weight", s["weight"], 0)
		if err != nil {
			return Route{}, false, err
		}
		tags, err := stringMapAt(s["destination"], tr, e.Cluster, sp+".destination")
		if err != nil {
			return Route{}, false, err
		}
		if svc := tags[kumaService]; svc != kumaServiceTag(e) && !(len(tags) == 1 && isNamespaceService(e, svc)) {
			return Route{}, false, fieldError(tr, e.Cluster, sp+".destination."+kumaService, "%q is not %s, the service entry %s routes, nor another Service of namespace %s named alone", svc, kumaServiceTag(e), e.Name, e.Namespace)
		}
		if err := g.add(tr, e.Cluster, sp+".destination", tags, w); err != nil {
			return Route{}, false, err
		}
	}
	if r.Policy, err = g.policy(tr, e.Cluster, "spec.conf.split"); err != nil {
		return Route{}, false, err
	}
	r.Services = g.services
	return r, true, nil
}

// KumaInboundLogging says whether Kuma's sidecars log the requests they
// receive, by the MeshAccessLogs and legacy TrafficLogs of every cluster
// (the lab's zones share the global control plane's policies): a
// MeshAccessLog with `from` or `rules` logs the inbound side, one with
// only `to` the outbound side alone, and a TrafficLog always the outbound
// side alone (Kuma places it on the source proxy's outbound listener,
// kuma#276). The sidecars of a topology without any of them log inbound,
// as the lab always did (a real Kuma logs nothing without one); the names
// of the policies say why.
func KumaInboundLogging(objs Objects) (inbound bool, why string) {
	var outboundOnly []string
	found := false
	for c, list := range objs {
		for _, o := range list {
			switch o.GetKind() {
			case "TrafficLog":
				found = true
				outboundOnly = append(outboundOnly, where(o, c))
				continue
			case "MeshAccessLog":
				found = true
			default:
				continue
			}
			spec, _ := o.Object["spec"].(map[string]any)
			from, _ := spec["from"].([]any)
			rules, _ := spec["rules"].([]any)
			if len(from) > 0 || len(rules) > 0 {
				return true, where(o, c) + " logs the inbound side (spec.from/spec.rules)"
			}
			outboundOnly = append(outboundOnly, where(o, c))
		}
	}
	if !found {
		return true, "no MeshAccessLog or TrafficLog: the lab's default, inbound lines"
	}
	slices.Sort(outboundOnly)
	return false, strings.Join(outboundOnly, ", ") + " log the outbound side only (a MeshAccessLog's spec.to, a TrafficLog): outbound lines only"
}

// namespaceService is the Service a kuma.io/service tag names when it is
// one of the entry's namespace (meshconfig.KumaService parses the tag).
func namespaceService(e Entry, tag string) (string, bool) {
	ns, name, ok := meshconfig.KumaService(tag)
	if !ok || ns != e.Namespace {
		return "", false
	}
	return name, true
}

func isNamespaceService(e Entry, tag string) bool {
	_, ok := namespaceService(e, tag)
	return ok
}
