package lab

import (
	"context"
	"fmt"

	"github.com/mesh-verify/mesh-verify/lab/crds"
	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// kubectlFunc runs the lab's kubectl against one cluster.
type kubectlFunc func(ctx context.Context, stdin []byte, args ...string) (string, error)

// kubectlOf is k's kubectl for cluster (a context name when k has no
// context prefix).
func kubectlOf(k *kwok.Lab, cluster string) kubectlFunc {
	return func(ctx context.Context, stdin []byte, args ...string) (string, error) {
		return k.Kubectl(ctx, cluster, stdin, args...)
	}
}

// crdTimeout bounds the wait for the lab's CRDs to be served.
const crdTimeout = "60s"

// registerCRDs makes a cluster's API server serve the meshes' kinds
// (lab/crds) and waits until they are Established, as installing a mesh
// does. Server-side apply: Istio's CRDs are larger than the annotation a
// client-side apply would keep of them.
func registerCRDs(ctx context.Context, kubectl kubectlFunc, cluster string) error {
	for _, f := range crds.Files() {
		b, err := crds.YAML(f)
		if err != nil {
			return err
		}
		if _, err := kubectl(ctx, b, "apply", "--server-side", "--force-conflicts", "--field-manager=mesh-verify-lab", "-f", "-"); err != nil {
			return fmt.Errorf("register the meshes' CRDs (lab/crds/%s) in cluster %s: %w", f, cluster, err)
		}
	}
	args := []string{"wait", "--for=condition=Established", "--timeout=" + crdTimeout}
	for _, n := range crds.Names() {
		args = append(args, "crd/"+n)
	}
	if _, err := kubectl(ctx, nil, args...); err != nil {
		return fmt.Errorf("the meshes' CRDs in cluster %s: %w", cluster, err)
	}
	return nil
}

// applyManifests applies a cluster's manifests of the topology with
// kubectl apply, file by file, as the tutorial's reader does.
func applyManifests(ctx context.Context, kubectl kubectlFunc, cluster string, t *topology.Topology) error {
	for _, m := range t.ManifestsOf(cluster) {
		if _, err := kubectl(ctx, m.Data, "apply", "-f", "-"); err != nil {
			return fmt.Errorf("topology %s, %s: %w", t.Metadata.Name, m.File, err)
		}
	}
	return nil
}
