package scenarios

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mesh-verify/mesh-verify/meshconfig"
)

// ModelFromMesh is the model of a split whose expected shares are read
// from the mesh's own objects (Split.FromMesh); ApplyDefaults sets it.
const ModelFromMesh = "mesh"

// MeshSource names the mesh object a split's expected shares are read
// from, instead of weights copied from it (docs/expect-from-mesh.md).
// Exactly one of the object keys is set.
type MeshSource struct {
	// VirtualService is an Istio VirtualService, NAMESPACE/NAME: the
	// weights of the route the requests match, per version through the
	// DestinationRule subsets.
	VirtualService string `yaml:"virtualService"`
	// MeshHTTPRoute is a Kuma MeshHTTPRoute, NAMESPACE/NAME.
	MeshHTTPRoute string `yaml:"meshHTTPRoute"`
	// TrafficRoute is a Kuma 2.x TrafficRoute (cluster-scoped), NAME.
	TrafficRoute string `yaml:"trafficRoute"`
	// Skupper is the site namespace and the address, NAMESPACE/ADDRESS:
	// the split follows from the link costs (by cluster).
	Skupper string `yaml:"skupper"`
	// CiliumService is a Cluster Mesh global Service, NAMESPACE/NAME.
	CiliumService string `yaml:"ciliumService"`
	// Rollout is an Argo Rollouts Rollout, NAMESPACE/NAME: the weights
	// Argo recorded in status.canary.weights, per version through each
	// ReplicaSet's pod template hash.
	Rollout string `yaml:"rollout"`
	// Route picks the route instead of matching the attack's requests: an
	// Istio http route's name, or a Kuma to[] entry's targetRef name.
	Route string `yaml:"route"`
	// Cluster is the declared cluster whose API server holds the object
	// (for Skupper and Cilium: where the traffic enters); default the
	// first declared.
	Cluster string `yaml:"cluster"`
	// Selector (Skupper only) selects the pods that serve the address in
	// each site, in kubectl syntax.
	Selector string `yaml:"selector"`
	// Gateway (Istio only) is the Gateway the attack's requests enter the
	// mesh through, NAMESPACE/NAME, as a VirtualService's spec.gateways
	// names it: an ingress gateway applies only the VirtualServices bound
	// to a Gateway that selects it. Default "mesh": the requests come
	// through a sidecar, which applies the VirtualServices whose
	// spec.gateways is empty or names "mesh".
	Gateway string `yaml:"gateway"`
}

// meshKeys pairs each object key of MeshSource with its kind.
func (m *MeshSource) meshKeys() []struct{ key, kind, value string } {
	return []struct{ key, kind, value string }{
		{"virtualService", meshconfig.KindVirtualService, m.VirtualService},
		{"meshHTTPRoute", meshconfig.KindMeshHTTPRoute, m.MeshHTTPRoute},
		{"trafficRoute", meshconfig.KindTrafficRoute, m.TrafficRoute},
		{"skupper", meshconfig.KindSkupper, m.Skupper},
		{"ciliumService", meshconfig.KindService, m.CiliumService},
		{"rollout", meshconfig.KindRollout, m.Rollout},
	}
}

// Ref is the reference the source names; key is the field it came from.
func (m *MeshSource) Ref() (ref meshconfig.Ref, key string, err error) {
	var set []string
	for _, k := range m.meshKeys() {
		if k.value != "" {
			set = append(set, k.key)
			key = k.key
			text := k.kind + "/" + k.value
			if m.Route != "" {
				text += "#" + m.Route
			}
			if m.Cluster != "" {
				text += "@" + m.Cluster
			}
			ref, err = meshconfig.ParseRef(text)
		}
	}
	switch {
	case len(set) == 0:
		var keys []string
		for _, k := range m.meshKeys() {
			keys = append(keys, k.key)
		}
		return meshconfig.Ref{}, "", fmt.Errorf("name the mesh object: one of %s", strings.Join(keys, ", "))
	case len(set) > 1:
		return meshconfig.Ref{}, "", fmt.Errorf("%s: name one mesh object", strings.Join(set, " and "))
	}
	return ref, key, err
}

// checkFromMesh validates a split whose shares come from the mesh.
func (s *Scenario) checkFromMesh(c *checker, p string, sp *Split) {
	fp := p + ".fromMesh"
	ref, key, err := sp.FromMesh.Ref()
	if err != nil {
		if key != "" {
			fp += "." + key
		}
		c.add(fp, "%v", err)
		return
	}
	if sp.Model != ModelFromMesh {
		c.add(p+".model", "model %s and fromMesh: the model is the mesh object's; leave model out", sp.Model)
	}
	if len(sp.Weights) > 0 {
		c.add(p+".weights", "weights and fromMesh: the weights are read from %s; give one or the other", ref.Object())
	}
	if len(sp.Buckets) > 0 || len(sp.Pods) > 0 {
		c.add(p+".buckets", "buckets and pods do not apply with fromMesh: the object names the buckets")
	}
	if dims := meshconfig.Dimensions(ref.Kind); !slices.Contains(dims, sp.By) {
		c.add(p+".by", "a %s determines a split by %s, not by %s", ref.Kind, strings.Join(dims, " or "), sp.By)
	}
	if ref.Cluster != "" && !s.declared(ref.Cluster) {
		c.add(fp+".cluster", "%s", s.unknownCluster(ref.Cluster))
	}
	if len(s.Clusters) == 0 {
		c.add(fp, "the mesh objects are read from a declared cluster (clusters[] with a context)")
	}
	checkMeshGateway(c, fp, ref, sp.FromMesh.Gateway)
	switch {
	case ref.Kind == meshconfig.KindSkupper && sp.FromMesh.Selector == "":
		c.add(fp+".selector", "required with skupper: the pods that serve the address, like app=backend")
	case ref.Kind != meshconfig.KindSkupper && sp.FromMesh.Selector != "":
		c.add(fp+".selector", "applies to skupper only")
	}
}

// checkMeshGateway validates fromMesh.gateway: Istio's, "mesh" or a
// Gateway's NAMESPACE/NAME.
func checkMeshGateway(c *checker, fp string, ref meshconfig.Ref, gw string) {
	switch {
	case gw == "" || gw == "mesh" && ref.Kind == meshconfig.KindVirtualService:
	case ref.Kind != meshconfig.KindVirtualService:
		c.add(fp+".gateway", "applies to virtualService only (an Istio Gateway the requests enter through)")
	default:
		ns, name, ok := strings.Cut(gw, "/")
		if !ok || !isDNSLabel(ns) || !isDNSName(name) {
			c.add(fp+".gateway", "%q: want NAMESPACE/NAME of an Istio Gateway (as spec.gateways names it with its namespace), or mesh", gw)
		}
	}
}

// checkMirrorFromMesh validates a mirror whose percentage comes from the
// mesh: an object that mirrors, and no percent besides.
func (s *Scenario) checkMirrorFromMesh(c *checker, p string, m *MirrorExpect) {
	fp := p + ".fromMesh"
	ref, key, err := m.FromMesh.Ref()
	if err != nil {
		if key != "" {
			fp += "." + key
		}
		c.add(fp, "%v", err)
		return
	}
	if m.Percent != 0 {
		c.add(p+".percent", "percent and fromMesh: the percentage is read from %s; give one or the other", ref.Object())
	}
	if ref.Kind != meshconfig.KindVirtualService && ref.Kind != meshconfig.KindMeshHTTPRoute {
		c.add(fp+"."+key, "a %s does not mirror: name a virtualService or a meshHTTPRoute", ref.Kind)
	}
	if ref.Cluster != "" && !s.declared(ref.Cluster) {
		c.add(fp+".cluster", "%s", s.unknownCluster(ref.Cluster))
	}
	if len(s.Clusters) == 0 {
		c.add(fp, "the mesh objects are read from a declared cluster (clusters[] with a context)")
	}
	if m.FromMesh.Selector != "" {
		c.add(fp+".selector", "applies to skupper only")
	}
	checkMeshGateway(c, fp, ref, m.FromMesh.Gateway)
}
