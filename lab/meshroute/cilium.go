package meshroute

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mesh-verify/mesh-verify/lab/meshsim"
)

// Cilium's Cluster Mesh annotations on a Service, with the legacy names
// Cilium still reads (pkg/annotation/k8s.go).
var (
	ciliumGlobal   = []string{"service.cilium.io/global", "io.cilium/global-service"}
	ciliumShared   = []string{"service.cilium.io/shared", "io.cilium/shared-service"}
	ciliumAffinity = []string{"service.cilium.io/affinity", "io.cilium/service-affinity"}
)

// ciliumAnnotation is the first of names set on u: its value and name.
func ciliumAnnotation(u *unstructured.Unstructured, names []string) (value, name string, ok bool) {
	for _, n := range names {
		if v, ok := u.GetAnnotations()[n]; ok {
			return v, n, true
		}
	}
	return "", "", false
}

// deriveCilium reads the annotations of the entry's Service in every
// cluster. Not global in the entry's cluster: its own backends only.
// Global: its own plus those of every cluster where the same Service is
// global and shared (the default); affinity local uses the remote ones
// only while no local backend is ready, remote the other way round, none
// (the default) all of them alike. Cilium's socket load balancer picks a
// backend per connection.
func deriveCilium(e Entry, objs Objects) (Route, error) {
	r := Route{Policy: meshsim.Policy{Mode: meshsim.ModePerPod, PerConnection: true}, Clusters: []string{e.Cluster}}
	var local *unstructured.Unstructured
	for _, s := range objs.of(e.Cluster, "Service", e.Namespace) {
		if s.GetName() == e.To {
			local = s
		}
	}
	if local == nil {
		return r, nil // kube-proxy's own: no Service, nothing; the daemon has no backends either
	}
	r.From = append(r.From, where(local, e.Cluster))
	for k := range local.GetAnnotations() {
		if (strings.HasPrefix(k, "service.cilium.io/") || strings.HasPrefix(k, "io.cilium/")) &&
			!contains3(k, ciliumGlobal, ciliumShared, ciliumAffinity) {
			r.Ignored = append(r.Ignored, where(local, e.Cluster)+": metadata.annotations."+k)
		}
	}
	global, err := ciliumBool(local, e.Cluster, ciliumGlobal, false)
	if err != nil || !global {
		return r, err
	}
	var remote []string
	for _, c := range e.Clusters {
		if c == e.Cluster {
			continue
		}
		for _, s := range objs.of(c, "Service", e.Namespace) {
			if s.GetName() != e.To {
				continue
			}
			g, err := ciliumBool(s, c, ciliumGlobal, false)
			if err != nil {
				return Route{}, err
			}
			shared, err := ciliumBool(s, c, ciliumShared, true)
			if err != nil {
				return Route{}, err
			}
			if g && shared {
				remote = append(remote, c)
				r.From = append(r.From, where(s, c))
			}
		}
	}
	r.Clusters = append(r.Clusters, remote...)
	sortClusters(r.Clusters, e.Clusters)
	aff, name, _ := ciliumAnnotation(local, ciliumAffinity)
	switch aff {
	case "", "none":
	case "local":
		if len(remote) > 0 {
			r.Policy.Mode, r.Policy.Order = meshsim.ModeFailover, append([]string{e.Cluster}, remote...)
		}
	case "remote":
		if len(remote) > 0 {
			r.Policy.Mode, r.Policy.Order = meshsim.ModeFailover, append(append([]string{}, remote...), e.Cluster)
		}
	default:
		return Route{}, fieldError(local, e.Cluster, "metadata.annotations."+name, "%q: want local, remote or none", aff)
	}
	if r.Policy.Mode == meshsim.ModeFailover && len(remote) > 1 {
		r.Ignored = append(r.Ignored, where(local, e.Cluster)+": affinity over several remote clusters (the lab prefers them in cluster order instead of pooling them)")
	}
	return r, nil
}

func ciliumBool(u *unstructured.Unstructured, cluster string, names []string, def bool) (bool, error) {
	v, name, ok := ciliumAnnotation(u, names)
	if !ok {
		return def, nil
	}
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fieldError(u, cluster, "metadata.annotations."+name, "%q: want \"true\" or \"false\"", v)
}

func contains3(k string, lists ...[]string) bool {
	for _, l := range lists {
		for _, x := range l {
			if x == k {
				return true
			}
		}
	}
	return false
}
