package topology

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mesh-verify/mesh-verify/lab/apps"
	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/lab/meshroute"
	"github.com/mesh-verify/mesh-verify/lab/sidecar"
)

// Labels the lab puts on what it creates. The app and version labels are
// the tutorials' own (their Services and Istio subsets select them); the
// lab.mesh-verify.io ones tell the lab daemon which app or entry a pod
// plays, since pod names are generated.
const (
	LabelApp     = "app"
	LabelVersion = "version"
	LabelLabApp  = "lab.mesh-verify.io/app"
	LabelEntry   = "lab.mesh-verify.io/entry"
	// LabelManaged marks every pod the daemon serves; its watch selects it,
	// and kwok leaves the deletion of such a pod to the daemon for its
	// grace period (lab/kwok's stages).
	LabelManaged = kwok.ManagedLabel
	// AnnotationKind records the app kind on the pod template.
	AnnotationKind = "lab.mesh-verify.io/kind"
)

// TerminationGracePeriod is every lab pod's terminationGracePeriodSeconds:
// short, so a scale-down completes in seconds, but long enough for a pod
// to leave the endpoints and drain its requests as on a real cluster
// (lab/README.md, "Pod lifecycle").
const TerminationGracePeriod = 3

// NodeName is the simulated node of every cluster.
const NodeName = "kwok-node-0"

// Node is the kwok node each cluster schedules its pods on. kwok's
// controller runs with --manage-all-nodes, but the annotation is the
// documented marker and keeps working if that ever changes.
func Node() *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": NodeName},
		},
		Status: corev1.NodeStatus{Allocatable: capacity, Capacity: capacity},
	}
}

// Deployments renders the Deployments of cluster: the apps of lab.yaml
// that list it in replicas and the gateway entries placed in it.
func (t *Topology) Deployments(cluster string) []*appsv1.Deployment {
	var out []*appsv1.Deployment
	for _, a := range t.Apps {
		n, ok := a.Replicas[cluster]
		if !ok || a.fromManifests() {
			continue // the manifests' own: InjectedDeployments
		}
		labels := map[string]string{LabelApp: a.Service, LabelVersion: a.Version, LabelLabApp: a.Name, LabelManaged: "true"}
		for k, v := range a.Labels {
			labels[k] = v // validate keeps them off the lab's own keys
		}
		if n := t.Networks[cluster]; n != "" {
			labels[NetworkLabel] = n // as Istio's injector labels a pod
		}
		d := deployment(a.Namespace, a.Name, n, labels, a.Kind, a.Port, []corev1.EnvVar{{Name: "VERSION", Value: a.Version}})
		a.decorate(&d.Spec.Template)
		out = append(out, d)
	}
	for _, e := range t.Entries {
		if e.Cluster != cluster || !e.Gateway() {
			continue
		}
		labels := e.podLabels()
		labels[LabelManaged] = "true"
		if n := t.Networks[cluster]; n != "" {
			labels[NetworkLabel] = n
		}
		d := deployment(e.Namespace, e.Name, e.Pods(), labels, "mesh-entry", e.Port, nil)
		if e.Mesh == meshroute.MeshKuma {
			// A Kuma entry is a delegated gateway (a gateway the user runs,
			// joined to the mesh): Kuma marks its pod so and gives it a
			// sidecar like any other, whose outbound traffic the
			// TrafficRoute or MeshHTTPRoute routes. Kuma 3.0 keeps only this
			// gateway shape; a built-in MeshGateway would route by
			// MeshHTTPRoutes targeting the gateway instead, and answer 404
			// without one.
			d.Spec.Template.Annotations[kumaGatewayAnnotation] = "enabled"
		}
		out = append(out, d)
	}
	return out
}

// podLabels are a gateway entry's pod labels but the lab's managed mark:
// its own (validate keeps them off the lab's keys) and the lab's.
func (e *Entry) podLabels() map[string]string {
	labels := map[string]string{}
	for k, v := range e.Labels {
		labels[k] = v
	}
	labels[LabelApp] = e.Name
	labels[LabelEntry] = e.Name
	return labels
}

func deployment(ns, name string, replicas int, labels map[string]string, kind string, port Port, env []corev1.EnvVar) *appsv1.Deployment {
	r := int32(replicas)
	selector := map[string]string{}
	for k, v := range labels {
		if k != LabelManaged {
			selector[k] = v
		}
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &r,
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      labels,
					Annotations: map[string]string{AnnotationKind: kind, "kubectl.kubernetes.io/default-container": name},
				},
				Spec: corev1.PodSpec{
					// The node has no taint, so no toleration is needed;
					// the selector keeps pods on the simulated node.
					NodeSelector:                  map[string]string{"type": "kwok"},
					TerminationGracePeriodSeconds: new(int64(TerminationGracePeriod)),
					Containers: []corev1.Container{{
						Name:  name,
						Image: fmt.Sprintf("lab.mesh-verify.io/%s:%s", kind, "latest"),
						Ports: []corev1.ContainerPort{{Name: port.Name, ContainerPort: port.Number, Protocol: corev1.ProtocolTCP}},
						Env:   env,
					}},
				},
			},
		},
	}
}

// decorate adds what the real app's pods have beyond one container: the
// mesh's injected sidecar container with its annotations, and the
// kubelet probes of rebel-base's manifest (which lab/apps plays).
func (a *App) decorate(pt *corev1.PodTemplateSpec) {
	if a.Kind == apps.KindRebelBase {
		probe := func(period int32) *corev1.Probe {
			return &corev1.Probe{PeriodSeconds: period, ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(a.Port.Number)}}}
		}
		c := &pt.Spec.Containers[0]
		if c.LivenessProbe == nil && c.ReadinessProbe == nil { // a manifest's own probes stay
			c.LivenessProbe, c.ReadinessProbe = probe(1), probe(10)
		}
	}
	switch a.Sidecar {
	case sidecar.Istio:
		// What Istio's injector sets: kubectl logs and exec default to the
		// app, and Prometheus scrapes the agent's merged metrics.
		pt.Annotations["kubectl.kubernetes.io/default-logs-container"] = pt.Spec.Containers[0].Name
		pt.Annotations["prometheus.io/scrape"] = "true"
		pt.Annotations["prometheus.io/port"] = "15020"
		pt.Annotations["prometheus.io/path"] = sidecar.MetricsPath(sidecar.Istio)
		pt.Annotations["sidecar.istio.io/status"] = `{"containers":["istio-proxy"]}`
		pt.Labels["security.istio.io/tlsMode"] = "istio"
		pt.Labels["service.istio.io/canonical-name"] = a.Service
		pt.Labels["service.istio.io/canonical-revision"] = a.Version
		pt.Spec.Containers = append(pt.Spec.Containers, corev1.Container{
			Name: sidecar.Container(sidecar.Istio), Image: "docker.io/istio/proxyv2:1.24.0",
			Ports: []corev1.ContainerPort{{Name: "http-envoy-prom", ContainerPort: 15090, Protocol: corev1.ProtocolTCP}},
		})
	case sidecar.Kuma:
		pt.Annotations["kuma.io/sidecar-injected"] = "true"
		pt.Annotations["prometheus.metrics.kuma.io/port"] = "5670"
		pt.Annotations["prometheus.metrics.kuma.io/path"] = sidecar.MetricsPath(sidecar.Kuma)
		pt.Spec.Containers = append(pt.Spec.Containers, corev1.Container{
			Name: sidecar.Container(sidecar.Kuma), Image: "docker.io/kumahq/kuma-dp:2.4.0",
		})
	}
}

// ServiceObjects are the Services of cluster: declared app Services
// (the manifests' as they give them) and the gateway entries' Services.
func (t *Topology) ServiceObjects(cluster string) []*corev1.Service {
	return t.serviceObjects(cluster, true)
}

// LabServiceObjects are the Services of cluster the lab renders: those of
// ServiceObjects but the manifests' own, which go with their files.
func (t *Topology) LabServiceObjects(cluster string) []*corev1.Service {
	return t.serviceObjects(cluster, false)
}

func (t *Topology) serviceObjects(cluster string, manifests bool) []*corev1.Service {
	var out []*corev1.Service
	for i := range t.Services {
		s := &t.Services[i]
		in := false
		for _, c := range t.ServiceClusters(s) {
			in = in || c == cluster
		}
		if !in {
			continue
		}
		if s.FromManifests() {
			if manifests {
				out = append(out, s.from[cluster].DeepCopy())
			}
			continue
		}
		portName := DefaultPortName
		for _, a := range t.Apps {
			if t.SelectedBy(&a, s.Namespace, s.Name) {
				portName = a.Port.Name
				break
			}
		}
		labels := map[string]string{LabelApp: s.Name}
		for k, v := range s.Labels {
			labels[k] = v
		}
		selector := map[string]string{LabelApp: s.Name}
		if len(s.Selector) > 0 {
			selector = s.Selector
		}
		out = append(out, service(s.Namespace, s.Name, labels, s.Annotations, selector, s.Port, portName))
	}
	for _, e := range t.Entries {
		if e.Cluster != cluster || !e.Gateway() {
			continue
		}
		out = append(out, service(e.Namespace, e.Service, map[string]string{LabelApp: e.Service}, nil,
			map[string]string{LabelEntry: e.Name}, e.Port.Number, e.Port.Name))
	}
	if n := t.Networks[cluster]; n != "" {
		out = append(out, eastWestGateway(n))
	}
	return out
}

// Istio's multi-network objects (Topology.Networks).
const (
	// NetworkLabel is Istio's label of a network's gateway Service and
	// of its pods.
	NetworkLabel = "topology.istio.io/network"
	// EastWestGatewayNamespace and EastWestGatewayName are where
	// gen-eastwest-gateway.sh installs the gateway; EastWestGatewayPort
	// is its mTLS port, the upstream a remote sidecar's log names.
	EastWestGatewayNamespace = "istio-system"
	EastWestGatewayName      = "istio-eastwestgateway"
	EastWestGatewayPort      = 15443
)

// eastWestGateway is the Service gen-eastwest-gateway.sh --network N
// installs (its LoadBalancer type aside: kwok has no load balancer, so
// remote sidecars name its ClusterIP). It selects no lab pod: the lab's
// data plane plays the hop through it.
func eastWestGateway(network string) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: EastWestGatewayName, Namespace: EastWestGatewayNamespace,
			Labels: map[string]string{"app": EastWestGatewayName, "istio": "eastwestgateway", NetworkLabel: network}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": EastWestGatewayName, "istio": "eastwestgateway"},
			Ports: []corev1.ServicePort{{
				Name: "tls", Port: EastWestGatewayPort, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromInt32(EastWestGatewayPort),
			}},
		},
	}
}

func service(ns, name string, labels, annotations, selector map[string]string, port int32, targetPort string) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selector,
			Ports: []corev1.ServicePort{{
				Name: "http", Port: port, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromString(targetPort),
			}},
		},
	}
}
