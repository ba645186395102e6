package topology

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mesh-verify/mesh-verify/lab/apps"
	"github.com/mesh-verify/mesh-verify/lab/meshroute"
	"github.com/mesh-verify/mesh-verify/lab/sidecar"
)

// The tutorials' workloads (a topology directory's Deployments and
// Services) become the lab's apps and Services here: the lab plays each
// Deployment's pods with the lab/apps kind its image names, the way a
// sidecar injector rewrites a pod (lab/README.md, "Workloads").

// imageKinds maps a tutorial image's repository (without registry and
// tag) to the lab/apps kind that plays it. The lab's only nginx app is
// Cilium's rebel-base: nginx serving a ConfigMap's JSON as index.html
// (rebelBaseCluster reads it).
var imageKinds = map[string]string{
	"istio/examples-helloworld-v1":             apps.KindHelloworld,
	"istio/examples-helloworld-v2":             apps.KindHelloworld,
	"release/examples-helloworld-v1":           apps.KindHelloworld, // registry.istio.io, samples since 1.22
	"release/examples-helloworld-v2":           apps.KindHelloworld,
	"piomin/callme-service":                    apps.KindCallme,
	"piomin/caller-service":                    apps.KindCaller,
	"piomin/sample-spring-kotlin-microservice": apps.KindPersons,
	"istio/app":             apps.KindEcho,
	"istio-testing/app":     apps.KindEcho,
	"kumahq/kuma-universal": apps.KindTestServer,
	"nginx":                 apps.KindRebelBase,
	"library/nginx":         apps.KindRebelBase,
}

// ImageKind is the lab/apps kind that plays image ("" when none does).
func ImageKind(image string) string {
	repo := image
	if i := strings.LastIndex(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	// A registry is the first path element when it has a dot or a port.
	if first, rest, ok := strings.Cut(repo, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		repo = rest
	}
	return imageKinds[repo]
}

// Injection labels and annotations the meshes read.
const (
	istioInjectionNS = "istio-injection"
	istioInject      = "sidecar.istio.io/inject"
	kumaInjection    = "kuma.io/sidecar-injection"
	// kumaGatewayAnnotation marks a delegated gateway's pod (Kuma's
	// "Delegated gateways": kuma.io/gateway: enabled).
	kumaGatewayAnnotation = "kuma.io/gateway"
	callerCalls           = "callme-service:8080"
	unsupportedPrefix     = "not modelled by the lab: "
)

// workloadSource is where an app or Service of the manifests was read.
type workloadSource struct {
	File string
	Line int
	What string // "Deployment sample/helloworld-v1"
}

func (w *workloadSource) String() string { return fmt.Sprintf("%s:%d: %s", w.File, w.Line, w.What) }

// loadWorkloads turns the manifests' Deployments and Services into apps
// and Services. A Deployment or Service of the same namespace and name in
// several clusters is one app or Service present in each. It refuses what
// the lab cannot play, naming the file and the object, and lists in
// t.WorkloadNotes the fields it reads but does not play.
func (t *Topology) loadWorkloads() error {
	var errs []error
	nsLabels := map[string]map[string]map[string]string{} // cluster → namespace → labels
	for _, mf := range t.Manifests {
		for _, o := range mf.Objects {
			if o.Object.GetKind() == "Namespace" {
				if nsLabels[mf.Cluster] == nil {
					nsLabels[mf.Cluster] = map[string]map[string]string{}
				}
				nsLabels[mf.Cluster][o.Object.GetName()] = o.Object.GetLabels()
			}
		}
	}
	// What the pods mount: rebel-base answers its ConfigMap's JSON.
	configMaps := map[string]map[string]*corev1.ConfigMap{} // cluster → namespace/name → ConfigMap
	errs = append(errs, eachObject(t, "ConfigMap", func(cluster string, _ meshroute.Manifest, cm *corev1.ConfigMap) error {
		if configMaps[cluster] == nil {
			configMaps[cluster] = map[string]*corev1.ConfigMap{}
		}
		configMaps[cluster][cm.Namespace+"/"+cm.Name] = cm
		return nil
	})...)
	// Services first: a Deployment belongs to the Service selecting its pods.
	errs = append(errs, eachObject(t, "Service", func(cluster string, o meshroute.Manifest, s *corev1.Service) error {
		return t.addService(cluster, o, s)
	})...)
	errs = append(errs, eachObject(t, "Deployment", func(cluster string, o meshroute.Manifest, d *appsv1.Deployment) error {
		return t.addDeployment(cluster, o, d, nsLabels[cluster][d.Namespace], configMaps[cluster])
	})...)
	return errors.Join(errs...)
}

// eachObject decodes the manifests' objects of kind into T strictly (an
// unknown field is an error), defaults their namespace as kubectl does,
// and hands each to add; the errors name the file, line and object.
func eachObject[T any, P interface {
	*T
	GetNamespace() string
	SetNamespace(string)
}](t *Topology, kind string, add func(cluster string, o meshroute.Manifest, obj P) error) []error {
	var errs []error
	for _, mf := range t.Manifests {
		for _, o := range mf.Objects {
			if o.Object.GetKind() != kind {
				continue
			}
			obj := P(new(T))
			err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object.Object, obj, true)
			if err == nil {
				if obj.GetNamespace() == "" {
					obj.SetNamespace(DefaultNamespace)
				}
				err = add(mf.Cluster, o, obj)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", o.Where(), err))
			}
		}
	}
	return errs
}

func (t *Topology) addService(cluster string, o meshroute.Manifest, s *corev1.Service) error {
	switch {
	case len(s.Spec.Ports) == 0:
		return errors.New("spec.ports: the lab serves a Service's first port; none is declared")
	case s.Spec.Type != "" && s.Spec.Type != corev1.ServiceTypeClusterIP:
		return fmt.Errorf("spec.type %s: the lab's clusters have no load balancer or node ports; use ClusterIP (kubectl port-forward reaches it)", s.Spec.Type)
	case len(s.Spec.Selector) == 0:
		return errors.New("spec.selector: the lab serves Services that select pods; a Service without a selector has no endpoints here")
	}
	src := &workloadSource{File: o.File, Line: o.Line, What: fmt.Sprintf("Service %s/%s", s.Namespace, s.Name)}
	if len(s.Spec.Ports) > 1 {
		t.WorkloadNotes = append(t.WorkloadNotes, fmt.Sprintf("%s: %sports after the first (%s)", src, unsupportedPrefix, s.Spec.Ports[1].Name))
	}
	have := t.ServiceByName(s.Namespace, s.Name)
	if have == nil {
		t.Services = append(t.Services, Service{Name: s.Name, Namespace: s.Namespace, Port: s.Spec.Ports[0].Port,
			Annotations: s.Annotations, Labels: s.Labels, Selector: s.Spec.Selector, source: src})
		have = &t.Services[len(t.Services)-1]
	}
	switch {
	case have.source == nil:
		return fmt.Errorf("Service %s/%s is declared in %s too: declare it in one place", s.Namespace, s.Name, LabFile)
	case have.Port != s.Spec.Ports[0].Port:
		return fmt.Errorf("spec.ports[0].port %d: %s gives this Service port %d", s.Spec.Ports[0].Port, have.source, have.Port)
	case !maps.Equal(have.Selector, s.Spec.Selector):
		return fmt.Errorf("spec.selector %v: %s selects %v; one Service selects the same pods in every cluster", s.Spec.Selector, have.source, have.Selector)
	case slices.Contains(have.Clusters, cluster):
		return fmt.Errorf("Service %s/%s is defined twice in cluster %s (also %s)", s.Namespace, s.Name, cluster, have.source)
	}
	have.Clusters = append(have.Clusters, cluster)
	if have.from == nil {
		have.from = map[string]*corev1.Service{}
	}
	s.TypeMeta.APIVersion, s.TypeMeta.Kind = "v1", "Service"
	have.from[cluster] = s
	return nil
}

func (t *Topology) addDeployment(cluster string, o meshroute.Manifest, d *appsv1.Deployment, nsLabels map[string]string, configMaps map[string]*corev1.ConfigMap) error {
	src := &workloadSource{File: o.File, Line: o.Line, What: fmt.Sprintf("Deployment %s/%s", d.Namespace, d.Name)}
	pt := &d.Spec.Template
	if len(pt.Spec.Containers) == 0 {
		return errors.New("spec.template.spec.containers: required")
	}
	c := pt.Spec.Containers[0]
	kind := pt.Annotations[AnnotationKind]
	if kind == "" {
		kind = ImageKind(c.Image)
	}
	if kind == "" {
		return fmt.Errorf("spec.template.spec.containers[0].image %s: no lab app plays this image (known: %s); name the kind with the pod template annotation %s (one of %s)",
			c.Image, strings.Join(slices.Sorted(maps.Keys(imageKinds)), ", "), AnnotationKind, strings.Join(AppKinds(), ", "))
	}
	replicas := 1
	if d.Spec.Replicas != nil {
		replicas = int(*d.Spec.Replicas)
	}
	flavor, err := injected(nsLabels, pt)
	if err != nil {
		return err
	}
	// The Service whose selector picks these pods, in the namespace.
	var svc *Service
	for i := range t.Services {
		if s := &t.Services[i]; s.Namespace == d.Namespace && len(s.Selector) > 0 && labels.SelectorFromSet(s.Selector).Matches(labels.Set(pt.Labels)) {
			svc = s
			break
		}
	}
	if svc == nil {
		return fmt.Errorf("spec.template.metadata.labels %v: no Service of the manifests in namespace %s selects these pods; the lab serves apps behind a Service", pt.Labels, d.Namespace)
	}
	port, err := servedPort(c, svc, cluster)
	if err != nil {
		return err
	}
	var clusterName, servedVolume string
	if kind == apps.KindRebelBase {
		if clusterName, servedVolume, err = rebelBaseCluster(pt, d.Namespace, configMaps); err != nil {
			return err
		}
	}
	// What the app says its version is: the VERSION variable the
	// tutorial's Spring apps read, else the pods' version label.
	version := pt.Labels[LabelVersion]
	for _, e := range c.Env {
		if e.Name == "VERSION" && e.Value != "" {
			version = e.Value
		}
	}
	if version == "" {
		version = "v1"
	}
	for _, n := range unmodelled(pt, servedVolume) {
		t.WorkloadNotes = append(t.WorkloadNotes, fmt.Sprintf("%s: %s%s", src, unsupportedPrefix, n))
	}
	a := t.App(d.Name)
	if a == nil {
		t.Apps = append(t.Apps, App{Name: d.Name, Kind: kind, Service: svc.Name, Version: version, Namespace: d.Namespace,
			Port: port, Sidecar: flavor,
			Labels: pt.Labels, Replicas: map[string]int{}, source: src})
		a = &t.Apps[len(t.Apps)-1]
		if kind == apps.KindCaller {
			// The real caller-service calls this authority, hard-coded.
			a.Calls = callerCalls
		}
	}
	switch {
	case a.source == nil:
		return fmt.Errorf("app %s is declared in %s too: declare it in one place", d.Name, LabFile)
	case a.Namespace != d.Namespace:
		return fmt.Errorf("app %s is in namespace %s in %s: one name, one namespace", d.Name, a.Namespace, a.source)
	case a.Kind != kind || a.Sidecar != flavor || a.Version != version || a.Service != svc.Name:
		return fmt.Errorf("kind %s, sidecar %q, version %s, Service %s: %s has kind %s, sidecar %q, version %s, Service %s; a Deployment of one name is the same app in every cluster",
			kind, flavor, version, svc.Name, a.source, a.Kind, a.Sidecar, a.Version, a.Service)
	case a.Port != port:
		return fmt.Errorf("port %d: %s serves port %d; a Deployment of one name is the same app in every cluster", port.Number, a.source, a.Port.Number)
	}
	if _, dup := a.Replicas[cluster]; dup {
		//lint:ignore ST1005 Deployment is the Kubernetes kind, spelled as in the manifests it names
		return fmt.Errorf("Deployment %s/%s is defined twice in cluster %s (also %s)", d.Namespace, d.Name, cluster, a.source)
	}
	a.Replicas[cluster] = replicas
	if clusterName != "" {
		if a.ClusterNames == nil {
			a.ClusterNames = map[string]string{}
		}
		a.ClusterNames[cluster] = clusterName
	}
	if a.from == nil {
		a.from = map[string]*appsv1.Deployment{}
	}
	d.TypeMeta.APIVersion, d.TypeMeta.Kind = "apps/v1", "Deployment"
	a.from[cluster] = d
	return nil
}

// servedPort is the port the app serves: the first container port, else
// (nginx's manifests declare none) the port the selecting Service sends
// to, as kube-proxy would.
func servedPort(c corev1.Container, svc *Service, cluster string) (Port, error) {
	if len(c.Ports) > 0 {
		return Port{Number: c.Ports[0].ContainerPort, Name: c.Ports[0].Name}, nil
	}
	sp := svc.Port
	if s := svc.from[cluster]; s != nil {
		switch tp := s.Spec.Ports[0].TargetPort; {
		case tp.Type == intstr.Int && tp.IntVal != 0:
			sp = tp.IntVal
		case tp.Type == intstr.String && tp.StrVal != "":
			return Port{}, fmt.Errorf("spec.template.spec.containers[0].ports: none is declared, and %s targets the named port %q", svc.source, tp.StrVal)
		}
	}
	return Port{Number: sp}, nil
}

// nginxRoot is where nginx (the rebel-base image) serves files from.
const nginxRoot = "/usr/share/nginx/html"

// rebelBaseCluster is the "Cluster" value rebel-base answers in this
// cluster, read where nginx reads it: the index.html of the ConfigMap
// volume mounted at nginx's root, {"Galaxy": ..., "Cluster": "Cluster-1"}
// in Cilium's example. It also names that volume (which the lab plays).
// A ConfigMap changed in a running lab is not read again: the daemon
// serves the manifests as applied.
func rebelBaseCluster(pt *corev1.PodTemplateSpec, ns string, configMaps map[string]*corev1.ConfigMap) (string, string, error) {
	c := pt.Spec.Containers[0]
	var mount string
	for _, m := range c.VolumeMounts {
		if strings.TrimSuffix(m.MountPath, "/") == nginxRoot {
			mount = m.Name
		}
	}
	if mount == "" {
		return "", "", fmt.Errorf("spec.template.spec.containers[0].volumeMounts: nginx plays rebel-base, which answers the index.html of a ConfigMap mounted at %s; none is mounted there", nginxRoot)
	}
	i := slices.IndexFunc(pt.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == mount })
	if i < 0 || pt.Spec.Volumes[i].ConfigMap == nil {
		return "", "", fmt.Errorf("spec.template.spec.volumes %s: the volume nginx serves at %s must be a configMap volume (rebel-base answers its index.html)", mount, nginxRoot)
	}
	src := pt.Spec.Volumes[i].ConfigMap
	key := "index.html"
	if len(src.Items) > 0 {
		j := slices.IndexFunc(src.Items, func(it corev1.KeyToPath) bool { return it.Path == "index.html" })
		if j < 0 {
			return "", "", fmt.Errorf("spec.template.spec.volumes[%d].configMap.items: no item has path index.html, the file nginx answers", i)
		}
		key = src.Items[j].Key
	}
	cm := configMaps[ns+"/"+src.Name]
	if cm == nil {
		return "", "", fmt.Errorf("spec.template.spec.volumes[%d].configMap: ConfigMap %s/%s is not in this cluster's manifests; the lab reads rebel-base's answer from it", i, ns, src.Name)
	}
	body, ok := cm.Data[key]
	if !ok {
		return "", "", fmt.Errorf("ConfigMap %s/%s has no data key %q (volume %s's index.html)", ns, src.Name, key, mount)
	}
	var answer struct {
		Cluster string `json:"Cluster"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || answer.Cluster == "" {
		return "", "", fmt.Errorf("ConfigMap %s/%s data %s %q: rebel-base answers a JSON object with a \"Cluster\" string, like {\"Galaxy\": \"Alderaan\", \"Cluster\": \"Cluster-1\"}", ns, src.Name, key, body)
	}
	return answer.Cluster, mount, nil
}

// injected says which mesh's sidecar the pods get, as the meshes'
// injectors decide: the namespace's istio-injection=enabled or
// kuma.io/sidecar-injection=enabled, overridden by the pod's
// sidecar.istio.io/inject or kuma.io/sidecar-injection.
func injected(nsLabels map[string]string, pt *corev1.PodTemplateSpec) (string, error) {
	flavor, err := InjectedSidecar(nsLabels, pt.Labels, pt.Annotations)
	if err != nil {
		return "", fmt.Errorf("spec.template %w", err)
	}
	return flavor, nil
}

// InjectedSidecar is injected for any pod (a Deployment's template, a
// mesh-verify worker pod): sidecar.Istio, sidecar.Kuma or "" for none.
func InjectedSidecar(nsLabels, podLabels, podAnnotations map[string]string) (string, error) {
	flavor := ""
	switch {
	case nsLabels[istioInjectionNS] == "enabled":
		flavor = sidecar.Istio
	case nsLabels[kumaInjection] == "enabled":
		flavor = sidecar.Kuma
	}
	pod := func(k string) string {
		if v, ok := podLabels[k]; ok {
			return v
		}
		return podAnnotations[k]
	}
	switch v := pod(istioInject); v {
	case "":
	case "true":
		flavor = sidecar.Istio
	case "false":
		if flavor == sidecar.Istio {
			flavor = ""
		}
	default:
		return "", fmt.Errorf("%s %q: want \"true\" or \"false\"", istioInject, v)
	}
	switch v := pod(kumaInjection); v {
	case "":
	case "enabled", "true":
		flavor = sidecar.Kuma
	case "disabled", "false":
		if flavor == sidecar.Kuma {
			flavor = ""
		}
	default:
		return "", fmt.Errorf("%s %q: want enabled or disabled", kumaInjection, v)
	}
	return flavor, nil
}

// unmodelled lists the pod template's fields the lab reads but does not
// play: its app serves the kind's behaviour whatever they say.
func unmodelled(pt *corev1.PodTemplateSpec, servedVolume string) []string {
	var out []string
	for i, c := range pt.Spec.Containers {
		p := fmt.Sprintf("spec.template.spec.containers[%d]", i)
		if i > 0 {
			out = append(out, p+" (only the first container is played)")
			continue
		}
		if len(c.Command) > 0 || len(c.Args) > 0 {
			out = append(out, p+".command/args")
		}
		for j, e := range c.Env {
			if e.Name != "VERSION" { // the version the app says it is
				out = append(out, fmt.Sprintf("%s.env[%d] (%s)", p, j, e.Name))
			}
		}
		if len(c.EnvFrom) > 0 {
			out = append(out, p+".envFrom")
		}
		for j, m := range c.VolumeMounts {
			if m.Name != servedVolume {
				out = append(out, fmt.Sprintf("%s.volumeMounts[%d] (%s)", p, j, m.Name))
			}
		}
		if len(c.Ports) > 1 {
			out = append(out, p+".ports[1:]")
		}
	}
	for i, v := range pt.Spec.Volumes {
		if v.Name != servedVolume {
			out = append(out, fmt.Sprintf("spec.template.spec.volumes[%d] (%s)", i, v.Name))
		}
	}
	if len(pt.Spec.InitContainers) > 0 {
		out = append(out, "spec.template.spec.initContainers")
	}
	return out
}

// fromManifests reports whether the app's Deployments are the manifests'.
func (a *App) fromManifests() bool { return a.source != nil }

// FromManifests reports whether the Service is the manifests' own.
func (s *Service) FromManifests() bool { return s.source != nil }

// SelectedBy reports whether Service ns/name (its selector, by default
// app=<name>) picks the app's pods: the apps a mesh route that names the
// Service reaches (Flagger's <apex>-primary and <apex>-canary).
func (t *Topology) SelectedBy(a *App, ns, name string) bool {
	if a.Namespace != ns {
		return false
	}
	sel := map[string]string{LabelApp: name}
	if s := t.ServiceByName(ns, name); s != nil && len(s.Selector) > 0 {
		sel = s.Selector
	}
	lbls := a.podLabels()
	for k, v := range sel {
		if lbls[k] != v {
			return false
		}
	}
	return true
}

// podLabels are the labels the app's pods carry as its Deployment gives
// them (the lab's own aside).
func (a *App) podLabels() map[string]string {
	if a.fromManifests() {
		return a.Labels
	}
	out := map[string]string{LabelApp: a.Service, LabelVersion: a.Version}
	maps.Copy(out, a.Labels)
	return out
}

// injectDeployment is the manifest's Deployment as the lab applies it in
// cluster: the tutorial's object with what the lab adds to serve it, as
// a mutating webhook would — its labels on the pods (which pods the
// daemon serves and as which app), the kind on the template, the mesh's
// sidecar container and annotations. Its selector, containers and every
// other field stay the tutorial's.
func (t *Topology) injectDeployment(a *App, cluster string) *appsv1.Deployment {
	d := a.from[cluster].DeepCopy()
	d.Labels = withKeys(d.Labels, map[string]string{LabelManaged: "true"})
	pt := &d.Spec.Template
	add := map[string]string{LabelLabApp: a.Name, LabelManaged: "true"}
	if n := t.Networks[cluster]; n != "" {
		add[NetworkLabel] = n
	}
	pt.Labels = withKeys(pt.Labels, add)
	pt.Annotations = withKeys(pt.Annotations, map[string]string{AnnotationKind: a.Kind, "kubectl.kubernetes.io/default-container": pt.Spec.Containers[0].Name})
	if pt.Spec.NodeSelector == nil {
		pt.Spec.NodeSelector = map[string]string{"type": "kwok"}
	}
	if pt.Spec.TerminationGracePeriodSeconds == nil || *pt.Spec.TerminationGracePeriodSeconds > TerminationGracePeriod {
		pt.Spec.TerminationGracePeriodSeconds = new(int64(TerminationGracePeriod))
	}
	a.decorate(pt)
	return d
}

func withKeys(m, add map[string]string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, add)
	return out
}

// InjectedDeployments are the manifests' Deployments of cluster as the
// lab applies them (injectDeployment), in topology order.
func (t *Topology) InjectedDeployments(cluster string) []*appsv1.Deployment {
	var out []*appsv1.Deployment
	for i := range t.Apps {
		if a := &t.Apps[i]; a.fromManifests() && a.from[cluster] != nil {
			out = append(out, t.injectDeployment(a, cluster))
		}
	}
	return out
}
