package meshroute

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mesh-verify/mesh-verify/lab/meshsim"
)

// istioVersionLabel is the pod label the lab's subsets may select by:
// the lab's backends are known by cluster and version label only.
const istioVersionLabel = "version"

// istioDefaultMirrorPercent is Istio's mirror share when the rule sets no
// percentage (pilot route.go MirrorPercent).
const istioDefaultMirrorPercent = 100

// deriveIstio reads the VirtualService for the entry's Service in the
// entry's cluster and namespace (the sidecar's view) and the
// DestinationRule whose subsets it names. Without a VirtualService the
// sidecar balances over every endpoint of the Service (per request). A
// gateway entry routes by the VirtualServices bound to its Gateways
// instead (deriveIstioGateway).
func deriveIstio(e Entry, objs Objects) (Route, error) {
	if e.Gateway {
		return deriveIstioGateway(e, objs)
	}
	var vss []*unstructured.Unstructured
	for _, vs := range objs.of(e.Cluster, "VirtualService", e.Namespace) {
		spec, err := mapAt(vs.Object["spec"], vs, e.Cluster, "spec")
		if err != nil {
			return Route{}, err
		}
		hosts, err := listAt(spec["hosts"], vs, e.Cluster, "spec.hosts")
		if err != nil {
			return Route{}, err
		}
		if !appliesToSidecars(spec) {
			// istiod binds such a VirtualService to its gateways only; the
			// sidecars never see it.
			continue
		}
		for _, h := range hosts {
			if s, _ := h.(string); hostMatches(s, e.To, e.Namespace) {
				vss = append(vss, vs)
				break
			}
		}
	}
	r := Route{Policy: meshsim.Policy{Mode: meshsim.ModePerPod, Retry: istioDefaultRetry()}}
	if len(vss) == 0 {
		return r, nil
	}
	if len(vss) > 1 {
		// istiod merges several VirtualServices of one host for gateways
		// only; for sidecars the result depends on their order, which the
		// lab will not guess.
		return Route{}, fmt.Errorf("several VirtualServices route host %s for sidecars: %s; the lab routes by exactly one", e.To, describeAll(vss))
	}
	return istioVSRoute(e, objs, vss[0], nil)
}

// describeAll names objects for messages, comma-separated.
func describeAll(us []*unstructured.Unstructured) string {
	var names []string
	for _, u := range us {
		names = append(names, describe(u))
	}
	return strings.Join(names, ", ")
}

// istioVSRoute is the route of VirtualService vs for entry e; hosts, for a
// gateway, are the virtual host's domains its requests must name.
//
// Rules are matched in order and the first match wins (Envoy's routes of
// one virtual host). The lab plays one rule, the first without
// conditions or with a uri one (earlier rules with other conditions only
// are taken to miss and reported): its uri conditions are played per
// request (a request they miss finds no route: 404, NR); a later rule is
// refused when the played one has conditions (it would route what they
// miss), and reported as never matched when it has none.
func istioVSRoute(e Entry, objs Objects, vs *unstructured.Unstructured, hosts []string) (Route, error) {
	r := Route{Policy: meshsim.Policy{Mode: meshsim.ModePerPod, Retry: istioDefaultRetry()}}
	r.From = append(r.From, where(vs, e.Cluster))
	spec, _ := vs.Object["spec"].(map[string]any)
	r.Ignored = append(r.Ignored, prefixed(where(vs, e.Cluster), ignoredFields(spec, "spec", "hosts", "http", "gateways", "exportTo"))...)
	rules, err := listAt(spec["http"], vs, e.Cluster, "spec.http")
	if err != nil {
		return Route{}, err
	}
	if len(rules) == 0 {
		return Route{}, fieldError(vs, e.Cluster, "spec.http", "no HTTP route: the lab's entries carry HTTP")
	}
	// Rules whose every condition is one the lab does not play (headers,
	// queryParams, …) are taken to miss: the lab's requests carry no such
	// header. The first rule without conditions, or with a uri one, is
	// played.
	ri := -1
	var rule map[string]any
	var match []any
	for i, x := range rules {
		p := fmt.Sprintf("spec.http[%d]", i)
		if rule, err = mapAt(x, vs, e.Cluster, p); err != nil {
			return Route{}, err
		}
		if match, err = listAt(rule["match"], vs, e.Cluster, p+".match"); err != nil {
			return Route{}, err
		}
		if !unplayedConditionsOnly(match) {
			ri = i
			break
		}
		r.Ignored = append(r.Ignored, fmt.Sprintf("%s: %s.match (conditions the lab does not play: its requests are taken to miss them)", where(vs, e.Cluster), p))
	}
	if ri < 0 {
		return Route{}, fieldError(vs, e.Cluster, "spec.http", "every rule has match conditions the lab does not play (only uri is played); the lab needs a rule without conditions or with a uri one")
	}
	path := fmt.Sprintf("spec.http[%d]", ri)
	if ri+1 < len(rules) {
		if len(match) > 0 {
			return Route{}, fieldError(vs, e.Cluster, fmt.Sprintf("spec.http[%d]", ri+1), "the lab plays one HTTP rule, %s; this one would route the requests %s.match misses (merge the rules, or give the first no match conditions)", path, path)
		}
		r.Ignored = append(r.Ignored, fmt.Sprintf("%s: spec.http[%d:] (never matched: %s has no match conditions and takes every request)", where(vs, e.Cluster), ri+1, path))
	}
	uris, ignored, err := istioURIMatches(e, vs, match, path+".match")
	if err != nil {
		return Route{}, err
	}
	r.Ignored = append(r.Ignored, prefixed(where(vs, e.Cluster), ignored)...)
	r.Ignored = append(r.Ignored, prefixed(where(vs, e.Cluster), ignoredFields(rule, path, "route", "mirror", "mirrorPercentage", "mirrorPercent", "mirrors", "name", "match", "retries"))...)
	subsets, drs, err := istioSubsets(e, objs)
	if err != nil {
		return Route{}, err
	}
	dests, err := listAt(rule["route"], vs, e.Cluster, path+".route")
	if err != nil {
		return Route{}, err
	}
	if len(dests) == 0 {
		return Route{}, fieldError(vs, e.Cluster, path+".route", "no destination")
	}
	weights := map[string]float64{}
	// byService are the weights of destinations that name another Service
	// of the namespace without a subset: Argo Rollouts' host-level split
	// between its stableService and canaryService.
	byService := map[string]float64{}
	others := 0
	usedDR := false
	unweighted := 0
	allSubsets := true
	for j, x := range dests {
		dp := fmt.Sprintf("%s.route[%d]", path, j)
		d, err := mapAt(x, vs, e.Cluster, dp)
		if err != nil {
			return Route{}, err
		}
		r.Ignored = append(r.Ignored, prefixed(where(vs, e.Cluster), ignoredFields(d, dp, "destination", "weight"))...)
		w, set, err := numberAt(d["weight"], vs, e.Cluster, dp+".weight")
		if err != nil {
			return Route{}, err
		}
		if w < 0 || w != math.Trunc(w) || w > math.MaxInt32 {
			return Route{}, fieldError(vs, e.Cluster, dp+".weight", "%v: want a whole number >= 0 (istiod: weight must not be negative)", w)
		}
		if !set || w == 0 {
			unweighted++
		}
		if len(dests) == 1 {
			w = 1 // a single destination takes everything, whatever its weight (route.go)
		}
		if svc, ok := otherService(e, d["destination"]); ok {
			byService[svc] += w
			others++
			allSubsets = false
			continue
		}
		version, hasSubset, err := istioDestination(e, vs, d["destination"], dp+".destination", subsets)
		if err != nil {
			return Route{}, err
		}
		if hasSubset {
			if r.Subsets == nil {
				r.Subsets = map[string]string{}
			}
			r.Subsets[version], _ = stringAt(d["destination"].(map[string]any)["subset"], vs, e.Cluster, dp+".destination.subset")
		}
		usedDR = usedDR || hasSubset
		allSubsets = allSubsets && hasSubset
		if hasSubset {
			weights[version] += w
		}
	}
	if len(dests) > 1 && unweighted == len(dests) {
		return Route{}, fieldError(vs, e.Cluster, path+".route", "%d destinations and none has a weight: total destination weight = 0 (istiod refuses it)", len(dests))
	}
	switch {
	case others == len(dests):
		// Every destination is another Service: their pods are the
		// backends, each counted in its Service (meshsim.ByService).
		r.Policy = meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByService, Weights: byService}
		r.Services = sortedKeys(byService)
	case allSubsets:
		r.Policy = meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByVersion, Weights: weights}
	case len(dests) == 1 && others == 0:
		r.Policy = meshsim.Policy{Mode: meshsim.ModePerPod}
	case others > 0:
		return Route{}, fieldError(vs, e.Cluster, path+".route", "weights between other Services of namespace %s and %s itself or its subsets are not modelled: route every destination to another Service (a host-level split) or to a subset of %s", e.Namespace, e.To, e.To)
	default:
		return Route{}, fieldError(vs, e.Cluster, path+".route", "weights between destinations without a subset and with one are not modelled: give every destination a subset")
	}
	if len(hosts) > 0 || len(uris) > 0 {
		r.Policy.Match = &meshsim.Match{Hosts: hosts, URIs: uris}
	}
	mirror, mirrorSubset, err := istioMirror(e, vs, rule, path, subsets)
	if err != nil {
		return Route{}, err
	}
	usedDR = usedDR || mirrorSubset
	r.Policy.Mirror = mirror
	retry, err := istioRetry(e, vs, rule["retries"], path+".retries")
	if err != nil {
		return Route{}, err
	}
	r.Policy.Retry = retry
	if rs, ok := rule["retries"].(map[string]any); ok {
		r.Ignored = append(r.Ignored, prefixed(where(vs, e.Cluster), ignoredFields(rs, path+".retries", "attempts", "retryOn"))...)
	}
	if usedDR {
		for _, dr := range drs {
			r.From = append(r.From, where(dr, e.Cluster))
			spec, _ := dr.Object["spec"].(map[string]any)
			r.Ignored = append(r.Ignored, prefixed(where(dr, e.Cluster), ignoredFields(spec, "spec", "host", "subsets", "exportTo"))...)
		}
	}
	return r, nil
}

// unplayedConditionsOnly reports whether every HTTPMatchRequest of match
// sets conditions and none of them is a uri: a rule the lab cannot tell
// its requests apart by.
func unplayedConditionsOnly(match []any) bool {
	if len(match) == 0 {
		return false
	}
	for _, x := range match {
		m, _ := x.(map[string]any)
		if m["uri"] != nil || len(ignoredFields(m, "", "name", "ignoreUriCase")) == 0 {
			return false
		}
	}
	return true
}

// istioURIMatches reads an HTTPRoute's match list: the uri conditions of
// its HTTPMatchRequests (ORed). A request matching an element with no uri
// matches whatever its path, so then every path is taken (nil). Other
// conditions (headers, queryParams, method, authority, port, …) are not
// played and are returned by path.
func istioURIMatches(e Entry, vs *unstructured.Unstructured, match []any, path string) (uris []meshsim.URIMatch, ignored []string, err error) {
	anyPath := len(match) == 0
	for k, x := range match {
		mp := fmt.Sprintf("%s[%d]", path, k)
		m, err := mapAt(x, vs, e.Cluster, mp)
		if err != nil {
			return nil, nil, err
		}
		ignored = append(ignored, ignoredFields(m, mp, "uri", "ignoreUriCase", "name")...)
		u, err := mapAt(m["uri"], vs, e.Cluster, mp+".uri")
		if err != nil {
			return nil, nil, err
		}
		if u == nil {
			anyPath = true
			continue
		}
		ic, _ := m["ignoreUriCase"].(bool)
		if v, ok := m["ignoreUriCase"]; ok && v != nil {
			if _, isBool := v.(bool); !isBool {
				return nil, nil, fieldError(vs, e.Cluster, mp+".ignoreUriCase", "want a boolean, have %T", v)
			}
		}
		if len(u) != 1 {
			return nil, nil, fieldError(vs, e.Cluster, mp+".uri", "want exactly one of exact, prefix, regex; have %v", sortedKeys(u))
		}
		for kind, v := range u {
			val, err := stringAt(v, vs, e.Cluster, mp+".uri."+kind)
			if err != nil {
				return nil, nil, err
			}
			// Istio's StringMatch kinds are the simulator's URI kinds.
			if !slices.Contains([]string{meshsim.URIExact, meshsim.URIPrefix, meshsim.URIRegex}, kind) {
				return nil, nil, fieldError(vs, e.Cluster, mp+".uri."+kind, "unknown string match; want exact, prefix or regex")
			}
			um := meshsim.URIMatch{Kind: kind, Value: val, IgnoreCase: ic}
			if kind == meshsim.URIRegex {
				if ic {
					return nil, nil, fieldError(vs, e.Cluster, mp+".ignoreUriCase", "set with a regex uri (istiod refuses it)")
				}
				if len(val) > meshsim.MaxURIRegex {
					return nil, nil, fieldError(vs, e.Cluster, mp+".uri.regex", "%d bytes: the lab takes at most %d", len(val), meshsim.MaxURIRegex)
				}
				if _, err := regexp.Compile(val); err != nil {
					return nil, nil, fieldError(vs, e.Cluster, mp+".uri.regex", "%q: %v (Envoy's regexes are RE2, as Go's)", val, err)
				}
			}
			uris = append(uris, um)
		}
	}
	if len(uris) > meshsim.MaxURIMatches {
		return nil, nil, fieldError(vs, e.Cluster, path, "%d uri conditions: the lab plays at most %d", len(uris), meshsim.MaxURIMatches)
	}
	if anyPath {
		return nil, ignored, nil
	}
	return uris, ignored, nil
}

// istioSubsets maps subset name to the version its labels select, from
// the DestinationRules of the entry's Service.
func istioSubsets(e Entry, objs Objects) (map[string]string, []*unstructured.Unstructured, error) {
	out := map[string]string{}
	var drs []*unstructured.Unstructured
	for _, dr := range objs.of(e.Cluster, "DestinationRule", e.Namespace) {
		spec, err := mapAt(dr.Object["spec"], dr, e.Cluster, "spec")
		if err != nil {
			return nil, nil, err
		}
		host, err := stringAt(spec["host"], dr, e.Cluster, "spec.host")
		if err != nil {
			return nil, nil, err
		}
		if !hostMatches(host, e.To, e.Namespace) {
			continue
		}
		drs = append(drs, dr)
		subsets, err := listAt(spec["subsets"], dr, e.Cluster, "spec.subsets")
		if err != nil {
			return nil, nil, err
		}
		for i, x := range subsets {
			p := fmt.Sprintf("spec.subsets[%d]", i)
			s, err := mapAt(x, dr, e.Cluster, p)
			if err != nil {
				return nil, nil, err
			}
			name, err := stringAt(s["name"], dr, e.Cluster, p+".name")
			if err != nil {
				return nil, nil, err
			}
			labels, err := stringMapAt(s["labels"], dr, e.Cluster, p+".labels")
			if err != nil {
				return nil, nil, err
			}
			v, ok := labels[istioVersionLabel]
			if !ok || len(labels) != 1 {
				return nil, nil, fieldError(dr, e.Cluster, p+".labels", "%v: the lab's subsets select by the label %q alone", labels, istioVersionLabel)
			}
			if _, dup := out[name]; dup {
				return nil, nil, fieldError(dr, e.Cluster, p+".name", "subset %q is defined twice for host %s", name, e.To)
			}
			out[name] = v
		}
	}
	return out, drs, nil
}

// otherService is the Service a destination names when it is another
// Service of the entry's namespace, without a subset: Argo Rollouts'
// host-level traffic splitting routes the VirtualService of the Service
// callers use to its stableService and canaryService, whose selectors it
// pins to each ReplicaSet's rollouts-pod-template-hash.
func otherService(e Entry, v any) (string, bool) {
	d, _ := v.(map[string]any)
	host, _ := d["host"].(string)
	if d == nil || host == "" || d["subset"] != nil || hostMatches(host, e.To, e.Namespace) {
		return "", false
	}
	for _, suffix := range []string{"", "." + e.Namespace, "." + e.Namespace + ".svc", "." + e.Namespace + ".svc.cluster.local"} {
		if name, ok := strings.CutSuffix(host, suffix); ok && name != "" && !strings.Contains(name, ".") {
			return name, true
		}
	}
	return "", false
}

// istioDestination checks a destination and returns its subset's version.
func istioDestination(e Entry, vs *unstructured.Unstructured, v any, path string, subsets map[string]string) (version string, hasSubset bool, err error) {
	d, err := mapAt(v, vs, e.Cluster, path)
	if err != nil {
		return "", false, err
	}
	if d == nil {
		return "", false, fieldError(vs, e.Cluster, path, "missing")
	}
	host, err := stringAt(d["host"], vs, e.Cluster, path+".host")
	if err != nil {
		return "", false, err
	}
	if !hostMatches(host, e.To, e.Namespace) {
		return "", false, fieldError(vs, e.Cluster, path+".host", "%q is not Service %s/%s, the one entry %s routes", host, e.Namespace, e.To, e.Name)
	}
	subset, err := stringAt(d["subset"], vs, e.Cluster, path+".subset")
	if err != nil || subset == "" {
		return "", false, err
	}
	version, ok := subsets[subset]
	if !ok {
		return "", false, fieldError(vs, e.Cluster, path+".subset", "subset %q is not defined by any DestinationRule for host %s in namespace %s (defined: %v)", subset, e.To, e.Namespace, sortedKeys(subsets))
	}
	return version, true, nil
}

// istioMirror reads mirror, mirrorPercentage, mirrorPercent and mirrors[]
// with Istio's defaults: a mirror without a percentage copies 100%, a
// percentage of 0 copies nothing, mirrorPercentage wins over mirrorPercent.
func istioMirror(e Entry, vs *unstructured.Unstructured, rule map[string]any, path string, subsets map[string]string) (*meshsim.Mirror, bool, error) {
	dest := rule["mirror"]
	dpath := path + ".mirror"
	var pct any
	ppath := ""
	if ms, _ := rule["mirrors"].([]any); len(ms) > 0 {
		if dest != nil {
			return nil, false, fieldError(vs, e.Cluster, path+".mirrors", "set together with mirror; istiod accepts one of them")
		}
		if len(ms) > 1 {
			return nil, false, fieldError(vs, e.Cluster, path+".mirrors", "%d mirrors: the lab plays one", len(ms))
		}
		m, err := mapAt(ms[0], vs, e.Cluster, path+".mirrors[0]")
		if err != nil {
			return nil, false, err
		}
		dest, dpath = m["destination"], path+".mirrors[0].destination"
		if p, err := mapAt(m["percentage"], vs, e.Cluster, path+".mirrors[0].percentage"); err != nil {
			return nil, false, err
		} else if p != nil {
			pct, ppath = p["value"], path+".mirrors[0].percentage.value"
		}
	} else if dest != nil {
		if p, err := mapAt(rule["mirrorPercentage"], vs, e.Cluster, path+".mirrorPercentage"); err != nil {
			return nil, false, err
		} else if p != nil {
			pct, ppath = p["value"], path+".mirrorPercentage.value"
		} else if rule["mirrorPercent"] != nil {
			pct, ppath = rule["mirrorPercent"], path+".mirrorPercent"
		}
	}
	if dest == nil {
		return nil, false, nil
	}
	version, hasSubset, err := istioDestination(e, vs, dest, dpath, subsets)
	if err != nil {
		return nil, false, err
	}
	if !hasSubset {
		return nil, false, fieldError(vs, e.Cluster, dpath+".subset", "a mirror without a subset would copy to the primary's own pods; the lab mirrors to a subset")
	}
	percent := float64(istioDefaultMirrorPercent)
	if pct != nil {
		p, _, err := numberAt(pct, vs, e.Cluster, ppath)
		if err != nil {
			return nil, false, err
		}
		if !(p >= 0 && p <= 100) {
			return nil, false, fieldError(vs, e.Cluster, ppath, "%v: want 0..100", p)
		}
		percent = p
	}
	if percent == 0 {
		return nil, true, nil // Istio: 0% mirrors nothing
	}
	return &meshsim.Mirror{Version: version, Percent: percent, KeepHost: e.IstioNoShadowSuffix}, true, nil
}

func prefixed(prefix string, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = prefix + ": " + p
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// istioDefaultRetryOn is what istiod gives a route without retries
// (pilot/pkg/networking/core/route/retry DefaultPolicy): two retries on
// connection failures and, as its retriable status codes, 503.
const istioDefaultRetryOn = "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"

// istioDefaultAttempts is the default policy's number of retries.
const istioDefaultAttempts = 2

func istioDefaultRetry() *meshsim.Retry {
	r, _ := istioRetryOn(istioDefaultRetryOn)
	r.Attempts = istioDefaultAttempts
	return r
}

// istioRetry reads an HTTPRoute's retries: attempts (0 turns retries off)
// and retryOn, Envoy's conditions, the default's when unset. Only what the
// lab's data plane can tell is played: status classes and codes, and
// connection failures; gRPC conditions never arise over HTTP/1.1.
func istioRetry(e Entry, vs *unstructured.Unstructured, x any, path string) (*meshsim.Retry, error) {
	if x == nil {
		return istioDefaultRetry(), nil
	}
	m, err := mapAt(x, vs, e.Cluster, path)
	if err != nil {
		return nil, err
	}
	n, _, err := numberAt(m["attempts"], vs, e.Cluster, path+".attempts")
	if err != nil {
		return nil, err
	}
	if n < 0 || n != math.Trunc(n) || n > meshsim.MaxRetries {
		return nil, fieldError(vs, e.Cluster, path+".attempts", "%v: want a whole number 0..%d (the lab's limit)", n, meshsim.MaxRetries)
	}
	on := istioDefaultRetryOn
	if v, ok := m["retryOn"]; ok {
		if on, err = stringAt(v, vs, e.Cluster, path+".retryOn"); err != nil {
			return nil, err
		}
	}
	r, err := istioRetryOn(on)
	if err != nil {
		return nil, fieldError(vs, e.Cluster, path+".retryOn", "%v", err)
	}
	r.Attempts = int(n)
	return r, nil
}

// istioRetryOn reads Envoy's x-envoy-retry-on conditions as Istio takes
// them (a number is a retriable status code).
func istioRetryOn(on string) (*meshsim.Retry, error) {
	r := &meshsim.Retry{}
	add := func(codes ...int) {
		for _, c := range codes {
			if !slices.Contains(r.Codes, c) {
				r.Codes = append(r.Codes, c)
			}
		}
	}
	for _, tok := range strings.Split(on, ",") {
		switch tok = strings.TrimSpace(tok); tok {
		case "":
		case "5xx":
			for c := 500; c <= 599; c++ {
				add(c)
			}
		case "gateway-error":
			add(502, 503, 504)
		case "retriable-status-codes":
			add(503) // istiod's retriable status codes
		case "connect-failure", "reset", "refused-stream", "reset-before-request":
			r.ConnectFailure = true
		case "retriable-4xx":
			add(409)
		case "unavailable", "cancelled", "deadline-exceeded", "resource-exhausted", "internal",
			"retriable-headers", "envoy-ratelimited", "http3-post-connect-failure":
			// gRPC statuses and header conditions: never met by the lab's apps.
		default:
			c, err := strconv.Atoi(tok)
			if err != nil || c < 100 || c > 599 {
				return nil, fmt.Errorf("unknown retry condition %q (Envoy's x-envoy-retry-on or an HTTP status)", tok)
			}
			add(c)
		}
	}
	slices.Sort(r.Codes)
	return r, nil
}

// appliesToSidecars reports whether istiod applies a VirtualService's
// routes to sidecars: spec.gateways empty (the default, "mesh") or naming
// "mesh".
func appliesToSidecars(spec map[string]any) bool {
	gws, _ := spec["gateways"].([]any)
	return len(gws) == 0 || slices.Contains(gws, any("mesh"))
}
