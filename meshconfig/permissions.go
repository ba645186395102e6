package meshconfig

import "github.com/mesh-verify/mesh-verify/kube"

// FeatureMeshConfig is reading the mesh's objects for an expected split
// (a split expectation with from:).
const FeatureMeshConfig kube.Feature = "mesh-config"

// Permissions are the calls Fetch makes for a reference of kind: what
// `mesh-verify rbac` adds when a scenario reads its expectation from the
// mesh. Only get and list: the objects are read once, never watched.
func Permissions(kind string) []kube.Permission {
	p := func(verb, group, resource string, scope kube.Scope, why string) kube.Permission {
		return kube.Permission{Feature: FeatureMeshConfig, Verb: verb, Group: group, Resource: resource, Scope: scope, Call: "meshconfig.Fetch", Why: why}
	}
	pods := p("list", "", "pods", kube.ScopeNamespace, "the ready pods behind each destination: a subset that selects none is an error, a destination's version is its pods'")
	services := p("get", "", "services", kube.ScopeNamespace, "the Service behind each destination host: its selector picks the pods")
	switch kind {
	case KindVirtualService:
		return []kube.Permission{
			p("get", "networking.istio.io", "virtualservices", kube.ScopeNamespace, "the route weights and mirrors the expected split is read from"),
			p("list", "networking.istio.io", "destinationrules", kube.ScopeNamespace, "the subsets the routes name, and their pod labels"),
			services, pods,
		}
	case KindMeshHTTPRoute:
		return []kube.Permission{p("get", "kuma.io", "meshhttproutes", kube.ScopeNamespace, "the backendRefs weights the expected split is read from")}
	case KindTrafficRoute:
		return []kube.Permission{p("get", "kuma.io", "trafficroutes", kube.ScopeCluster, "the split weights the expected split is read from (TrafficRoute is cluster-scoped)")}
	case KindSkupper:
		return []kube.Permission{
			p("list", "skupper.io", "links", kube.ScopeNamespace, "Skupper v2 links: spec.cost"),
			p("list", "", "secrets", kube.ScopeNamespace, "Skupper v1 link Secrets, label-selected, metadata only: the skupper.io/cost annotation"),
			p("list", "", "pods", kube.ScopeNamespace, "the ready pods that serve the address in each site"),
		}
	case KindService:
		services.Why = "the Service's Cilium annotations (global, shared, affinity) and selector in each cluster"
		pods.Why = "the ready backends per cluster"
		return []kube.Permission{services, pods}
	}
	return nil
}
