package scenarios

import (
	"cmp"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Target is the entry point of the mesh.
type Target struct {
	// URL is a plain http(s) URL. Exactly one of URL or Forward is set.
	URL string `yaml:"url"`
	// Forward reaches the entry point through the API server like
	// `kubectl port-forward` (the Kubernetes path).
	Forward *Forward `yaml:"portForward"`
	// Path is appended to the forwarded address (Forward only).
	Path string `yaml:"path"`
	// TLS says how an https target's certificate is checked: against the
	// system roots by default.
	TLS *TLS `yaml:"tls"`
}

// TLS relaxes or pins the verification of an https target's certificate.
type TLS struct {
	// CA is a PEM file of the authorities to trust instead of the
	// system's (relative to the scenario file).
	CA string `yaml:"ca"`
	// ServerName is the name the certificate must carry (default: the
	// URL's host; through a port-forward, svc.namespace).
	ServerName string `yaml:"serverName"`
	// InsecureSkipVerify accepts any certificate; the report says so.
	InsecureSkipVerify bool `yaml:"insecureSkipVerify"`
}

// Forward is a port-forward target: resource is pod/NAME, svc/NAME or deploy/NAME.
type Forward struct {
	Cluster   string `yaml:"cluster"`
	Namespace string `yaml:"namespace"`
	Resource  string `yaml:"resource"`
	Port      string `yaml:"port"`
	Scheme    string `yaml:"scheme"`
	// namespaceDefaulted records that ApplyDefaults chose Namespace.
	namespaceDefaulted bool
}

// NamespaceDefaulted reports whether the scenario left the namespace unset
// (ApplyDefaults filled in "default"): the namespace -n replaces.
func (f *Forward) NamespaceDefaulted() bool {
	return f.namespaceDefaulted && f.Namespace == DefaultNamespace
}

func (s *Scenario) checkTarget(c *checker) {
	t := s.Target
	switch {
	case t.URL == "" && t.Forward == nil:
		c.add("target", "set url (a plain http(s) URL) or portForward (a pod or service reached through the API server)")
	case t.URL != "" && t.Forward != nil:
		c.add("target.portForward", "set either url or portForward, not both")
	}
	if t.URL != "" {
		checkURL(c, "target.url", t.URL)
		if t.Path != "" && t.Forward == nil {
			c.add("target.path", "path applies to portForward; put the path in url")
		}
	}
	if f := t.Forward; f != nil {
		p := "target.portForward"
		switch {
		case f.Cluster == "":
			c.add(p+".cluster", "required: the declared cluster to forward into (%s)", declaredList(s))
		case !s.declared(f.Cluster):
			c.add(p+".cluster", "%s", s.unknownCluster(f.Cluster))
		default:
			if k, ok := s.hasContext(f.Cluster); !ok {
				c.add(p+".cluster", "%s", noContext(f.Cluster, k, "portForward reaches the target through the cluster's API server"))
			}
		}
		if !isDNSLabel(f.Namespace) {
			c.add(p+".namespace", "invalid namespace %q: want lowercase letters, digits and '-'", f.Namespace)
		}
		if f.Resource == "" {
			c.add(p+".resource", "required: pod/NAME, svc/NAME, service/NAME, deploy/NAME or deployment/NAME")
		} else if !regexp.MustCompile(`^(pod|svc|service|deploy|deployment)/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`).MatchString(f.Resource) {
			c.add(p+".resource", "invalid resource %q: want pod/NAME, svc/NAME, service/NAME, deploy/NAME or deployment/NAME", f.Resource)
		}
		switch {
		case f.Port == "":
			c.add(p+".port", "required: a port number or a named port")
		case !validPort(f.Port):
			c.add(p+".port", "invalid port %q: want 1..65535 or a port name (up to 15 lowercase letters, digits and '-')", f.Port)
		}
		if f.Scheme != "http" && f.Scheme != "https" {
			c.add(p+".scheme", "want http or https, got %q", f.Scheme)
		}
		if t.Path != "" {
			if !strings.HasPrefix(t.Path, "/") {
				c.add("target.path", "want a path starting with /, got %q", t.Path)
			}
			if _, err := ParseTemplate("target.path", t.Path); err != nil {
				c.add("target.path", "%v", err)
			}
		}
	}
	if tl := t.TLS; tl != nil {
		https := strings.HasPrefix(strings.ToLower(t.URL), "https://") || t.Forward != nil && t.Forward.Scheme == "https"
		switch {
		case !https && (t.URL != "" || t.Forward != nil):
			c.add("target.tls", "tls applies to an https target (url https://…, or portForward.scheme: https)")
		case tl.InsecureSkipVerify && (tl.CA != "" || tl.ServerName != ""):
			c.add("target.tls.insecureSkipVerify", "insecureSkipVerify accepts any certificate: ca and serverName would not be checked")
		}
	}
}

func checkURL(c *checker, path, raw string) {
	sample, err := ParseTemplate(path, raw)
	if err != nil {
		c.add(path, "%v", err)
		return
	}
	var b strings.Builder
	_ = sample.Execute(&b, TemplateData{RequestID: "run-0", Seq: 0})
	u, err := url.Parse(b.String())
	switch {
	case err != nil:
		c.add(path, "invalid URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		c.add(path, "want an http:// or https:// URL, got scheme %q", u.Scheme)
	case u.Host == "":
		c.add(path, "URL %q has no host", raw)
	}
}

func isDNSLabel(s string) bool {
	return len(s) <= 63 && regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`).MatchString(s)
}

// validPort accepts what kubectl port-forward accepts for the remote port:
// a number or an IANA_SVC_NAME (as in a container's named port).
func validPort(p string) bool {
	if n, err := strconv.Atoi(p); err == nil {
		return n >= 1 && n <= 65535
	}
	return len(p) <= 15 && regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`).MatchString(p) &&
		regexp.MustCompile(`[a-z]`).MatchString(p) && !strings.Contains(p, "--")
}

// sidecarMesh names the sidecar mesh (Istio, Kuma) the scenario's
// presets or observed containers say it verifies, "" when none does.
func (s *Scenario) sidecarMesh() string {
	names := []string{s.Attribution.Preset}
	for _, w := range s.Observe {
		names = append(names, w.Container)
		if w.Logs != nil {
			names = append(names, w.Logs.Preset)
		}
	}
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "istio-"):
			return "Istio"
		case strings.HasPrefix(n, "kuma-"):
			return "Kuma"
		case strings.HasPrefix(n, "envoy-json"):
			return "the mesh's Envoy sidecar"
		}
	}
	return ""
}

// Warnings are what a valid scenario may get wrong about the mesh (the
// report and mesh-verify validate show them). A port-forward enters the
// target pod past its outbound sidecar, where Istio and Kuma decide a
// split by version or by cluster: the split happens only if the app
// behind the port-forward makes the onward call itself. A client pod (the
// tutorials' sleep or curl) sends nothing onward, so the routing under
// test is bypassed (issue 21).
func (s *Scenario) Warnings() []string {
	f := s.Target.Forward
	if f == nil || strings.Contains(f.Resource, "gateway") || s.Attack.Workers > 0 || len(s.Attack.Sources) > 0 {
		// Workers attack the service's in-cluster address, not the
		// port-forward; a gateway routes like a client's sidecar.
		return nil
	}
	mesh, past, send := s.sidecarMesh(), "the pod's outbound sidecar", "attack.workers, with attack.pod giving the workers a sidecar"
	if mesh == "" && s.ciliumScenario() {
		// Cilium's socket load balancer picks the backend in the client's
		// node, per connection (the docs' x-wing): a port-forward goes
		// straight to one pod.
		mesh, past, send = "Cilium", "the client's socket load balancer", "attack.workers in a cluster of the mesh"
	}
	if mesh == "" || !s.forwardBypassesRouting() {
		return nil
	}
	for _, e := range s.Expect {
		sp, ok := e.Spec().(*Split)
		if !ok || sp.By != "version" && sp.By != "cluster" && sp.By != "" {
			continue
		}
		by := cmp.Or(sp.By, "cluster")
		return []string{fmt.Sprintf("target.portForward to %s enters its pod past %s, where %s decides the split by %s of %q: "+
			"it is verified only if the app behind %s calls the split service itself. A client pod (sleep, curl, x-wing) calls nothing, and the port-forward bypasses the routing under test: "+
			"send from inside the mesh (%s) or port-forward to the ingress gateway", f.Resource, past, mesh, by, e.Name, f.Resource, send)}
	}
	return nil
}

// ciliumScenario says whether the scenario reads a Cilium example's answers.
func (s *Scenario) ciliumScenario() bool {
	return strings.HasPrefix(s.Attribution.Preset, "cilium-")
}

// clientWorkload says whether name is one of the tutorials' client pods,
// which call nothing themselves: traffic sent to them never reaches the
// split service.
func clientWorkload(name string) bool {
	switch name {
	case "sleep", "curl", "x-wing", "tiefighter", "netshoot":
		return true
	}
	return false
}

// forwardBypassesRouting says whether the port-forward's workload cannot
// be the caller whose outbound sidecar splits the traffic: a tutorial
// client pod that calls nothing, or the observed (split) service itself,
// one of whose pods the port-forward picks. An app such as the
// tutorials' caller-service, which calls the split service through its
// own sidecar, is not warned about.
func (s *Scenario) forwardBypassesRouting() bool {
	name := s.Target.Forward.Resource
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if clientWorkload(name) {
		return true
	}
	for _, w := range s.Observe {
		if w.Logs != nil && strings.Contains(w.Logs.Preset, "outbound") {
			continue // the caller's own outbound log, read to count where it sent
		}
		for _, term := range strings.Split(w.Selector, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(term), "=")
			if ok && (k == "app" || k == "name" || k == "app.kubernetes.io/name") && strings.TrimSpace(v) == name {
				return true
			}
		}
	}
	return false
}
