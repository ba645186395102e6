// Package topology is the local lab's description of what runs where: the
// clusters, the tutorial apps deployed in each (as real apps/v1
// Deployments and Services), and the mesh entries — a Skupper router, a
// caller's sidecar, a gateway — each routed by its mesh's own objects
// (the topology directory's manifests, lab/meshroute). It loads the YAML strictly (unknown fields are errors,
// and every error names the file, the line and the field) and renders the
// Kubernetes objects `lab up` applies.
package topology

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/mesh-verify/mesh-verify/lab/meshroute"
)

// APIVersion and Kind every topology file declares.
const (
	APIVersion = "lab.mesh-verify.io/v1alpha1"
	Kind       = "Topology"
)

// Defaults for what a topology leaves out.
const (
	DefaultNamespace = "default"
	DefaultPort      = 8080
	DefaultPortName  = "http"
)

// Topology is one lab layout, typically one seed experiment.
type Topology struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   Metadata `yaml:"metadata"`
	// Clusters are created in this order, with contexts kind-<name>. The
	// first one is the current context, as after `kubectx kind-c1`.
	Clusters []string  `yaml:"clusters"`
	Apps     []App     `yaml:"apps"`
	Services []Service `yaml:"services"`
	Entries  []Entry   `yaml:"entries"`
	// Networks makes an Istio multi-network mesh: each cluster's network
	// (Istio's values.global.network), every cluster listed. The lab
	// renders what samples/multicluster/gen-eastwest-gateway.sh installs
	// per cluster, an east-west gateway Service (EastWestGateway*) labelled
	// with the network, and labels the cluster's pods with it as Istio's
	// injector does. An outbound Envoy line then names the serving pod's
	// IP on the caller's network and the remote cluster's gateway
	// (ClusterIP:15443) for an endpoint on another network. kwok gives
	// every cluster the same pod CIDR, so pod IPs overlap across networks,
	// as they may in a real multi-network mesh.
	Networks map[string]string `yaml:"networks,omitempty"`
	// Istio is istiod's configuration where it changes what the data
	// plane does beyond the mesh's objects.
	Istio IstioConfig `yaml:"istio,omitempty"`

	// Manifests are the Kubernetes manifests of a topology directory
	// (ParseDir): the tutorial's own objects, per cluster.
	Manifests []Manifest `yaml:"-"`
	// WorkloadNotes say, per object, what the manifests' Deployments and
	// Services set that the lab does not play.
	WorkloadNotes []string `yaml:"-"`

	// File is where the topology was loaded from ("builtin:NAME" for the
	// embedded catalog).
	File string `yaml:"-"`
}

// Metadata names a topology.
type Metadata struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Seed says which tutorial experiment this reproduces, for people
	// reading `lab status`.
	Seed string `yaml:"seed"`
}

// Port is a container port with its name; Services target the name, as
// the tutorials' manifests do, so `kubectl port-forward svc/x 8080`
// resolves it like on a real cluster.
type Port struct {
	Number int32  `yaml:"number"`
	Name   string `yaml:"name"`
}

// App is one Deployment of a tutorial app, present in every cluster listed
// in Replicas.
type App struct {
	// Name is the Deployment's and its container's name.
	Name string `yaml:"name"`
	// Kind is the lab/apps kind: callme, caller, persons or echo.
	Kind string `yaml:"kind"`
	// Service is the Service the pods belong to: they carry the label
	// app=<Service>, which the Service selects.
	Service string `yaml:"service"`
	// Version is the pods' version label and what the app says it is.
	Version   string `yaml:"version"`
	Namespace string `yaml:"namespace"`
	Port      Port   `yaml:"port"`
	// Replicas per cluster; 0 keeps a Deployment scaled to zero, as in
	// the Skupper tutorial's third scenario.
	Replicas map[string]int `yaml:"replicas"`
	// Calls is the authority a caller addresses its callee by, like
	// "callme-service:8080"; its sidecar entry carries the call.
	Calls string `yaml:"calls"`
	// Delay is a service time every answer takes, like "50ms", on top of
	// the real app's own (the persons app sleeps 20-100 ms by itself).
	Delay time.Duration `yaml:"delay"`
	// Sidecar gives the pods a mesh sidecar container (istio-proxy or
	// kuma-sidecar) in front of the app: lab/sidecar, whose log holds
	// Envoy's access lines and whose port serves its metrics.
	Sidecar string `yaml:"sidecar"`
	// ClusterNames is what the app says its cluster is, per lab cluster:
	// Istio echo's --cluster (unset: no Cluster= line), rebel-base's
	// "Cluster" value (required for every cluster it runs in).
	ClusterNames map[string]string `yaml:"clusterNames"`
	// Variant picks a release of the real app where its format changed:
	// echo "1.18" prints Istio 1.18's body (an empty Cluster= line).
	Variant string `yaml:"variant"`
	// AppName is the name the app answers with (Spring's
	// spring.application.name), by default its Service: a Flagger
	// primary (Service <apex>-primary) is a copy of the canary and says
	// the canary's name.
	AppName string `yaml:"appName"`
	// Labels are more pod labels, the tutorial's own (Cilium's rebel-base
	// pods carry name=rebel-base), beside the lab's app and version.
	Labels map[string]string `yaml:"labels"`

	// source is the manifest the app's Deployment comes from (nil: from
	// lab.yaml); from holds that Deployment per cluster.
	source *workloadSource
	from   map[string]*appsv1.Deployment
}

// Service is a ClusterIP Service over the pods of the apps that name it.
type Service struct {
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
	// Port is the Service port; it targets the apps' named port.
	Port int32 `yaml:"port"`
	// Clusters defaults to the clusters where one of its apps has a
	// Deployment; list more to create the Service where no pod runs (the
	// Cilium tutorial's callme-service in c1).
	Clusters    []string          `yaml:"clusters"`
	Annotations map[string]string `yaml:"annotations"`
	Labels      map[string]string `yaml:"labels"`
	// Selector is the tutorial's selector of the pods (default: app=<name>).
	Selector map[string]string `yaml:"selector"`

	// source is the manifest the Service comes from (nil: from lab.yaml);
	// from holds it per cluster, as the lab applies it.
	source *workloadSource
	from   map[string]*corev1.Service
}

// Entry is where traffic enters the simulated mesh. A gateway entry has
// its own pods (Deployment Name in Cluster) behind its own Service; a
// sidecar entry rides in the pods of a caller app (SidecarOf), which send
// their calls through it; a workers entry (Workers) is the outbound data
// plane of mesh-verify's own worker pods in Cluster (an injected sidecar's,
// or a sidecar-less mesh's datapath), started with each such pod. Either
// way each pod gets its own mesh simulator routing to the ready pods of the
// To Service in every cluster.
type Entry struct {
	Name      string `yaml:"name"`
	Cluster   string `yaml:"cluster"`
	Namespace string `yaml:"namespace"`

	// Gateway entries.
	Service  string `yaml:"service"`
	Port     Port   `yaml:"port"`
	Replicas *int   `yaml:"replicas"`
	// Labels are added to the gateway's pods, as the mesh's installer
	// labels its gateway: what a Gateway object's selector picks. An Istio
	// gateway entry without labels gets IstioIngressGatewayLabels(), the
	// default ingress gateway's (`istio: ingressgateway`, which the
	// tutorials' Gateways select).
	Labels map[string]string `yaml:"labels"`

	// Sidecar entries.
	SidecarOf string `yaml:"sidecarOf"`

	// Workers makes the entry the outbound data plane of mesh-verify's
	// worker pods in Cluster (any namespace), as the tutorials' client
	// pods (Istio's sleep, Cilium's x-wing) have one: for Istio and Kuma
	// the sidecar the mesh's injector adds to a pod that asks for one
	// (InjectsSidecar), writing AccessLog's lines to the pod's proxy
	// container log; for Cilium and Skupper every worker pod's datapath.
	// It runs no pod and has no Service of its own.
	Workers bool `yaml:"workers"`

	// To is the Service (in the entry's namespace, in every cluster) whose
	// ready pods are the backends.
	To string `yaml:"to"`
	// Mesh routes the entry by that mesh's own objects (lab/meshroute):
	// the topology's manifests as applied, watched by the daemon, so a
	// kubectl patch changes the routing. Required: the lab has no routing
	// of its own.
	Mesh string `yaml:"mesh"`
	// Policy is the lab's former private routing block, kept only so that
	// a topology still carrying one is refused by name (validate.go)
	// instead of as an unknown field: routing comes from the mesh's
	// objects alone. A yaml.Node so that the key's mere presence counts:
	// `policy:` with a null value leaves it set (Kind non-zero), where an
	// interface would decode to nil.
	Policy yaml.Node `yaml:"policy"`
	// AccessLog makes a gateway entry an Envoy (Istio's ingress gateway,
	// Kuma's gateway) that writes this format's access line per request
	// to its pod's log and sets x-request-id; sidecar entries take their
	// app's sidecar. Empty: a proxy that adds nothing (Skupper's router).
	AccessLog string `yaml:"accessLog"`
	// Edge makes such a gateway the mesh's edge (Istio's ingress gateway,
	// which since 1.25 always regenerates the id of a request from
	// outside; Kuma's MeshGateway): it replaces the client's x-request-id
	// with one of its own, so the id the client sent reaches no log
	// behind it. Needs AccessLog.
	Edge bool `yaml:"edge"`
	// DataPlane plays the policy: DataPlaneSimulator (the default) or
	// DataPlaneNginx, Debian's nginx with a rendered configuration — a
	// third party's routing, for the policies nginx can play.
	DataPlane string `yaml:"dataPlane"`
}

// Data planes of Entry.DataPlane.
const (
	DataPlaneSimulator = "simulator"
	DataPlaneNginx     = "nginx"
)

// DataPlanes lists the known data planes.
func DataPlanes() []string { return []string{DataPlaneSimulator, DataPlaneNginx} }

// UsesNginx reports whether the entry's data plane is nginx.
func (e *Entry) UsesNginx() bool { return e.DataPlane == DataPlaneNginx }

// UseDataPlane makes dp the data plane of every entry (`lab up
// --data-plane`), and says which entry's route (from its mesh's objects)
// it cannot play.
func (t *Topology) UseDataPlane(dp string) error {
	if !slices.Contains(DataPlanes(), dp) {
		return fmt.Errorf("data plane %q: want one of %s", dp, strings.Join(DataPlanes(), ", "))
	}
	for i := range t.Entries {
		t.Entries[i].DataPlane = dp
	}
	// Every entry's policy comes from the manifests: CheckRoutes says
	// which one the data plane cannot play.
	_, err := t.CheckRoutes()
	return err
}

// Envoy is the access-log format of the Envoy playing the entry ("" when
// the entry is no Envoy): a gateway's AccessLog, a sidecar entry's app's
// sidecar.
func (t *Topology) Envoy(e *Entry) string {
	if e.Gateway() || e.Workers {
		return e.AccessLog
	}
	if a := t.App(e.SidecarOf); a != nil {
		return a.Sidecar
	}
	return ""
}

// IstioIngressGatewayLabels are the labels Istio's installer gives its
// default ingress gateway's pods (manifests/charts/gateway; the
// istio-ingressgateway of the default and demo profiles), which
// samples/helloworld/helloworld-gateway.yaml's Gateway selects.
func IstioIngressGatewayLabels() map[string]string {
	return map[string]string{"istio": "ingressgateway"}
}

// Gateway reports whether the entry runs its own pods.
func (e *Entry) Gateway() bool { return e.SidecarOf == "" && !e.Workers }

// Pods is how many gateway pods the entry runs (0 for a sidecar).
func (e *Entry) Pods() int {
	switch {
	case !e.Gateway():
		return 0
	case e.Replicas == nil:
		return 1
	}
	return *e.Replicas
}

// applyDefaults fills in namespaces and ports.
func (t *Topology) applyDefaults() {
	for i := range t.Apps {
		a := &t.Apps[i]
		a.Namespace = orDefault(a.Namespace, DefaultNamespace)
		a.Version = orDefault(a.Version, "v1")
		a.Port = a.Port.withDefaults()
	}
	for i := range t.Services {
		s := &t.Services[i]
		s.Namespace = orDefault(s.Namespace, DefaultNamespace)
		if s.Port == 0 {
			s.Port = DefaultPort
		}
	}
	for i := range t.Entries {
		e := &t.Entries[i]
		e.Namespace = orDefault(e.Namespace, DefaultNamespace)
		if e.Gateway() {
			e.Port = e.Port.withDefaults()
			if e.Labels == nil && e.Mesh == meshroute.MeshIstio {
				e.Labels = IstioIngressGatewayLabels()
			}
		}
	}
}

func (p Port) withDefaults() Port {
	if p.Number == 0 {
		p.Number = DefaultPort
	}
	p.Name = orDefault(p.Name, DefaultPortName)
	return p
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// Says is the name the app answers with: AppName, else its Service.
func (a *App) Says() string {
	if a.AppName != "" {
		return a.AppName
	}
	return a.Service
}

// App returns the app with this name, or nil.
func (t *Topology) App(name string) *App {
	for i := range t.Apps {
		if t.Apps[i].Name == name {
			return &t.Apps[i]
		}
	}
	return nil
}

// Entry returns the entry with this name, or nil.
func (t *Topology) Entry(name string) *Entry {
	for i := range t.Entries {
		if t.Entries[i].Name == name {
			return &t.Entries[i]
		}
	}
	return nil
}

// WorkersIn lists the workers entries of cluster.
func (t *Topology) WorkersIn(cluster string) []*Entry {
	var out []*Entry
	for i := range t.Entries {
		if e := &t.Entries[i]; e.Workers && e.Cluster == cluster {
			out = append(out, e)
		}
	}
	return out
}

// SidecarFor returns the sidecar entry riding in app's pods in cluster, or nil.
func (t *Topology) SidecarFor(app, cluster string) *Entry {
	for i := range t.Entries {
		if e := &t.Entries[i]; e.SidecarOf == app && e.Cluster == cluster {
			return e
		}
	}
	return nil
}

// ServiceClusters lists, in topology order, the clusters that get Service s.
func (t *Topology) ServiceClusters(s *Service) []string {
	if len(s.Clusters) > 0 {
		return s.Clusters
	}
	in := map[string]bool{}
	for _, a := range t.Apps {
		if t.SelectedBy(&a, s.Namespace, s.Name) {
			for c := range a.Replicas {
				in[c] = true
			}
		}
	}
	var out []string
	for _, c := range t.Clusters {
		if in[c] {
			out = append(out, c)
		}
	}
	return out
}

// ExpectedPods counts the pods each cluster runs once the lab is up:
// every app's replicas plus every gateway entry's pods.
func (t *Topology) ExpectedPods() map[string]int {
	out := map[string]int{}
	for _, c := range t.Clusters {
		out[c] = 0
	}
	for _, a := range t.Apps {
		for c, n := range a.Replicas {
			out[c] += n
		}
	}
	for _, e := range t.Entries {
		out[e.Cluster] += e.Pods()
	}
	return out
}

// Namespaces lists the namespaces cluster needs, sorted.
func (t *Topology) Namespaces(cluster string) []string {
	set := map[string]bool{}
	for _, a := range t.Apps {
		if _, ok := a.Replicas[cluster]; ok {
			set[a.Namespace] = true
		}
	}
	for i := range t.Services {
		s := &t.Services[i]
		for _, c := range t.ServiceClusters(s) {
			if c == cluster {
				set[s.Namespace] = true
			}
		}
	}
	for _, e := range t.Entries {
		if e.Cluster == cluster {
			set[e.Namespace] = true
		}
	}
	if t.Networks[cluster] != "" {
		set[EastWestGatewayNamespace] = true
	}
	out := make([]string, 0, len(set))
	for ns := range set {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// String is a one-line summary for messages.
func (t *Topology) String() string {
	return fmt.Sprintf("topology %s (%d clusters, %d apps, %d entries)", t.Metadata.Name, len(t.Clusters), len(t.Apps), len(t.Entries))
}

// IstioConfig is istiod's environment as a topology sets it.
type IstioConfig struct {
	// DisableShadowHostSuffix is istiod's DISABLE_SHADOW_HOST_SUFFIX: true
	// (the default since Istio 1.28) sends mirrored copies with the
	// primary's Host; false (the lab's default, Istio 1.27 and before, or
	// compatibilityVersion 1.25-1.27) appends "-shadow" to it.
	DisableShadowHostSuffix bool `yaml:"disableShadowHostSuffix,omitempty"`
}
