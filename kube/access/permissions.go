package access

import (
	"slices"

	"github.com/mesh-verify/mesh-verify/kube/portforward"
)

// Feature is what a run uses an API call for (README.md, RBAC).
type Feature string

// Features of the Kubernetes path.
const (
	// FeatureConnect is the reachability probe every cluster gets first.
	FeatureConnect Feature = "connect"
	// FeatureNamespaceCheck tells a missing namespace from one without pods.
	FeatureNamespaceCheck Feature = "namespace-check"
	// FeatureInventory lists and watches the observed workloads' pods.
	FeatureInventory Feature = "inventory"
	// FeatureTunnel is the port-forward to the scenario's target.
	FeatureTunnel Feature = "tunnel"
	// FeatureLogs follows the observed pods' logs.
	FeatureLogs Feature = "logs"
	// FeatureMetricsProxy scrapes metrics through the API server's pod proxy.
	FeatureMetricsProxy Feature = "metrics-proxy"
	// FeatureMetricsPortForward scrapes metrics through a port-forward.
	FeatureMetricsPortForward Feature = "metrics-port-forward"
	// FeatureWorkers runs the attack from worker pods, an Indexed Job
	// (attack.workers > 0, docs/distributed.md).
	FeatureWorkers Feature = "workers"
	// FeatureGateways lists the clusters' network gateways (Istio's
	// east-west gateways), which an access log's upstream address may name
	// (a log rule that captures upstream).
	FeatureGateways Feature = "gateways"
	// FeatureMeshConfig reads the mesh's objects an expected split comes
	// from (a split's fromMesh, meshconfig.Fetch); its permissions are
	// keyed by the mesh kind in TargetKinds.
	FeatureMeshConfig Feature = "mesh-config"
)

// Features lists every feature a generic manifest (`mesh-verify rbac`
// without a scenario) grants, in the order the README's table shows them.
// FeatureMeshConfig is not among them: it lists Secrets (Skupper's link
// cost) and reads cluster-scoped TrafficRoutes, so it is granted only to
// a scenario whose split reads the mesh (AllFeatures).
func Features() []Feature {
	return []Feature{FeatureConnect, FeatureNamespaceCheck, FeatureInventory, FeatureTunnel, FeatureLogs,
		FeatureMetricsProxy, FeatureMetricsPortForward, FeatureWorkers, FeatureGateways}
}

// AllFeatures is Features and FeatureMeshConfig.
func AllFeatures() []Feature { return append(Features(), FeatureMeshConfig) }

// Scope says where a permission has to be granted.
type Scope string

// Scopes of a permission.
const (
	// ScopeNamespace: a namespaced resource, granted by a Role in the
	// namespace the call is made in.
	ScopeNamespace Scope = "namespace"
	// ScopeOwnNamespace: the Namespace object of the namespace the call
	// is made for. The API server authorizes GET /api/v1/namespaces/NS
	// with namespace NS, so a Role in NS grants it (resourceNames: [NS]).
	ScopeOwnNamespace Scope = "own-namespace"
	// ScopeCluster: a cluster-scoped resource, granted by a ClusterRole.
	ScopeCluster Scope = "cluster"
	// ScopeNonResource: a URL outside the resource API (GET /version).
	ScopeNonResource Scope = "non-resource"
)

// Permission is one authorization check an API call of mesh-verify passes:
// what a Role (or ClusterRole) rule has to grant for it.
type Permission struct {
	Feature     Feature
	Verb        string
	Group       string // "" is the core group
	Resource    string // plural, e.g. "pods"
	Subresource string // e.g. "log", "portforward"
	// URL is the path of a non-resource call.
	URL string
	// ResourceName, when set, is the one object the call names (a get by
	// name): the manifest grants it with resourceNames, so no other
	// object of the resource is readable.
	ResourceName string
	Scope        Scope
	// TargetKinds limits a FeatureTunnel permission to targets of these
	// kinds (portforward.KindPod, portforward.KindService,
	// portforward.KindDeployment), a FeatureMeshConfig
	// one to references of these mesh kinds (meshconfig.Kinds); empty
	// means every kind.
	TargetKinds []string
	// Optional: a denial is tolerated and only costs what Why says.
	Optional bool
	// Default: every authenticated user has it through the API server's
	// default ClusterRoles (system:public-info-viewer), so a manifest need
	// not grant it.
	Default bool
	// Worker: the call is made by the worker pods with their own
	// ServiceAccount (mesh-verify-worker), not by mesh-verify's.
	Worker bool
	// Call is the code that makes the call; Why is what needs it.
	Call string
	Why  string
}

// RBACResource is the resource as RBAC rules name it: "pods/log".
func (p Permission) RBACResource() string {
	if p.Subresource == "" {
		return p.Resource
	}
	return p.Resource + "/" + p.Subresource
}

// String is "get pods/log" (or "get /version").
func (p Permission) String() string {
	if p.Scope == ScopeNonResource {
		return p.Verb + " " + p.URL
	}
	if p.Group != "" {
		return p.Verb + " " + p.RBACResource() + "." + p.Group
	}
	return p.Verb + " " + p.RBACResource()
}

// Permissions declares every API call the product makes, next to the code
// that makes it (the Call field names it). The lab's e2e test
// (e2e/rbac) checks the API server's own audit log of a real run against
// it, so a call added without its permission fails there.
func Permissions() []Permission {
	all := []Permission{
		{Feature: FeatureConnect, Verb: "get", URL: "/version", Scope: ScopeNonResource, Default: true,
			Call: "Cluster.Probe", Why: "tell an unreachable API server from a denied call before anything else"},

		{Feature: FeatureNamespaceCheck, Verb: "get", Resource: "namespaces", Scope: ScopeOwnNamespace, Optional: true,
			Call: "Cluster.CheckNamespace", Why: "a missing namespace is reported as such, not as a namespace without pods (denied: the check is skipped)"},

		{Feature: FeatureInventory, Verb: "list", Resource: "pods", Scope: ScopeNamespace,
			Call: "Inventory", Why: "the observed workloads' pods: who may serve, ready pods per cluster"},
		{Feature: FeatureInventory, Verb: "watch", Resource: "pods", Scope: ScopeNamespace,
			Call: "Inv.StartWatch", Why: "pods that appear, go or restart during the run (their logs are followed, their names resolved)"},

		{Feature: FeatureTunnel, Verb: "get", Resource: "pods", Scope: ScopeNamespace,
			Call: "resolve (pod/NAME), session.watchPod", Why: "the pod a pod/NAME target names; the forwarded pod looked up again when its watch breaks"},
		{Feature: FeatureTunnel, Verb: "get", Resource: "services", Scope: ScopeNamespace, TargetKinds: []string{portforward.KindService},
			Call: "resolve (svc/NAME)", Why: "the Service's selector and target port, to pick its pod like kubectl port-forward"},
		{Feature: FeatureTunnel, Verb: "get", Group: "apps", Resource: "deployments", Scope: ScopeNamespace, TargetKinds: []string{portforward.KindDeployment},
			Call: "resolve (deploy/NAME)", Why: "the Deployment's selector, to pick its pod like kubectl port-forward"},
		{Feature: FeatureTunnel, Verb: "list", Resource: "pods", Scope: ScopeNamespace, TargetKinds: []string{portforward.KindService, portforward.KindDeployment},
			Call: "resolve (svc/, deploy/)", Why: "the pods the selector matches, to pick the one to forward to"},
		{Feature: FeatureTunnel, Verb: "watch", Resource: "pods", Scope: ScopeNamespace,
			Call: "Tunnel.connect, session.watchPod", Why: "notice the forwarded pod being replaced or deleted, to re-resolve the target"},
	}
	all = append(all, portForward(FeatureTunnel, "Tunnel.upgrade", "the streaming connection every request of the attack goes through")...)
	all = append(all,
		Permission{Feature: FeatureLogs, Verb: "get", Resource: "pods", Subresource: "log", Scope: ScopeNamespace,
			Call: "podlogs.ClientGoOpener, Cluster.CheckLogAccess", Why: "follow the observed pods' logs (observe[].logs)"},

		Permission{Feature: FeatureMetricsProxy, Verb: "get", Resource: "pods", Scope: ScopeNamespace,
			Call: "checkScrapable", Why: "the pod's node, checked before scraping through the pod proxy"},
		Permission{Feature: FeatureMetricsProxy, Verb: "get", Resource: "nodes", Scope: ScopeCluster,
			Call: "checkScrapable", Why: "refuse kwok-simulated nodes, which the pod proxy cannot reach (observe[].metrics via: proxy)"},
		Permission{Feature: FeatureMetricsProxy, Verb: "get", Resource: "pods", Subresource: "proxy", Scope: ScopeNamespace,
			Call: "Scrape", Why: "GET the metrics through the API server's pod proxy (observe[].metrics via: proxy)"},

		Permission{Feature: FeatureMetricsPortForward, Verb: "get", Resource: "pods", Scope: ScopeNamespace,
			Call: "scrapeForward (resolve pod/NAME)", Why: "the pod to scrape through a port-forward"},
		Permission{Feature: FeatureMetricsPortForward, Verb: "watch", Resource: "pods", Scope: ScopeNamespace,
			Call: "Tunnel.connect", Why: "the scrape's port-forward watches its pod like every tunnel"},
	)
	all = append(all, portForward(FeatureMetricsPortForward, "scrapeForward", "GET the metrics through a port-forward (observe[].metrics via: portForward)")...)
	all = append(all, workerPermissions()...)
	all = append(all, meshConfigPermissions()...)
	// The gateways live in istio-system (or wherever the mesh put them), a
	// namespace the scenario does not name: listed cluster-wide, by label.
	return append(all,
		Permission{Feature: FeatureGateways, Verb: "list", Resource: "services", Scope: ScopeCluster, Optional: true,
			Call: "EastWestGateways", Why: "the network gateways an outbound access-log line may name as upstream (denied: such lines are left out, with a warning)"},
		Permission{Feature: FeatureGateways, Verb: "list", Group: "discovery.k8s.io", Resource: "endpointslices", Scope: ScopeCluster, Optional: true,
			Call: "EastWestGateways", Why: "the gateway pods' addresses"})
}

// workerPermissions are a distributed run's: the coordinator's on the
// Job, its ConfigMap, its Secret and its pods in the namespace the workers
// run in, and the workers' own on the ConfigMap and the Secret.
func workerPermissions() []Permission {
	w := func(verb, group, resource, sub, call, why string) Permission {
		return Permission{Feature: FeatureWorkers, Verb: verb, Group: group, Resource: resource, Subresource: sub, Scope: ScopeNamespace, Call: call, Why: why}
	}
	out := []Permission{
		w("create", "batch", "jobs", "", "Cluster.CreateWorkers", "the workers' Indexed Job, created suspended"),
		w("patch", "batch", "jobs", "", "Cluster.CreateWorkers", "resume the Job once its ConfigMap exists"),
		w("get", "", "serviceaccounts", "", "Cluster.CreateWorkers", "check that the workers' ServiceAccount exists before the Job is created (the Job controller cannot create pods without it)"),
		w("list", "batch", "jobs", "", "Cluster.SweepWorkers", "earlier runs' Jobs whose expires-at has passed"),
		w("delete", "batch", "jobs", "", "WorkerRun.Delete, Cluster.SweepWorkers", "remove the Job (its pods and ConfigMap follow) at the end of a run, and expired ones"),
		w("create", "", "configmaps", "", "Cluster.CreateWorkers", "the inventory and run config the workers read, and the start and stop annotations they watch"),
		// create only: the coordinator never reads a Secret back, and the
		// garbage collector deletes it with its Job.
		w("create", "", "secrets", "", "Cluster.CreateWorkers", "the scenario (its attack.headers values) and target.tls.ca's certificates, which the workers read"),
		w("patch", "", "configmaps", "", "WorkerRun.Start, WorkerRun.Stop", "the start-at and stop annotations"),
		w("list", "", "configmaps", "", "Cluster.SweepWorkers", "earlier runs' ConfigMaps whose expires-at has passed"),
		w("delete", "", "configmaps", "", "Cluster.SweepWorkers", "an expired ConfigMap left without its Job"),
		w("list", "", "pods", "", "WorkerRun.Pods, WorkerRun.WatchPods", "the workers' pods: index, phase, exit code"),
		w("watch", "", "pods", "", "WorkerRun.WatchPods", "notice a worker pod dying during the run"),
		w("get", "", "pods", "log", "the coordinator (fleet/coordinator.go)", "follow the workers' logs, which carry their records"),
	}
	// get and watch (by name, with a field selector): never list, which
	// would read every ConfigMap of the application's namespace.
	for _, verb := range []string{"get", "watch"} {
		p := w(verb, "", "configmaps", "", "mesh-verify worker", "the worker reads its ConfigMap and watches it for the start and stop annotations")
		p.Worker = true
		out = append(out, p)
	}
	// get by name only: never list or watch, which would read every
	// Secret of the namespace (docs/distributed.md, Permissions, says
	// why the workers' namespace should be one of their own).
	p := w("get", "", "secrets", "", "mesh-verify worker", "the worker reads its Secret: the scenario and the CA certificates")
	p.Worker = true
	return append(out, p)
}

// meshConfigPermissions are meshconfig.Fetch's reads, by the kind of
// object a split's fromMesh names: get and list only, once before the
// attack. The kinds are meshconfig's (which imports this package).
func meshConfigPermissions() []Permission {
	p := func(verb, group, resource string, scope Scope, why string, kinds ...string) Permission {
		return Permission{Feature: FeatureMeshConfig, Verb: verb, Group: group, Resource: resource, Scope: scope, TargetKinds: kinds,
			Call: "meshconfig.Fetch", Why: why}
	}
	return []Permission{
		p("get", "networking.istio.io", "virtualservices", ScopeNamespace, "the route weights and mirrors the expected split is read from", "VirtualService"),
		p("list", "networking.istio.io", "destinationrules", ScopeNamespace, "the subsets the routes name, and their pod labels", "VirtualService"),
		p("get", "", "services", ScopeNamespace, "the Service behind each destination (its selector), or Cilium's annotations on it", "VirtualService", "Service"),
		p("list", "", "pods", ScopeNamespace, "the ready pods behind each destination or site: a subset that selects none is an error", "VirtualService", "Service", "Skupper", "Rollout"),
		p("get", "kuma.io", "meshhttproutes", ScopeNamespace, "the backendRefs weights the expected split is read from", "MeshHTTPRoute"),
		p("get", "kuma.io", "trafficroutes", ScopeCluster, "the split weights the expected split is read from (TrafficRoute is cluster-scoped)", "TrafficRoute"),
		p("list", "skupper.io", "links", ScopeNamespace, "Skupper v2 links: spec.cost", "Skupper"),
		p("list", "skupper.io", "connectors", ScopeNamespace, "Skupper v2 Connectors: where the address is exposed (spec.routingKey, spec.selector)", "Skupper"),
		p("list", "skupper.io", "listeners", ScopeNamespace, "Skupper v2 Listeners of the entry site: the address's routing keys (spec.host, spec.routingKey)", "Skupper"),
		named(p("get", "", "configmaps", ScopeNamespace, "Skupper v1's skupper-services ConfigMap, by name (no other ConfigMap): the address's entry (targets[].selector) says where it is exposed", "Skupper"), "skupper-services"),
		p("get", "argoproj.io", "rollouts", ScopeNamespace, "the weights Argo Rollouts recorded (status.canary.weights) and each ReplicaSet's pod template hash", "Rollout"),
		p("list", "", "secrets", ScopeNamespace, "Skupper v1 link Secrets, label-selected, metadata only: the skupper.io/cost annotation (the data is never fetched)", "Skupper"),
	}
}

// named restricts p to the one object its call names.
func named(p Permission, name string) Permission {
	p.ResourceName = name
	return p
}

// portForward is the pods/portforward pair: client-go dials SPDY over
// WebSocket first (an HTTP GET, which API servers from 1.35 also check for
// create) and falls back to SPDY (a POST: create), as kubectl port-forward does.
func portForward(f Feature, call, why string) []Permission {
	return []Permission{
		{Feature: f, Verb: "create", Resource: "pods", Subresource: "portforward", Scope: ScopeNamespace, Call: call + " (SPDY, and WebSocket from Kubernetes 1.35)", Why: why},
		{Feature: f, Verb: "get", Resource: "pods", Subresource: "portforward", Scope: ScopeNamespace, Call: call + " (SPDY over WebSocket)", Why: why},
	}
}

// PermissionsFor are the permissions of one feature; for FeatureTunnel
// those of a target of kind targetKind, for FeatureMeshConfig those of a
// reference to a mesh object of that kind ("" means every kind).
func PermissionsFor(f Feature, targetKind string) []Permission {
	var out []Permission
	for _, p := range Permissions() {
		if p.Feature != f {
			continue
		}
		if targetKind != "" && len(p.TargetKinds) > 0 && !slices.Contains(p.TargetKinds, targetKind) {
			continue
		}
		out = append(out, p)
	}
	return out
}
