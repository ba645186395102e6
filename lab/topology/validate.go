package topology

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mesh-verify/mesh-verify/lab/apps"
	"github.com/mesh-verify/mesh-verify/lab/envoylog"
	"github.com/mesh-verify/mesh-verify/lab/meshroute"
	"github.com/mesh-verify/mesh-verify/lab/sidecar"
)

// Kubernetes name rules: clusters, namespaces, Services and Deployments
// are DNS-1123 labels (Services and Deployments must also start with a
// letter to be safe everywhere, DNS-1035).
var (
	dnsLabel    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1035     = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	ianaSvcName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	authority   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:[0-9]{1,5})?$`)
)

// AppKinds are the lab/apps kinds an app may be.
func AppKinds() []string { return apps.Kinds() }

type checker struct{ issues []issue }

func (c *checker) add(path []any, format string, args ...any) {
	c.issues = append(c.issues, issue{path: slices.Clone(path), msg: fmt.Sprintf(format, args...)})
}

func at(base []any, more ...any) []any { return append(slices.Clone(base), more...) }

// Validate checks a topology built in code (Parse validates what it
// returns); errors carry the field but no line.
func (t *Topology) Validate() error {
	t.applyDefaults()
	var errs Errors
	for _, i := range t.check() {
		errs = append(errs, &Error{File: t.File, Field: i.field(), Msg: i.msg})
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

func (t *Topology) check() []issue {
	c := &checker{}
	if t.APIVersion != APIVersion {
		c.add([]any{"apiVersion"}, "want %s, got %q", APIVersion, t.APIVersion)
	}
	if t.Kind != Kind {
		c.add([]any{"kind"}, "want %s, got %q", Kind, t.Kind)
	}
	if !dnsLabel.MatchString(t.Metadata.Name) {
		c.add([]any{"metadata", "name"}, "want a name of lowercase letters, digits and '-', like skupper-1, got %q", t.Metadata.Name)
	}
	t.checkClusters(c)
	t.checkServices(c)
	t.checkApps(c)
	t.checkEntries(c)
	t.checkNetworks(c)
	return c.issues
}

func (t *Topology) declared(cluster string) bool { return slices.Contains(t.Clusters, cluster) }

func (t *Topology) unknownCluster(name string) string {
	return fmt.Sprintf("unknown cluster %q (declared: %s)", name, strings.Join(t.Clusters, ", "))
}

func (t *Topology) checkClusters(c *checker) {
	if len(t.Clusters) == 0 {
		c.add([]any{"clusters"}, "required: the clusters to create, like [c1, c2, c3]")
	}
	seen := map[string]bool{}
	for i, cl := range t.Clusters {
		p := []any{"clusters", i}
		switch {
		case !dnsLabel.MatchString(cl) || len(cl) > 20:
			// kwokctl names processes and directories after it; keep it short.
			c.add(p, "invalid cluster name %q: want up to 20 lowercase letters, digits and '-', like c1", cl)
		case seen[cl]:
			c.add(p, "duplicate cluster %q", cl)
		}
		seen[cl] = true
	}
}

func checkName(c *checker, p []any, what, name string) {
	switch {
	case name == "":
		c.add(p, "required: the %s name", what)
	case !dns1035.MatchString(name) || len(name) > 63:
		c.add(p, "invalid %s name %q: want up to 63 lowercase letters, digits and '-', starting with a letter", what, name)
	}
}

func checkNamespace(c *checker, p []any, ns string) {
	if !dnsLabel.MatchString(ns) || len(ns) > 63 {
		c.add(p, "invalid namespace %q: want up to 63 lowercase letters, digits and '-'", ns)
	}
}

func checkPort(c *checker, p []any, port Port) {
	if port.Number < 1 || port.Number > 65535 {
		c.add(at(p, "number"), "want a port in 1..65535, got %d", port.Number)
	}
	if len(port.Name) > 15 || !ianaSvcName.MatchString(port.Name) || !strings.ContainsAny(port.Name, "abcdefghijklmnopqrstuvwxyz") {
		c.add(at(p, "name"), "invalid port name %q: want up to 15 lowercase letters, digits and '-', with a letter", port.Name)
	}
}

// ServiceByName returns the declared Service ns/name, or nil.
func (t *Topology) ServiceByName(ns, name string) *Service {
	for i := range t.Services {
		if s := &t.Services[i]; s.Name == name && s.Namespace == ns {
			return s
		}
	}
	return nil
}

func (t *Topology) checkServices(c *checker) {
	seen := map[string]int{}
	for i := range t.Services {
		s := &t.Services[i]
		p := []any{"services", i}
		checkName(c, at(p, "name"), "Service", s.Name)
		checkNamespace(c, at(p, "namespace"), s.Namespace)
		key := s.Namespace + "/" + s.Name
		if j, dup := seen[key]; dup {
			c.add(at(p, "name"), "duplicate Service %s (also services[%d])", key, j)
		}
		seen[key] = i
		if s.Port < 1 || s.Port > 65535 {
			c.add(at(p, "port"), "want a port in 1..65535, got %d", s.Port)
		}
		for j, cl := range s.Clusters {
			if !t.declared(cl) {
				c.add(at(p, "clusters", j), "%s", t.unknownCluster(cl))
			}
		}
		used := false
		var portNames []string
		for _, a := range t.Apps {
			if t.SelectedBy(&a, s.Namespace, s.Name) {
				used = true
				if !s.FromManifests() && !slices.Contains(portNames, a.Port.Name) {
					portNames = append(portNames, a.Port.Name)
				}
			}
		}
		// A selector may leave out apps labelled app=<its name>: Flagger's
		// apex Service selects the primary's pods, not the canary's that
		// carry the apex's name. One that selects nothing is refused below.
		switch {
		case !used:
			c.add(at(p, "name"), "Service %s selects no app's pods (no app names it as its service, nor carries the labels of its selector): it would select no pod", key)
		case len(portNames) > 1:
			c.add(at(p, "name"), "the apps of Service %s name their port differently (%s): the Service targets one port name", key, strings.Join(portNames, ", "))
		}
	}
}

func (t *Topology) checkApps(c *checker) {
	if len(t.Apps) == 0 {
		c.add([]any{"apps"}, "required: at least one app")
	}
	seen := map[string]int{}
	for i := range t.Apps {
		a := &t.Apps[i]
		p := []any{"apps", i}
		checkName(c, at(p, "name"), "app (Deployment)", a.Name)
		if a.AppName != "" {
			checkName(c, at(p, "appName"), "app", a.AppName)
		}
		for _, k := range slices.Sorted(maps.Keys(a.Labels)) {
			if a.fromManifests() && !strings.HasPrefix(k, "lab.mesh-verify.io/") {
				continue // the tutorial's own labels, app and version included
			}
			if k == LabelApp || k == LabelVersion || strings.HasPrefix(k, "lab.mesh-verify.io/") {
				c.add(at(p, "labels", k), "the lab sets %s itself (service, version and its own labels)", k)
			}
		}
		if j, dup := seen[a.Name]; dup {
			// Names are global, not per namespace: pods are matched to
			// their app by the Deployment name label alone.
			c.add(at(p, "name"), "duplicate app %q (also apps[%d])", a.Name, j)
		}
		seen[a.Name] = i
		if !slices.Contains(AppKinds(), a.Kind) {
			c.add(at(p, "kind"), "unknown kind %q (known: %s)", a.Kind, strings.Join(AppKinds(), ", "))
		}
		checkNamespace(c, at(p, "namespace"), a.Namespace)
		if !dnsLabel.MatchString(a.Version) || len(a.Version) > 63 {
			c.add(at(p, "version"), "invalid version %q: it is a label value, like v1", a.Version)
		}
		if a.fromManifests() && a.Port.Name == "" {
			// The tutorial's Service targets the port by number.
			checkPort(c, at(p, "port"), Port{Number: a.Port.Number, Name: DefaultPortName})
		} else {
			checkPort(c, at(p, "port"), a.Port)
		}
		switch {
		case a.Service == "":
			c.add(at(p, "service"), "required: the Service the pods belong to (declared under services)")
		case t.ServiceByName(a.Namespace, a.Service) == nil:
			c.add(at(p, "service"), "no Service %s/%s is declared under services", a.Namespace, a.Service)
		}
		if len(a.Replicas) == 0 {
			c.add(at(p, "replicas"), "required: replicas per cluster, like {c2: 1, c3: 2}")
		}
		for _, cl := range slices.Sorted(maps.Keys(a.Replicas)) {
			switch n := a.Replicas[cl]; {
			case !t.declared(cl):
				c.add(at(p, "replicas", cl), "%s", t.unknownCluster(cl))
			case n < 0 || n > 20:
				c.add(at(p, "replicas", cl), "want 0..20 replicas, got %d", n)
			}
		}
		if a.Delay < 0 || a.Delay > 10*time.Second {
			c.add(at(p, "delay"), "want a service time in 0..10s, like 50ms, got %v", a.Delay)
		}
		switch {
		case a.Kind == apps.KindCaller && !authority.MatchString(a.Calls):
			c.add(at(p, "calls"), "a caller needs calls: the callee's Service and port it addresses, like callme-service:8080")
		case a.Kind != apps.KindCaller && a.Calls != "":
			c.add(at(p, "calls"), "calls applies to kind caller only")
		}
		t.checkAppIdentity(c, p, a)
		if a.Kind == apps.KindCaller {
			for _, cl := range slices.Sorted(maps.Keys(a.Replicas)) {
				if t.declared(cl) && t.SidecarFor(a.Name, cl) == nil {
					c.add(at(p, "replicas", cl), "caller %s in cluster %s has no sidecar entry (sidecarOf: %s, cluster: %s) to carry its calls", a.Name, cl, a.Name, cl)
				}
			}
		}
	}
}

// checkAppIdentity checks the sidecar, the cluster names and the variant.
func (t *Topology) checkAppIdentity(c *checker, p []any, a *App) {
	if a.Sidecar != "" && !slices.Contains(sidecar.Flavors(), a.Sidecar) {
		c.add(at(p, "sidecar"), "unknown sidecar %q (known: %s)", a.Sidecar, strings.Join(sidecar.Flavors(), ", "))
	}
	switch a.Kind {
	case apps.KindEcho, apps.KindRebelBase:
	default:
		if len(a.ClusterNames) > 0 {
			c.add(at(p, "clusterNames"), "applies to kinds %s and %s only", apps.KindEcho, apps.KindRebelBase)
		}
	}
	for _, cl := range slices.Sorted(maps.Keys(a.ClusterNames)) {
		switch v := a.ClusterNames[cl]; {
		case !t.declared(cl):
			c.add(at(p, "clusterNames", cl), "%s", t.unknownCluster(cl))
		case v == "" || len(v) > 63 || strings.ContainsAny(v, "\"\n\r\t "):
			c.add(at(p, "clusterNames", cl), "want a name of 1..63 characters without quotes or spaces, like Cluster-1, got %q", v)
		}
	}
	if a.Kind == apps.KindRebelBase {
		for _, cl := range slices.Sorted(maps.Keys(a.Replicas)) {
			if _, ok := a.ClusterNames[cl]; !ok && t.declared(cl) {
				c.add(at(p, "clusterNames"), "rebel-base needs the \"Cluster\" value of its ConfigMap in every cluster it runs in: cluster %s has none, like {%s: Cluster-1}", cl, cl)
			}
		}
	}
	switch {
	case a.Variant == "":
	case a.Kind != apps.KindEcho:
		c.add(at(p, "variant"), "variants exist for kind %s only", apps.KindEcho)
	case a.Variant != apps.Echo118:
		c.add(at(p, "variant"), "unknown echo variant %q (known: %q for Istio 1.18 and earlier; leave it out for current releases)", a.Variant, apps.Echo118)
	}
}

func (t *Topology) checkEntries(c *checker) {
	if len(t.Entries) == 0 {
		c.add([]any{"entries"}, "required: at least one entry (the mesh's router, gateway or sidecar)")
	}
	seen := map[string]int{}
	for i := range t.Entries {
		e := &t.Entries[i]
		p := []any{"entries", i}
		checkName(c, at(p, "name"), "entry", e.Name)
		if j, dup := seen[e.Name]; dup {
			c.add(at(p, "name"), "duplicate entry %q (also entries[%d])", e.Name, j)
		}
		seen[e.Name] = i
		if t.App(e.Name) != nil {
			c.add(at(p, "name"), "entry %q has the name of an app; a gateway's Deployment needs its own name", e.Name)
		}
		if !t.declared(e.Cluster) {
			c.add(at(p, "cluster"), "%s", t.unknownCluster(e.Cluster))
		}
		checkNamespace(c, at(p, "namespace"), e.Namespace)
		if !e.Gateway() && len(e.Labels) > 0 {
			c.add(at(p, "labels"), "labels are a gateway entry's pod labels; this entry runs no pod of its own")
		}
		switch {
		case e.Workers:
			t.checkWorkers(c, p, e)
		case e.Gateway():
			t.checkGateway(c, p, e)
		default:
			t.checkSidecar(c, p, e)
		}
		to := t.ServiceByName(e.Namespace, e.To)
		switch {
		case e.To == "":
			c.add(at(p, "to"), "required: the Service whose ready pods, in every cluster, are the backends")
		case to == nil:
			c.add(at(p, "to"), "no Service %s/%s is declared under services", e.Namespace, e.To)
		}
		t.checkMesh(c, p, e)
	}
}

// checkMesh checks an entry routed by its mesh's objects; the route
// itself is checked against the manifests (CheckRoutes).
func (t *Topology) checkMesh(c *checker, p []any, e *Entry) {
	switch {
	case e.Mesh == "" && !e.Workers: // a workers entry says so in checkWorkers
		c.add(at(p, "mesh"), "required: the mesh whose own objects route entry %s (known: %s)", e.Name, strings.Join(meshroute.Meshes(), ", "))
	case e.Mesh != "" && !slices.Contains(meshroute.Meshes(), e.Mesh):
		c.add(at(p, "mesh"), "unknown mesh %q (known: %s)", e.Mesh, strings.Join(meshroute.Meshes(), ", "))
	}
	if e.Policy.Kind != 0 {
		c.add(at(p, "policy"), "entry %s: the lab's private policy block is gone; routing comes from the mesh's own objects: set mesh and put the route in the topology directory's <cluster>/ manifests, as the tutorial applies them "+
			"(Istio's VirtualService and DestinationRule, Kuma's MeshHTTPRoute or TrafficRoute, Skupper's link Secrets with skupper.io/cost or Links, Cilium's service.cilium.io annotations on the Service)", e.Name)
	}
	if e.DataPlane != "" && !slices.Contains(DataPlanes(), e.DataPlane) {
		c.add(at(p, "dataPlane"), "unknown data plane %q (known: %s)", e.DataPlane, strings.Join(DataPlanes(), ", "))
	}
}

func (t *Topology) checkGateway(c *checker, p []any, e *Entry) {
	checkName(c, at(p, "service"), "Service", e.Service)
	if e.AccessLog != "" && !slices.Contains(envoylog.Formats(), e.AccessLog) {
		c.add(at(p, "accessLog"), "unknown access-log format %q (known: %s)", e.AccessLog, strings.Join(envoylog.Formats(), ", "))
	}
	if e.Edge && e.AccessLog == "" {
		c.add(at(p, "edge"), "an edge gateway is an Envoy: set accessLog too")
	}
	checkPort(c, at(p, "port"), e.Port)
	for _, k := range slices.Sorted(maps.Keys(e.Labels)) {
		switch {
		case k == LabelApp || strings.HasPrefix(k, "lab.mesh-verify.io/"):
			c.add(at(p, "labels", k), "the lab sets %s itself", k)
		case len(validation.IsQualifiedName(k)) > 0:
			c.add(at(p, "labels", k), "not a label key: %s", strings.Join(validation.IsQualifiedName(k), "; "))
		case len(validation.IsValidLabelValue(e.Labels[k])) > 0:
			c.add(at(p, "labels", k), "value %q: %s", e.Labels[k], strings.Join(validation.IsValidLabelValue(e.Labels[k]), "; "))
		}
	}
	if e.Replicas != nil && (*e.Replicas < 0 || *e.Replicas > 20) {
		c.add(at(p, "replicas"), "want 0..20 replicas, got %d", *e.Replicas)
	}
	if s := t.ServiceByName(e.Namespace, e.Service); s != nil && slices.Contains(t.ServiceClusters(s), e.Cluster) {
		c.add(at(p, "service"), "Service %s/%s is also an app Service in cluster %s: one Service cannot select both", e.Namespace, e.Service, e.Cluster)
	}
}

// checkWorkers checks a workers entry: a data plane in the worker pods,
// routed by a mesh's own objects.
func (t *Topology) checkWorkers(c *checker, p []any, e *Entry) {
	if e.Service != "" || e.Replicas != nil || e.Port != (Port{}) || e.SidecarOf != "" {
		c.add(at(p, "workers"), "a workers entry rides in mesh-verify's worker pods: service, port, replicas and sidecarOf do not apply")
	}
	if e.Edge {
		c.add(at(p, "edge"), "a worker's outbound data plane is no edge proxy: edge applies to gateway entries only")
	}
	if e.Mesh == "" {
		c.add(at(p, "mesh"), "required for a workers entry: the mesh whose objects route the workers' requests")
	}
	if e.UsesNginx() {
		c.add(at(p, "dataPlane"), "a workers entry is played by the simulator only")
	}
	sidecarMesh := e.Mesh == meshroute.MeshIstio || e.Mesh == meshroute.MeshKuma
	switch {
	case sidecarMesh && e.AccessLog != e.Mesh:
		c.add(at(p, "accessLog"), "want %q: the %s sidecar injected into a worker pod writes %s's access log", e.Mesh, e.Mesh, e.Mesh)
	case !sidecarMesh && e.AccessLog != "":
		c.add(at(p, "accessLog"), "%s injects no proxy into a worker pod: no access log", e.Mesh)
	}
}

func (t *Topology) checkSidecar(c *checker, p []any, e *Entry) {
	if e.Service != "" || e.Replicas != nil || e.Port != (Port{}) {
		c.add(at(p, "sidecarOf"), "a sidecar entry rides in its app's pods: service, port and replicas apply to gateway entries only")
	}
	if e.AccessLog != "" {
		c.add(at(p, "accessLog"), "a sidecar entry logs as its app's sidecar does: set the app's sidecar instead")
	}
	if e.Edge {
		c.add(at(p, "edge"), "a sidecar is no edge proxy: edge applies to gateway entries only")
	}
	a := t.App(e.SidecarOf)
	switch {
	case a == nil:
		c.add(at(p, "sidecarOf"), "no app %q", e.SidecarOf)
	case a.Kind != apps.KindCaller:
		c.add(at(p, "sidecarOf"), "app %s is a %s; only a caller sends calls through a sidecar", a.Name, a.Kind)
	case a.Namespace != e.Namespace:
		c.add(at(p, "namespace"), "want the namespace of app %s (%s), got %s", a.Name, a.Namespace, e.Namespace)
	default:
		if _, ok := a.Replicas[e.Cluster]; !ok {
			c.add(at(p, "cluster"), "app %s has no Deployment in cluster %s", a.Name, e.Cluster)
		}
	}
}

// checkNetworks wants a network for every cluster or for none: a cluster
// without one would be on no network, which Istio does not have.
func (t *Topology) checkNetworks(c *checker) {
	if len(t.Networks) == 0 {
		return
	}
	for _, cl := range t.Clusters {
		if n := t.Networks[cl]; !dnsLabel.MatchString(n) {
			c.add([]any{"networks", cl}, "want every cluster's network, a name like network1, got %q", n)
		}
	}
	for _, cl := range slices.Sorted(maps.Keys(t.Networks)) {
		if !slices.Contains(t.Clusters, cl) {
			c.add([]any{"networks", cl}, "cluster %q is not in clusters %v", cl, t.Clusters)
		}
	}
}
