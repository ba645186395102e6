package lab

import (
	"context"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

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
	// A CRD created a moment ago may have no status.conditions yet, and
	// kubectl wait then fails at once ("accessor error: <nil> is of the
	// type <nil>") instead of waiting: asked again until it has some.
	deadline := time.Now().Add(crdStatusTimeout)
	for {
		_, err := kubectl(ctx, nil, args...)
		if err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "accessor error") || time.Now().After(deadline) {
			return fmt.Errorf("the meshes' CRDs in cluster %s: %w", cluster, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the meshes' CRDs in cluster %s: %w", cluster, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// crdStatusTimeout bounds the wait for the CRDs' first status.
const crdStatusTimeout = 60 * time.Second

// applyManifests applies a cluster's manifests of the topology with
// kubectl apply, file by file, as the tutorial's reader does — but their
// Deployments, which applyDeployments applies as the lab injects them,
// once every Service and mesh object is in place.
func applyManifests(ctx context.Context, kubectl kubectlFunc, cluster string, t *topology.Topology) error {
	for _, m := range t.ManifestsOf(cluster) {
		data, err := m.WithoutDeployments()
		if err != nil {
			return fmt.Errorf("topology %s, %s: %w", t.Metadata.Name, m.File, err)
		}
		if data == nil {
			continue
		}
		if _, err := kubectl(ctx, data, "apply", "-f", "-"); err != nil {
			return fmt.Errorf("topology %s, %s: %w", t.Metadata.Name, m.File, err)
		}
	}
	return nil
}

// applyDeployments applies the manifests' Deployments of cluster with
// kubectl apply, as the lab injects them (topology.InjectedDeployments).
func applyDeployments(ctx context.Context, kubectl kubectlFunc, cluster string, t *topology.Topology) error {
	for _, d := range t.InjectedDeployments(cluster) {
		data, err := yaml.Marshal(d)
		if err != nil {
			return fmt.Errorf("topology %s: encode Deployment %s/%s: %w", t.Metadata.Name, d.Namespace, d.Name, err)
		}
		if _, err := kubectl(ctx, data, "apply", "-f", "-"); err != nil {
			return fmt.Errorf("topology %s: apply Deployment %s/%s in cluster %s: %w", t.Metadata.Name, d.Namespace, d.Name, cluster, err)
		}
	}
	return nil
}
