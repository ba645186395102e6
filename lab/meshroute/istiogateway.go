package meshroute

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mesh-verify/mesh-verify/lab/meshsim"
)

// An Istio ingress gateway routes only by the VirtualServices bound to it
// (istio/api networking/v1alpha3 virtual_service.proto, VirtualService
// gateways; gateway.proto, Gateway selector and Server hosts; pilot
// pkg/networking/core/gateway.go, the gateway's virtual hosts):
//
//   - a Gateway object applies to the gateway proxies whose labels include
//     its spec.selector, searched in every namespace (istiod's default,
//     PILOT_SCOPE_GATEWAY_TO_NAMESPACE off); an empty selector selects
//     every gateway;
//   - a VirtualService is bound to the Gateways its spec.gateways names:
//     "<namespace>/<name>", a bare name being in the VirtualService's own
//     namespace; "mesh" is the sidecars, not a gateway; an empty list is
//     "mesh" alone;
//   - its spec.hosts must overlap a server's hosts ("[namespace/]dnsName",
//     namespace "*" any — the default — or "." the Gateway's own, dnsName
//     "*" or "*.suffix"), and the virtual host answers for the more
//     specific of the two;
//   - with no bound VirtualService the gateway has no route: Envoy
//     answers 404 with response flag NR (route_not_found).
//
// The samples' helloworld-gateway.yaml is the model: Gateway
// helloworld-gateway (selector istio: ingressgateway, port 80 HTTP, hosts
// "*") and VirtualService helloworld (hosts "*", gateways
// [helloworld-gateway], uri exact /hello to helloworld:5000).

// istioGatewayProtocols are the server protocols whose routes are HTTP
// routes (the lab's gateways speak plain HTTP).
var istioGatewayProtocols = []string{"HTTP", "HTTP2", "GRPC"}

// istioServerHost is one entry of a Gateway server's hosts.
type istioServerHost struct {
	ns, dns string // ns: "*", "." or a namespace
}

// istioGateway is a Gateway that selects the entry's pods.
type istioGateway struct {
	u     *unstructured.Unstructured
	hosts []istioServerHost // of its HTTP servers
}

// deriveIstioGateway is the route of a gateway entry: by the one
// VirtualService bound to a Gateway that selects the entry's pods, or none
// (Policy.NoRoute: every request 404) when no VirtualService is bound.
func deriveIstioGateway(e Entry, objs Objects) (Route, error) {
	var ignored []string
	exists := map[string]bool{}
	selecting := map[string]istioGateway{}
	for _, g := range objs.of(e.Cluster, "Gateway", "") {
		key := g.GetNamespace() + "/" + g.GetName()
		exists[key] = true
		spec, err := mapAt(g.Object["spec"], g, e.Cluster, "spec")
		if err != nil {
			return Route{}, err
		}
		sel, err := stringMapAt(spec["selector"], g, e.Cluster, "spec.selector")
		if err != nil {
			return Route{}, err
		}
		if !labelsInclude(e.Labels, sel) {
			continue
		}
		ignored = append(ignored, prefixed(where(g, e.Cluster), ignoredFields(spec, "spec", "selector", "servers"))...)
		gw := istioGateway{u: g}
		servers, err := listAt(spec["servers"], g, e.Cluster, "spec.servers")
		if err != nil {
			return Route{}, err
		}
		for i, x := range servers {
			sp := fmt.Sprintf("spec.servers[%d]", i)
			srv, err := mapAt(x, g, e.Cluster, sp)
			if err != nil {
				return Route{}, err
			}
			ignored = append(ignored, prefixed(where(g, e.Cluster), ignoredFields(srv, sp, "port", "hosts", "name"))...)
			port, err := mapAt(srv["port"], g, e.Cluster, sp+".port")
			if err != nil {
				return Route{}, err
			}
			proto, err := stringAt(port["protocol"], g, e.Cluster, sp+".port.protocol")
			if err != nil {
				return Route{}, err
			}
			if !slices.Contains(istioGatewayProtocols, strings.ToUpper(proto)) {
				ignored = append(ignored, fmt.Sprintf("%s: %s (protocol %q: the lab's gateways carry plain HTTP, this server's routes are not played)", where(g, e.Cluster), sp, proto))
				continue
			}
			hosts, err := listAt(srv["hosts"], g, e.Cluster, sp+".hosts")
			if err != nil {
				return Route{}, err
			}
			if len(hosts) == 0 {
				return Route{}, fieldError(g, e.Cluster, sp+".hosts", "empty: istiod requires at least one host")
			}
			for j, h := range hosts {
				hs, err := stringAt(h, g, e.Cluster, fmt.Sprintf("%s.hosts[%d]", sp, j))
				if err != nil {
					return Route{}, err
				}
				ns, dns, ok := strings.Cut(hs, "/")
				if !ok {
					ns, dns = "*", hs
				}
				if dns == "" || ns == "" {
					return Route{}, fieldError(g, e.Cluster, fmt.Sprintf("%s.hosts[%d]", sp, j), "%q: want [namespace/]dnsName", hs)
				}
				gw.hosts = append(gw.hosts, istioServerHost{ns: ns, dns: strings.ToLower(dns)})
			}
		}
		selecting[key] = gw
	}

	var bound []*unstructured.Unstructured
	var domains []string
	var dangling []string
	for _, vs := range objs.of(e.Cluster, "VirtualService", "") {
		spec, err := mapAt(vs.Object["spec"], vs, e.Cluster, "spec")
		if err != nil {
			return Route{}, err
		}
		gws, err := listAt(spec["gateways"], vs, e.Cluster, "spec.gateways")
		if err != nil {
			return Route{}, err
		}
		vhosts, err := listAt(spec["hosts"], vs, e.Cluster, "spec.hosts")
		if err != nil {
			return Route{}, err
		}
		var doms []string
		for j, x := range gws {
			name, err := stringAt(x, vs, e.Cluster, fmt.Sprintf("spec.gateways[%d]", j))
			if err != nil {
				return Route{}, err
			}
			if name == "mesh" {
				continue
			}
			key := name
			if !strings.Contains(name, "/") {
				key = vs.GetNamespace() + "/" + name
			}
			if !exists[key] {
				// istiod takes it and binds it nowhere (istioctl analyze:
				// IST0101 ReferencedResourceNotFound).
				dangling = append(dangling, fmt.Sprintf("%s: spec.gateways[%d] names Gateway %s, which does not exist in cluster %s", describe(vs), j, key, e.Cluster))
				continue
			}
			gw, ok := selecting[key]
			if !ok {
				continue
			}
			for k, h := range vhosts {
				vh, err := stringAt(h, vs, e.Cluster, fmt.Sprintf("spec.hosts[%d]", k))
				if err != nil {
					return Route{}, err
				}
				for _, sh := range gw.hosts {
					if d, ok := sh.domain(strings.ToLower(vh), vs.GetNamespace(), gw.u.GetNamespace()); ok && !slices.Contains(doms, d) {
						doms = append(doms, d)
					}
				}
			}
		}
		if len(doms) > 0 {
			bound = append(bound, vs)
			domains = doms
		}
	}
	switch len(bound) {
	case 0:
		r := Route{Policy: meshsim.Policy{Mode: meshsim.ModePerPod, NoRoute: noRouteReason(e, selecting, dangling)}}
		r.Ignored = ignored
		return r, nil
	case 1:
	default:
		// istiod merges the VirtualServices bound to one gateway host by
		// host; the lab routes by one.
		return Route{}, fmt.Errorf("several VirtualServices are bound to the Gateways selecting gateway %s: %s; the lab routes by exactly one", e.Name, describeAll(bound))
	}
	r, err := istioVSRoute(e, objs, bound[0], domains)
	if err != nil {
		return Route{}, err
	}
	for _, k := range slices.Sorted(maps.Keys(selecting)) {
		r.From = append(r.From, where(selecting[k].u, e.Cluster))
	}
	r.Ignored = append(ignored, r.Ignored...)
	return r, nil
}

// noRouteReason says why gateway e has no route, naming what is missing.
func noRouteReason(e Entry, selecting map[string]istioGateway, dangling []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "no VirtualService bound to a Gateway selecting %s (pod labels %s)", e.Name, labelString(e.Labels))
	if len(selecting) == 0 {
		fmt.Fprintf(&b, "; no Gateway in cluster %s selects it", e.Cluster)
	} else {
		fmt.Fprintf(&b, "; Gateways selecting it: %s", strings.Join(slices.Sorted(maps.Keys(selecting)), ", "))
	}
	for _, d := range dangling {
		b.WriteString("; " + d)
	}
	return b.String()
}

// domain is the virtual host domain VirtualService host vh (of namespace
// vsNS) gets from server host sh of a Gateway in gwNS, if they overlap:
// the more specific of the two.
func (sh istioServerHost) domain(vh, vsNS, gwNS string) (string, bool) {
	switch sh.ns {
	case "*":
	case ".":
		if vsNS != gwNS {
			return "", false
		}
	default:
		if sh.ns != vsNS {
			return "", false
		}
	}
	switch {
	case covers(sh.dns, vh):
		return vh, true
	case covers(vh, sh.dns):
		return sh.dns, true
	}
	return "", false
}

// covers reports whether host pattern a includes every name b does: equal,
// or a is "*" or "*.suffix" and b (a name or a narrower wildcard) ends in
// the suffix.
func covers(a, b string) bool {
	if a == b {
		return true
	}
	suffix, ok := strings.CutPrefix(a, "*")
	return ok && len(b) > len(suffix) && strings.HasSuffix(b, suffix)
}

// labelsInclude reports whether labels has every key and value of sel.
func labelsInclude(labels, sel map[string]string) bool {
	for k, v := range sel {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// labelString is labels as k=v, sorted, comma-separated.
func labelString(labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}
