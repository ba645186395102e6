// Package meshroute turns a mesh's own objects — Istio's VirtualService
// and DestinationRule, Kuma's MeshHTTPRoute and TrafficRoute, Skupper's
// link Secrets and Links, what exposes an app to Skupper (v1's
// skupper-services ConfigMap, v2's Connector and Listener), Cilium's Service annotations — into the routing
// of a lab entry: the mesh simulator's policy (lab/meshsim) and the
// clusters whose pods the entry reaches. The lab's daemon watches the
// objects in the clusters' API servers and derives every entry's route
// again on each change, so `kubectl patch` of a weight changes the routing
// as a control plane's push does; `lab up` derives the routes from the
// topology's manifests before it applies them, so a manifest the mesh
// would refuse fails with the object and the field named.
//
// What the lab does not model is never dropped silently: a field that
// would change the real routing but that the simulator does not play is
// listed in Route.Ignored by its path.
package meshroute

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mesh-verify/mesh-verify/lab/meshsim"
	"github.com/mesh-verify/mesh-verify/meshconfig"
)

// Meshes an entry routes by.
const (
	MeshIstio   = "istio"
	MeshKuma    = "kuma"
	MeshSkupper = "skupper"
	MeshCilium  = "cilium"
)

// Meshes lists the meshes, sorted.
func Meshes() []string { return []string{MeshCilium, MeshIstio, MeshKuma, MeshSkupper} }

// Entry is the lab entry a route is derived for.
type Entry struct {
	Name string
	// Mesh is one of the Mesh constants.
	Mesh string
	// Cluster is where the entry's data plane runs; Namespace and To name
	// the Service it routes (ServicePort is that Service's port, part of
	// Kuma's kuma.io/service tag).
	Cluster, Namespace, To string
	ServicePort            int32
	// Clusters are the lab's clusters, in order.
	Clusters []string
	// Gateway says the entry's data plane is a gateway of its own, not a
	// sidecar of the callers (or the workers' sidecars): istiod applies a
	// VirtualService to sidecars only when its spec.gateways is empty or
	// names "mesh".
	Gateway bool
	// Labels are a gateway entry's pod labels: an Istio Gateway object
	// applies to the gateway whose labels include its spec.selector.
	Labels map[string]string
	// PodLabels are the label sets of the pods of the entry's To Service,
	// one per app it selects: a Skupper exposure reaches an app only when
	// its selector selects them.
	PodLabels []map[string]string
	// IstioNoShadowSuffix is istiod's DISABLE_SHADOW_HOST_SUFFIX (true by
	// default since Istio 1.28): mirrored copies keep the primary's Host.
	IstioNoShadowSuffix bool
}

// Objects are the mesh objects of every cluster, as the API servers hold
// them (or as the manifests will create them).
type Objects map[string][]*unstructured.Unstructured

// Route is an entry's routing.
type Route struct {
	// Policy is the simulator's policy (its Seed is the daemon's to set).
	Policy meshsim.Policy
	// Clusters are the clusters whose pods the entry reaches, in the lab's
	// order: a Skupper site without a link, a Cilium Service that is not
	// global are not reachable.
	Clusters []string
	// From names the objects the route was derived from.
	From []string
	// Ignored names, by path, what the objects say that the lab does not
	// play (retries, timeouts, match conditions, …).
	Ignored []string
	// Subsets name, by version, the Istio DestinationRule subset a route
	// sends that version's pods to: Envoy's upstream cluster
	// outbound|port|subset|host in the sidecar's access log.
	Subsets map[string]string
	// Services, for a policy by meshsim.ByService, are the Services of
	// the entry's namespace it splits between: their pods, not the
	// entry's To Service's, are the backends (Flagger's <apex>-primary
	// and <apex>-canary behind a Kuma TrafficRoute).
	Services []string
}

// Describe is a one-line form for logs: the objects it came from and
// what was ignored.
func (r Route) Describe() string {
	var b strings.Builder
	if r.Policy.NoRoute != "" {
		b.WriteString("no route, every request answered 404 (NR): " + r.Policy.NoRoute)
	} else if len(r.From) == 0 {
		b.WriteString("no route object: the mesh's default")
	} else {
		b.WriteString("from " + strings.Join(r.From, ", "))
	}
	if len(r.Clusters) == 0 {
		b.WriteString("; reaches no cluster")
	} else {
		b.WriteString("; reaches " + strings.Join(r.Clusters, ", "))
	}
	if len(r.Ignored) > 0 {
		b.WriteString("; not modelled by the lab: " + strings.Join(r.Ignored, "; "))
	}
	return b.String()
}

// Resource is one kind of object a mesh's routing is read from.
type Resource struct {
	GVR        schema.GroupVersionResource
	Namespaced bool
	// LabelSelector narrows the watch (Skupper's link Secrets).
	LabelSelector string
}

// Resources are what the daemon watches for entries of mesh.
func Resources(mesh string) []Resource {
	switch mesh {
	case MeshIstio:
		return []Resource{
			{GVR: schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}, Namespaced: true},
			{GVR: schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}, Namespaced: true},
			{GVR: schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "gateways"}, Namespaced: true},
		}
	case MeshKuma:
		return []Resource{
			{GVR: schema.GroupVersionResource{Group: "kuma.io", Version: "v1alpha1", Resource: "meshhttproutes"}, Namespaced: true},
			{GVR: schema.GroupVersionResource{Group: "kuma.io", Version: "v1alpha1", Resource: "trafficroutes"}},
			{GVR: schema.GroupVersionResource{Group: "kuma.io", Version: "v1alpha1", Resource: "meshaccesslogs"}, Namespaced: true},
			{GVR: schema.GroupVersionResource{Group: "kuma.io", Version: "v1alpha1", Resource: "trafficlogs"}},
		}
	case MeshSkupper:
		return []Resource{
			{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespaced: true, LabelSelector: meshconfig.SkupperTypeLabel + "=" + meshconfig.SkupperTypeLinkToken},
			{GVR: schema.GroupVersionResource{Group: "skupper.io", Version: "v2alpha1", Resource: "links"}, Namespaced: true},
			// What exposes the app: v1's skupper-services ConfigMap (all
			// ConfigMaps are watched: a watch cannot select by name across
			// namespaces), v2's Connectors and Listeners.
			{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true},
			{GVR: schema.GroupVersionResource{Group: "skupper.io", Version: "v2alpha1", Resource: "connectors"}, Namespaced: true},
			{GVR: schema.GroupVersionResource{Group: "skupper.io", Version: "v2alpha1", Resource: "listeners"}, Namespaced: true},
		}
	case MeshCilium:
		return []Resource{{GVR: schema.GroupVersionResource{Version: "v1", Resource: "services"}, Namespaced: true}}
	}
	return nil
}

// Derive works out e's route from the objects. An object the mesh would
// refuse (a negative weight, a route to a subset no DestinationRule
// defines) is an error naming the object and the field.
func Derive(e Entry, objs Objects) (Route, error) {
	var r Route
	var err error
	switch e.Mesh {
	case MeshIstio:
		r, err = deriveIstio(e, objs)
	case MeshKuma:
		r, err = deriveKuma(e, objs)
	case MeshSkupper:
		r, err = deriveSkupper(e, objs)
	case MeshCilium:
		r, err = deriveCilium(e, objs)
	default:
		return Route{}, fmt.Errorf("entry %s: mesh %q: want one of %s", e.Name, e.Mesh, strings.Join(Meshes(), ", "))
	}
	if err != nil {
		return Route{}, fmt.Errorf("entry %s (mesh %s, cluster %s): %w", e.Name, e.Mesh, e.Cluster, err)
	}
	r.Policy.Local = e.Cluster
	if r.Clusters == nil {
		r.Clusters = slices.Clone(e.Clusters)
	}
	return r, nil
}

// of lists the objects of kind in cluster (and namespace, unless "").
func (o Objects) of(cluster, kind, ns string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range o[cluster] {
		if u.GetKind() == kind && (ns == "" || u.GetNamespace() == ns) {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		if c := a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time); c != 0 {
			return c
		}
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	return out
}

// where names an object of a cluster for messages.
func where(u *unstructured.Unstructured, cluster string) string {
	return describe(u) + " in cluster " + cluster
}

// ObjectError is a problem of one field of one mesh object.
type ObjectError struct {
	Cluster, Kind, Namespace, Name string
	// Path is the field, like spec.http[0].route[0].weight.
	Path, Msg string
}

func (e *ObjectError) Error() string {
	obj := e.Kind + " " + e.Name
	if e.Namespace != "" {
		obj = e.Kind + " " + e.Namespace + "/" + e.Name
	}
	return fmt.Sprintf("%s in cluster %s: %s: %s", obj, e.Cluster, e.Path, e.Msg)
}

// fieldError is an error about one field of one object.
func fieldError(u *unstructured.Unstructured, cluster, path, format string, a ...any) error {
	return &ObjectError{Cluster: cluster, Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Path: path, Msg: fmt.Sprintf(format, a...)}
}

// ignoredFields lists m's keys that are not in known, as path.key.
func ignoredFields(m map[string]any, path string, known ...string) []string {
	var out []string
	for k := range m {
		if !slices.Contains(known, k) {
			out = append(out, path+"."+k)
		}
	}
	slices.Sort(out)
	return out
}

// Small accessors for unstructured content: a wrong type is an error, a
// missing field is the zero value.

func mapAt(v any, u *unstructured.Unstructured, cluster, path string) (map[string]any, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fieldError(u, cluster, path, "want an object, have %T", v)
	}
	return m, nil
}

func listAt(v any, u *unstructured.Unstructured, cluster, path string) ([]any, error) {
	if v == nil {
		return nil, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fieldError(u, cluster, path, "want a list, have %T", v)
	}
	return l, nil
}

func stringAt(v any, u *unstructured.Unstructured, cluster, path string) (string, error) {
	if v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fieldError(u, cluster, path, "want a string, have %T", v)
	}
	return s, nil
}

// numberAt reads a number (JSON decodes int64 or float64); set says
// whether the field was there.
func numberAt(v any, u *unstructured.Unstructured, cluster, path string) (n float64, set bool, err error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case int64:
		return float64(x), true, nil
	case int:
		return float64(x), true, nil
	case float64:
		return x, true, nil
	}
	return 0, false, fieldError(u, cluster, path, "want a number, have %T", v)
}

func stringMapAt(v any, u *unstructured.Unstructured, cluster, path string) (map[string]string, error) {
	m, err := mapAt(v, u, cluster, path)
	if err != nil || m == nil {
		return nil, err
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		s, ok := x.(string)
		if !ok {
			return nil, fieldError(u, cluster, path+"."+k, "want a string, have %T", x)
		}
		out[k] = s
	}
	return out, nil
}

// hostMatches reports whether host names Service svc of namespace ns as a
// mesh resolves a short or qualified name from a client in ns.
func hostMatches(host, svc, ns string) bool {
	switch host {
	case svc, svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local":
		return true
	}
	return false
}
