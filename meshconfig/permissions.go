package meshconfig

import "github.com/mesh-verify/mesh-verify/kube/access"

// Permissions are the calls Fetch makes for a reference of kind, as
// access.Permissions declares them (feature mesh-config): what `mesh-verify
// rbac` adds when a split reads its expectation from the mesh.
func Permissions(kind string) []access.Permission {
	return access.PermissionsFor(access.FeatureMeshConfig, kind)
}

// Needs are the permission needs of a reference, per scenario cluster:
// the object's own kind where it is read (ref's cluster, else the first)
// and, in the other clusters, what Fetch reads there: the Services and
// pods behind an Istio route or a Cilium Service, the links and pods of a
// Skupper site. Istio's Services are assumed in the VirtualService's
// namespace; a destination in another namespace needs the same there.
func Needs(ref Ref, clusters []string) []access.Need {
	home := ref.Cluster
	if home == "" && len(clusters) > 0 {
		home = clusters[0]
	}
	ns := ref.Namespace
	out := []access.Need{{Cluster: home, Namespace: ns, Feature: access.FeatureMeshConfig, TargetKind: ref.Kind}}
	other := ""
	switch ref.Kind {
	case KindVirtualService, KindService:
		other = KindService
	case KindSkupper:
		other = KindSkupper
	}
	for _, c := range clusters {
		if c != home && other != "" {
			out = append(out, access.Need{Cluster: c, Namespace: ns, Feature: access.FeatureMeshConfig, TargetKind: other})
		}
	}
	return out
}
