package meshconfig

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/mesh-verify/mesh-verify/kube"
)

// Reader reads one cluster's objects with the user's credentials: a
// dynamic client for the mesh kinds and pods, a metadata-only client for
// Skupper's link Secrets (their data, the link's credentials, is never
// fetched).
type Reader struct {
	Cluster  *kube.Cluster
	Dynamic  dynamic.Interface
	Metadata metadata.Interface
}

// NewReaders builds one Reader per connected cluster, keyed by scenario
// cluster name.
func NewReaders(clusters []*kube.Cluster) (map[string]*Reader, error) {
	out := make(map[string]*Reader, len(clusters))
	for _, c := range clusters {
		d, err := dynamic.NewForConfig(c.REST)
		if err != nil {
			return nil, fmt.Errorf("%s: build the dynamic client: %w", c, err)
		}
		m, err := metadata.NewForConfig(c.REST)
		if err != nil {
			return nil, fmt.Errorf("%s: build the metadata client: %w", c, err)
		}
		out[c.Name] = &Reader{Cluster: c, Dynamic: d, Metadata: m}
	}
	return out, nil
}

// The resources read, with the versions tried in order (Istio serves
// networking.istio.io/v1 since 1.22; older meshes only v1beta1).
var (
	gvrPods            = []schema.GroupVersionResource{{Version: "v1", Resource: "pods"}}
	gvrServices        = []schema.GroupVersionResource{{Version: "v1", Resource: "services"}}
	gvrSecrets         = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	gvrVirtualServices = []schema.GroupVersionResource{
		{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"},
		{Group: "networking.istio.io", Version: "v1beta1", Resource: "virtualservices"},
	}
	gvrDestinationRules = []schema.GroupVersionResource{
		{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"},
		{Group: "networking.istio.io", Version: "v1beta1", Resource: "destinationrules"},
	}
	gvrMeshHTTPRoutes = []schema.GroupVersionResource{{Group: "kuma.io", Version: "v1alpha1", Resource: "meshhttproutes"}}
	gvrTrafficRoutes  = []schema.GroupVersionResource{{Group: "kuma.io", Version: "v1alpha1", Resource: "trafficroutes"}}
	gvrSkupperLinks   = []schema.GroupVersionResource{{Group: "skupper.io", Version: "v2alpha1", Resource: "links"}}
	gvrConnectors     = []schema.GroupVersionResource{{Group: "skupper.io", Version: "v2alpha1", Resource: "connectors"}}
	gvrListeners      = []schema.GroupVersionResource{{Group: "skupper.io", Version: "v2alpha1", Resource: "listeners"}}
	gvrConfigMaps     = []schema.GroupVersionResource{{Version: "v1", Resource: "configmaps"}}
	gvrRollouts       = []schema.GroupVersionResource{{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}}
)

// Fetch reads, once, every object Resolve needs for q from the readers
// (keyed by scenario cluster; q.Clusters lists them in order). An object
// the user may not read is a *kube.ClusterError naming the verb and the
// resource; the referenced object missing is an *ObjectError.
func Fetch(ctx context.Context, q Query, readers map[string]*Reader) (Objects, error) {
	if err := q.Ref.Validate(); err != nil {
		return nil, fmt.Errorf("mesh object reference %s: %w", q.Ref, err)
	}
	f := &fetch{q: q, readers: readers, objs: Objects{}}
	for _, c := range append([]string{q.cluster()}, q.Clusters...) {
		if readers[c] == nil {
			return nil, fmt.Errorf("%s: no connection to cluster %q", q.Ref.Object(), c)
		}
	}
	var err error
	switch q.Ref.Kind {
	case KindVirtualService:
		err = f.istio(ctx)
	case KindMeshHTTPRoute:
		_, err = f.get(ctx, q.cluster(), gvrMeshHTTPRoutes, q.Ref.Namespace, q.Ref.Name, true)
	case KindTrafficRoute:
		err = f.trafficRoute(ctx)
	case KindSkupper:
		err = f.skupper(ctx)
	case KindService:
		err = f.cilium(ctx)
	case KindRollout:
		err = f.rollout(ctx)
	}
	if err != nil {
		return nil, err
	}
	return f.objs, nil
}

type fetch struct {
	q       Query
	readers map[string]*Reader
	objs    Objects
}

func (f *fetch) add(cluster string, u *unstructured.Unstructured) {
	f.objs[cluster] = append(f.objs[cluster], u)
}

// denied turns an API error into the CLI's setup error when the user
// may not make the call (or the credentials are refused).
func (f *fetch) denied(cluster, verb string, gvr schema.GroupVersionResource, ns, what string, err error) error {
	r := f.readers[cluster]
	res := gvr.Resource
	if gvr.Group != "" {
		res += "." + gvr.Group
	}
	call := verb + " " + res
	if ns != "" {
		call += " in namespace " + ns
	}
	call += " (" + what + ", for the expected split from " + f.q.Ref.Object() + ")"
	ce := &kube.ClusterError{Cluster: r.Cluster.Name, Context: r.Cluster.Context, Server: r.Cluster.Server, Call: call, Reason: kube.ReasonOther, Err: err}
	switch {
	case apierrors.IsForbidden(err):
		ce.Reason = kube.ReasonForbidden
	case apierrors.IsUnauthorized(err):
		ce.Reason = kube.ReasonUnauthorized
	}
	return ce
}

// notServed reports whether err says the API server does not serve the
// resource at all (the mesh's CRD, or this version of it, is missing),
// as opposed to a missing object.
func notServed(err error, name string) bool {
	var st apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d == nil || d.Name == "" || (name != "" && d.Name != name)
}

// get reads one object, trying the resource's versions in order. A
// missing object is an error when required, else (nil, nil).
func (f *fetch) get(ctx context.Context, cluster string, gvrs []schema.GroupVersionResource, ns, name string, required bool) (*unstructured.Unstructured, error) {
	d := f.readers[cluster].Dynamic
	var err error
	for _, gvr := range gvrs {
		var u *unstructured.Unstructured
		if ns == "" {
			u, err = d.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		} else {
			u, err = d.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		}
		switch {
		case err == nil:
			f.add(cluster, u)
			return u, nil
		case notServed(err, name):
			continue // try the next version
		case apierrors.IsNotFound(err):
			if !required {
				return nil, nil
			}
			return nil, &ObjectError{Cluster: cluster, Kind: kindOf(gvr), Namespace: ns, Name: name, Msg: "not found"}
		default:
			return nil, f.denied(cluster, "get", gvr, ns, kindOf(gvr)+" "+name, err)
		}
	}
	if !required {
		return nil, nil
	}
	var vs []string
	for _, g := range gvrs {
		vs = append(vs, g.GroupVersion().String())
	}
	return nil, &ObjectError{Cluster: cluster, Kind: kindOf(gvrs[0]), Namespace: ns, Name: name,
		Msg: fmt.Sprintf("the API server serves no %s in %s: is the mesh installed (its CRDs) in this cluster? (%v)", gvrs[0].Resource, strings.Join(vs, " or "), err)}
}

// list reads the objects of a resource in a namespace; a resource the
// server does not serve is an empty list (a mesh not installed there).
func (f *fetch) list(ctx context.Context, cluster string, gvrs []schema.GroupVersionResource, ns, selector, what string) error {
	d := f.readers[cluster].Dynamic
	for _, gvr := range gvrs {
		l, err := d.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		switch {
		case err == nil:
			for i := range l.Items {
				f.add(cluster, &l.Items[i])
			}
			return nil
		case notServed(err, ""):
			continue
		default:
			return f.denied(cluster, "list", gvr, ns, what, err)
		}
	}
	return nil
}

// kindOf is the kind a resource holds, for messages.
func kindOf(gvr schema.GroupVersionResource) string {
	switch gvr.Resource {
	case "virtualservices":
		return KindVirtualService
	case "destinationrules":
		return "DestinationRule"
	case "meshhttproutes":
		return KindMeshHTTPRoute
	case "trafficroutes":
		return KindTrafficRoute
	case "links":
		return "Link"
	case "connectors":
		return "Connector"
	case "listeners":
		return "Listener"
	case "configmaps":
		return "ConfigMap"
	case "services":
		return KindService
	case "pods":
		return "Pod"
	case "rollouts":
		return KindRollout
	}
	return gvr.Resource
}

// istio reads the VirtualService, then the DestinationRules of the
// namespaces its destinations live in and, in every cluster, the
// Services behind them and their pods.
func (f *fetch) istio(ctx context.Context) error {
	cl := f.q.cluster()
	vs, err := f.get(ctx, cl, gvrVirtualServices, f.q.Ref.Namespace, f.q.Ref.Name, true)
	if err != nil {
		return err
	}
	services := map[[2]string]bool{} // {namespace, name}
	for _, h := range destinationHosts(vs) {
		if ns, name, ok := serviceOf(istioFQDN(h, vs.GetNamespace())); ok {
			services[[2]string{ns, name}] = true
		}
	}
	namespaces := []string{vs.GetNamespace()}
	for k := range services {
		if !slices.Contains(namespaces, k[0]) {
			namespaces = append(namespaces, k[0])
		}
	}
	slices.Sort(namespaces)
	for _, ns := range namespaces {
		if err := f.list(ctx, cl, gvrDestinationRules, ns, "", "the subsets of the VirtualService's destinations"); err != nil {
			return err
		}
	}
	keys := make([][2]string, 0, len(services))
	for k := range services {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1]) })
	for _, c := range f.q.Clusters {
		for _, k := range keys {
			if err := f.serviceAndPods(ctx, c, k[0], k[1], false); err != nil {
				return err
			}
		}
	}
	return nil
}

// trafficRoute reads the TrafficRoute and, for every destination that
// names a Kubernetes Service by its kuma.io/service tag alone (as
// Flagger's Kuma router writes <apex>-primary_<ns>_svc_<port> and
// <apex>-canary_…), that Service and its pods in every zone.
func (f *fetch) trafficRoute(ctx context.Context) error {
	tr, err := f.get(ctx, f.q.cluster(), gvrTrafficRoutes, "", f.q.Ref.Name, true)
	if err != nil {
		return err
	}
	services := map[[2]string]bool{}
	for _, tags := range trafficRouteDestinations(tr) {
		if ns, name, ok := KumaService(tags[kumaService]); ok {
			services[[2]string{ns, name}] = true
		}
	}
	keys := slices.SortedFunc(maps.Keys(services), func(a, b [2]string) int { return strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1]) })
	for _, c := range f.q.Clusters {
		for _, k := range keys {
			if err := f.serviceAndPods(ctx, c, k[0], k[1], false); err != nil {
				return err
			}
		}
	}
	return nil
}

// rollout reads the Rollout and the pods of its namespace that carry a
// revision's hash (Argo Rollouts manages the cluster it runs in: the
// Rollout's).
func (f *fetch) rollout(ctx context.Context) error {
	cl, ns := f.q.cluster(), f.q.Ref.Namespace
	if _, err := f.get(ctx, cl, gvrRollouts, ns, f.q.Ref.Name, true); err != nil {
		return err
	}
	return f.list(ctx, cl, gvrPods, ns, ArgoHashLabel, "the ready pods of each of the Rollout's ReplicaSets, by "+ArgoHashLabel)
}

// serviceAndPods reads a Service (if the cluster has it) and the pods its
// selector picks.
func (f *fetch) serviceAndPods(ctx context.Context, cluster, ns, name string, required bool) error {
	svc, err := f.get(ctx, cluster, gvrServices, ns, name, required)
	if err != nil || svc == nil {
		return err
	}
	sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	if len(sel) == 0 {
		return nil // Resolve says why it cannot use it
	}
	return f.list(ctx, cluster, gvrPods, ns, metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: sel}), "the ready pods of Service "+ns+"/"+name)
}

// destinationHosts lists the hosts of every route and mirror destination
// of a VirtualService.
func destinationHosts(vs *unstructured.Unstructured) []string {
	var out []string
	add := func(d any) {
		m, _ := d.(map[string]any)
		if h, ok := m["host"].(string); ok && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	rules, _, _ := unstructured.NestedSlice(vs.Object, "spec", "http")
	for _, r := range rules {
		rm, _ := r.(map[string]any)
		routes, _ := rm["route"].([]any)
		for _, x := range routes {
			xm, _ := x.(map[string]any)
			add(xm["destination"])
		}
		add(rm["mirror"])
		mirrors, _ := rm["mirrors"].([]any)
		for _, x := range mirrors {
			xm, _ := x.(map[string]any)
			add(xm["destination"])
		}
	}
	return out
}

// skupper reads, in every cluster's site namespace, the v2 Links, the
// v1 link Secrets' metadata, the pods that serve the address and where
// it is exposed: v1's skupper-services ConfigMap (by name: no other
// ConfigMap is read) and v2's Connectors; in the entry site, v2's
// Listeners.
func (f *fetch) skupper(ctx context.Context) error {
	ns := f.q.Ref.Namespace
	if err := f.list(ctx, f.q.cluster(), gvrListeners, ns, "", "the entry site's Listeners: the routing keys of the address"); err != nil {
		return err
	}
	for _, c := range f.q.Clusters {
		if _, err := f.get(ctx, c, gvrConfigMaps, ns, SkupperServices, false); err != nil {
			return err
		}
		if err := f.list(ctx, c, gvrConnectors, ns, "", "the site's Connectors: where the address is exposed"); err != nil {
			return err
		}
		if err := f.list(ctx, c, gvrSkupperLinks, ns, "", "the site's links and their cost"); err != nil {
			return err
		}
		sel := SkupperTypeLabel + "=" + SkupperTypeLinkToken
		l, err := f.readers[c].Metadata.Resource(gvrSecrets).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return f.denied(c, "list", gvrSecrets, ns, "the metadata of the site's link Secrets (their cost annotation; the data is not read)", err)
		}
		for i := range l.Items {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&l.Items[i])
			if err != nil {
				return fmt.Errorf("cluster %s: Secret %s/%s: %w", c, ns, l.Items[i].Name, err)
			}
			u := &unstructured.Unstructured{Object: m}
			u.SetAPIVersion("v1")
			u.SetKind("Secret")
			f.add(c, u)
		}
		if f.q.Selector != "" {
			if err := f.list(ctx, c, gvrPods, ns, f.q.Selector, "the pods that serve the address"); err != nil {
				return err
			}
		}
	}
	return nil
}

// cilium reads the Service in every cluster (it must exist in the one
// the traffic enters) and the pods behind it.
func (f *fetch) cilium(ctx context.Context) error {
	ns, name, local := f.q.Ref.Namespace, f.q.Ref.Name, f.q.cluster()
	if err := f.serviceAndPods(ctx, local, ns, name, true); err != nil {
		return err
	}
	for _, c := range f.q.Clusters {
		if c == local {
			continue
		}
		if err := f.serviceAndPods(ctx, c, ns, name, false); err != nil {
			return err
		}
	}
	return nil
}
