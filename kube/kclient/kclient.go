// Package kclient is the narrow Kubernetes client of mesh-verify: typed
// clients for the four API groups the product calls (core/v1, apps/v1,
// batch/v1, discovery/v1), over rest.RESTClient, with a scheme holding
// only those groups.
//
// Why not client-go's clientset: k8s.io/client-go/kubernetes and its
// scheme register every API group the Kubernetes release knows (56
// packages of types, 57 typed clients, their apply configurations,
// discovery and OpenAPI), which made up a third of the executable and of
// its file-backed memory (issues 24 and 27), for the ~40 calls the
// product makes. The method sets here are spelled exactly as client-go's
// typed clients spell them, and the requests are the same (protobuf
// preferred, the same paths and parameters, one HTTP client and one rate
// limiter shared by the groups), so call sites read as before and
// client-go's typed interfaces satisfy these ones.
//
// Adding a call: add the resource to its group below (and, for a new
// API group, to the scheme); TestProductDeps in cmd/mesh-verify fails if
// the full clientset or its scheme comes back into the product.
package kclient

import (
	"fmt"
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Interface is the part of the Kubernetes API mesh-verify calls, by API
// group (as kubernetes.Interface names them).
type Interface interface {
	CoreV1() CoreV1Interface
	AppsV1() AppsV1Interface
	BatchV1() BatchV1Interface
	DiscoveryV1() DiscoveryV1Interface
}

// CoreV1Interface is the core/v1 group: the resources mesh-verify reads
// or writes, and the group's REST client for the calls without a typed
// method (pod proxy, port-forward, the /version probe).
type CoreV1Interface interface {
	RESTClient() rest.Interface
	Pods(namespace string) PodInterface
	Services(namespace string) ServiceInterface
	ConfigMaps(namespace string) ConfigMapInterface
	Secrets(namespace string) SecretInterface
	ServiceAccounts(namespace string) ServiceAccountInterface
	Namespaces() NamespaceInterface
	Nodes() NodeInterface
}

// AppsV1Interface is the apps/v1 group.
type AppsV1Interface interface {
	RESTClient() rest.Interface
	Deployments(namespace string) DeploymentInterface
}

// BatchV1Interface is the batch/v1 group.
type BatchV1Interface interface {
	RESTClient() rest.Interface
	Jobs(namespace string) JobInterface
}

// DiscoveryV1Interface is the discovery.k8s.io/v1 group.
type DiscoveryV1Interface interface {
	RESTClient() rest.Interface
	EndpointSlices(namespace string) EndpointSliceInterface
}

// The resources, each the generic Resource (plus a subresource where the
// product calls one).
type (
	// PodInterface adds the log subresource.
	PodInterface interface {
		Resource[*corev1.Pod, *corev1.PodList]
		GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request
	}
	ServiceInterface        = Resource[*corev1.Service, *corev1.ServiceList]
	ConfigMapInterface      = Resource[*corev1.ConfigMap, *corev1.ConfigMapList]
	SecretInterface         = Resource[*corev1.Secret, *corev1.SecretList]
	ServiceAccountInterface = Resource[*corev1.ServiceAccount, *corev1.ServiceAccountList]
	NamespaceInterface      = Resource[*corev1.Namespace, *corev1.NamespaceList]
	NodeInterface           = Resource[*corev1.Node, *corev1.NodeList]
	DeploymentInterface     = Resource[*appsv1.Deployment, *appsv1.DeploymentList]
	JobInterface            = Resource[*batchv1.Job, *batchv1.JobList]
	EndpointSliceInterface  = Resource[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList]
)

// scheme holds only the groups above: decoding anything else fails, which
// is the point (no other group is ever asked for). Built once per client
// set rather than as package state, at a cost of microseconds.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	// The options types (ListOptions, GetOptions…) unversioned, as
	// client-go's scheme registers them, for the parameter codec.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, discoveryv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("register API types: %w", err)
		}
	}
	return s, nil
}

// Clientset is the Interface over an API server.
type Clientset struct {
	core      *coreV1
	apps      *group
	batch     *group
	discovery *group
}

var _ Interface = (*Clientset)(nil)

// NewForConfig is kubernetes.NewForConfig for these groups: one HTTP
// client (and so one connection pool) and, when cfg sets QPS without a
// RateLimiter, one token bucket shared by all groups.
func NewForConfig(cfg *rest.Config) (*Clientset, error) {
	c := *cfg
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	hc, err := rest.HTTPClientFor(&c)
	if err != nil {
		return nil, fmt.Errorf("build the HTTP client for %s: %w", c.Host, err)
	}
	return NewForConfigAndClient(&c, hc)
}

// NewForConfigAndClient is NewForConfig over a given HTTP client.
func NewForConfigAndClient(cfg *rest.Config, hc *http.Client) (*Clientset, error) {
	c := *cfg
	if c.RateLimiter == nil && c.QPS > 0 {
		if c.Burst <= 0 {
			return nil, fmt.Errorf("burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0")
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst)
	}
	s, err := newScheme()
	if err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(s)
	gc := groupConfig{cfg: &c, hc: hc, params: runtime.NewParameterCodec(s),
		ns: rest.CodecFactoryForGeneratedClient(s, codecs).WithoutConversion()}
	var cs Clientset
	core, err := gc.group("/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	cs.core = &coreV1{core}
	if cs.apps, err = gc.group("/apis", appsv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if cs.batch, err = gc.group("/apis", batchv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if cs.discovery, err = gc.group("/apis", discoveryv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	return &cs, nil
}

// groupConfig is what every group's REST client shares.
type groupConfig struct {
	cfg    *rest.Config
	hc     *http.Client
	params runtime.ParameterCodec
	ns     runtime.NegotiatedSerializer
}

// group is the REST client of one API group version, configured as
// client-go's generated setConfigDefaults configures it.
func (g groupConfig) group(apiPath string, gv schema.GroupVersion) (*group, error) {
	c := *g.cfg
	c.GroupVersion = &gv
	c.APIPath = apiPath
	c.NegotiatedSerializer = g.ns
	rc, err := rest.RESTClientForConfigAndClient(&c, g.hc)
	if err != nil {
		return nil, fmt.Errorf("build the %s client for %s: %w", gv, c.Host, err)
	}
	return &group{rc: rc, params: g.params}, nil
}

// CoreV1 is the core/v1 group.
func (c *Clientset) CoreV1() CoreV1Interface { return c.core }

// AppsV1 is the apps/v1 group.
func (c *Clientset) AppsV1() AppsV1Interface { return appsV1{c.apps} }

// BatchV1 is the batch/v1 group.
func (c *Clientset) BatchV1() BatchV1Interface { return batchV1{c.batch} }

// DiscoveryV1 is the discovery.k8s.io/v1 group.
func (c *Clientset) DiscoveryV1() DiscoveryV1Interface { return discoveryV1{c.discovery} }

// group is one API group version's REST client and parameter codec.
type group struct {
	rc     rest.Interface
	params runtime.ParameterCodec
}

// RESTClient is the group's REST client.
func (g *group) RESTClient() rest.Interface { return g.rc }

type coreV1 struct{ *group }

func (c *coreV1) Pods(ns string) PodInterface {
	return pods{newResource(c.group, "pods", ns, func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} })}
}

func (c *coreV1) Services(ns string) ServiceInterface {
	return newResource(c.group, "services", ns, func() *corev1.Service { return &corev1.Service{} }, func() *corev1.ServiceList { return &corev1.ServiceList{} })
}

func (c *coreV1) ConfigMaps(ns string) ConfigMapInterface {
	return newResource(c.group, "configmaps", ns, func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} })
}

func (c *coreV1) Secrets(ns string) SecretInterface {
	return newResource(c.group, "secrets", ns, func() *corev1.Secret { return &corev1.Secret{} }, func() *corev1.SecretList { return &corev1.SecretList{} })
}

func (c *coreV1) ServiceAccounts(ns string) ServiceAccountInterface {
	return newResource(c.group, "serviceaccounts", ns, func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} }, func() *corev1.ServiceAccountList { return &corev1.ServiceAccountList{} })
}

func (c *coreV1) Namespaces() NamespaceInterface {
	return newResource(c.group, "namespaces", "", func() *corev1.Namespace { return &corev1.Namespace{} }, func() *corev1.NamespaceList { return &corev1.NamespaceList{} })
}

func (c *coreV1) Nodes() NodeInterface {
	return newResource(c.group, "nodes", "", func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} })
}

// pods adds the log subresource to the generic resource.
type pods struct {
	*resource[*corev1.Pod, *corev1.PodList]
}

// GetLogs is the request for a container's log (client-go's, unchanged:
// no protobuf, the log is text).
func (p pods) GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request {
	return p.g.rc.Get().Namespace(p.ns).Name(name).Resource("pods").SubResource("log").VersionedParams(opts, p.g.params)
}

type appsV1 struct{ *group }

func (a appsV1) Deployments(ns string) DeploymentInterface {
	return newResource(a.group, "deployments", ns, func() *appsv1.Deployment { return &appsv1.Deployment{} }, func() *appsv1.DeploymentList { return &appsv1.DeploymentList{} })
}

type batchV1 struct{ *group }

func (b batchV1) Jobs(ns string) JobInterface {
	return newResource(b.group, "jobs", ns, func() *batchv1.Job { return &batchv1.Job{} }, func() *batchv1.JobList { return &batchv1.JobList{} })
}

type discoveryV1 struct{ *group }

func (d discoveryV1) EndpointSlices(ns string) EndpointSliceInterface {
	return newResource(d.group, "endpointslices", ns, func() *discoveryv1.EndpointSlice { return &discoveryv1.EndpointSlice{} }, func() *discoveryv1.EndpointSliceList { return &discoveryv1.EndpointSliceList{} })
}
