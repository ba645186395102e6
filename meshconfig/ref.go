package meshconfig

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Kinds a Ref may name. Skupper has no one object that holds a split: its
// Ref names the site namespace (where the links are) and the address the
// attack reaches; Cilium's is the core Service that carries the
// annotations.
const (
	KindVirtualService = "VirtualService"
	KindMeshHTTPRoute  = "MeshHTTPRoute"
	KindTrafficRoute   = "TrafficRoute"
	KindSkupper        = "Skupper"
	KindService        = "Service"
	// KindRollout is Argo Rollouts' Rollout: its status.canary.weights.
	KindRollout = "Rollout"
)

// Kinds lists the kinds a Ref may name, in the order the docs show them.
func Kinds() []string {
	return []string{KindVirtualService, KindMeshHTTPRoute, KindTrafficRoute, KindSkupper, KindService, KindRollout}
}

// kindAliases are the spellings ParseRef accepts besides the kind itself
// (compared case-insensitively): kubectl's short names, and the
// lowerCamel keys a scenario file uses.
var kindAliases = map[string]string{
	"virtualservice": KindVirtualService, "vs": KindVirtualService,
	"meshhttproute": KindMeshHTTPRoute,
	"trafficroute":  KindTrafficRoute,
	"skupper":       KindSkupper,
	"service":       KindService, "svc": KindService, "ciliumservice": KindService,
	"rollout": KindRollout, "ro": KindRollout,
}

// Ref names the mesh object an expected split is read from.
//
// Its text form is KIND/NAMESPACE/NAME, with NAME alone for the
// cluster-scoped TrafficRoute, followed by an optional #SECTION (the
// Istio http route's name, or the Kuma to[] entry's targetRef name) and
// an optional @CLUSTER (the scenario cluster whose API server holds the
// object; default: the first the scenario declares):
//
//	VirtualService/bookinfo/reviews
//	VirtualService/bookinfo/reviews#canary@c1
//	MeshHTTPRoute/kuma-demo/test-server-canary#test-server
//	TrafficRoute/test-server
//	Skupper/interconnect/backend
//	Service/rebel-base/rebel-base
//	Rollout/callme/callme-service
type Ref struct {
	Kind      string `json:"kind" yaml:"kind"`
	Namespace string `json:"namespace,omitempty" yaml:"namespace,omitempty"`
	Name      string `json:"name" yaml:"name"`
	// Section picks the route inside the object instead of matching the
	// attack's requests: an Istio spec.http[].name, a Kuma
	// spec.to[].targetRef.name.
	Section string `json:"section,omitempty" yaml:"section,omitempty"`
	// Cluster is the scenario cluster whose API server is read (for
	// Skupper and Cilium: the cluster the traffic enters); "" means the
	// caller's default.
	Cluster string `json:"cluster,omitempty" yaml:"cluster,omitempty"`
}

// Namespaced reports whether the kind lives in a namespace.
func (r Ref) Namespaced() bool { return r.Kind != KindTrafficRoute }

// String is the text form ParseRef reads.
func (r Ref) String() string {
	var b strings.Builder
	b.WriteString(r.Kind)
	if r.Namespaced() {
		b.WriteString("/" + r.Namespace)
	}
	b.WriteString("/" + r.Name)
	if r.Section != "" {
		b.WriteString("#" + r.Section)
	}
	if r.Cluster != "" {
		b.WriteString("@" + r.Cluster)
	}
	return b.String()
}

// Object is "Kind ns/name" (or "Kind name"), for messages.
func (r Ref) Object() string {
	if r.Namespaced() {
		return r.Kind + " " + r.Namespace + "/" + r.Name
	}
	return r.Kind + " " + r.Name
}

// maxRefLen bounds a reference's text: a Kubernetes name is at most 253
// characters, and a reference holds three of them and a cluster.
const maxRefLen = 1024

// ParseRef reads a reference's text form (see Ref). Every part is
// checked as Kubernetes checks it, so a typo is named here rather than as
// an object the API server does not have.
func ParseRef(s string) (Ref, error) {
	if len(s) > maxRefLen {
		return Ref{}, fmt.Errorf("mesh object reference: %d bytes, at most %d", len(s), maxRefLen)
	}
	if !utf8.ValidString(s) {
		return Ref{}, fmt.Errorf("mesh object reference %q: not UTF-8", s)
	}
	var r Ref
	rest := s
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest, r.Cluster = rest[:i], rest[i+1:]
		if r.Cluster == "" {
			return Ref{}, fmt.Errorf("mesh object reference %q: empty cluster after @", s)
		}
	}
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest, r.Section = rest[:i], rest[i+1:]
		if r.Section == "" {
			return Ref{}, fmt.Errorf("mesh object reference %q: empty section after #", s)
		}
	}
	parts := strings.Split(rest, "/")
	kind, ok := kindAliases[strings.ToLower(parts[0])]
	if !ok {
		return Ref{}, fmt.Errorf("mesh object reference %q: kind %q: want one of %s", s, parts[0], strings.Join(Kinds(), ", "))
	}
	r.Kind = kind
	switch {
	case r.Namespaced() && len(parts) == 3:
		r.Namespace, r.Name = parts[1], parts[2]
	case !r.Namespaced() && len(parts) == 2:
		r.Name = parts[1]
	case r.Namespaced():
		return Ref{}, fmt.Errorf("mesh object reference %q: want %s/NAMESPACE/NAME", s, kind)
	default:
		return Ref{}, fmt.Errorf("mesh object reference %q: %s is cluster-scoped: want %s/NAME", s, kind, kind)
	}
	if err := r.Validate(); err != nil {
		return Ref{}, fmt.Errorf("mesh object reference %q: %w", s, err)
	}
	return r, nil
}

// Validate checks the parts of a Ref built in code or decoded from a
// scenario file.
func (r Ref) Validate() error {
	if _, ok := kindAliases[strings.ToLower(r.Kind)]; !ok || kindAliases[strings.ToLower(r.Kind)] != r.Kind {
		return fmt.Errorf("kind %q: want one of %s", r.Kind, strings.Join(Kinds(), ", "))
	}
	if r.Namespaced() {
		if errs := validation.IsDNS1123Label(r.Namespace); len(errs) > 0 {
			return fmt.Errorf("namespace %q: %s", r.Namespace, strings.Join(errs, "; "))
		}
	} else if r.Namespace != "" {
		return fmt.Errorf("%s is cluster-scoped: no namespace (have %q)", r.Kind, r.Namespace)
	}
	if errs := validation.IsDNS1123Subdomain(r.Name); len(errs) > 0 {
		return fmt.Errorf("name %q: %s", r.Name, strings.Join(errs, "; "))
	}
	if r.Section != "" && strings.ContainsAny(r.Section, "#@/") {
		return fmt.Errorf("section %q: must not contain #, @ or /", r.Section)
	}
	if r.Cluster != "" && strings.ContainsAny(r.Cluster, "#@/") {
		return fmt.Errorf("cluster %q: must not contain #, @ or /", r.Cluster)
	}
	return nil
}
