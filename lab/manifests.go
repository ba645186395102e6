package lab

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/mesh-verify/mesh-verify/lab/crds"
	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/lab/meshroute"
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

// crdFiles are the lab's CRD files (lab/crds) a topology's clusters
// serve: those of the API groups its entries' meshes route by (the
// daemon watches them) and its manifests use. A cluster has the CRDs of
// the mesh installed in it and not the others' (kubectl apply of another
// mesh's kind fails there, as on a real cluster), and registering a CRD
// costs its API server CPU: Istio's three, some 600 KB of OpenAPI schema,
// about half a CPU-second in each cluster.
func crdFiles(t *topology.Topology) []string {
	var groups []string
	for _, e := range t.Entries {
		for _, r := range meshroute.Resources(e.Mesh) {
			groups = append(groups, r.GVR.Group)
		}
	}
	for _, m := range t.Manifests {
		for _, o := range m.Objects {
			group, _, _ := strings.Cut(o.Object.GetAPIVersion(), "/")
			groups = append(groups, group)
		}
	}
	return crds.ForGroups(groups)
}

// registerCRDs makes a cluster's API server serve the kinds of the CRD
// files (lab/crds; crdFiles) and waits until they are Established, as
// installing a mesh does. Server-side apply: Istio's CRDs are larger
// than the annotation a client-side apply would keep of them.
func registerCRDs(ctx context.Context, kubectl kubectlFunc, cluster string, files []string) error {
	if len(files) == 0 {
		return nil
	}
	var docs []applyDoc
	for _, f := range files {
		b, err := crds.YAML(f)
		if err != nil {
			return err
		}
		docs = append(docs, applyDoc{b, func(err error) error {
			return fmt.Errorf("register the meshes' CRDs (lab/crds/%s) in cluster %s: %w", f, cluster, err)
		}})
	}
	if err := applyAll(ctx, kubectl, docs, "apply", "--server-side", "--force-conflicts", "--field-manager=mesh-verify-lab", "-f", "-"); err != nil {
		return err
	}
	args := []string{"wait", "--for=condition=Established", "--timeout=" + crdTimeout}
	for _, n := range crds.Names(files...) {
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
	var docs []applyDoc
	for _, m := range t.ManifestsOf(cluster) {
		data, err := m.WithoutDeployments()
		if err != nil {
			return fmt.Errorf("topology %s, %s: %w", t.Metadata.Name, m.File, err)
		}
		if data == nil {
			continue
		}
		docs = append(docs, applyDoc{data, func(err error) error {
			return fmt.Errorf("topology %s, %s: %w", t.Metadata.Name, m.File, err)
		}})
	}
	return applyAll(ctx, kubectl, docs, "apply", "-f", "-")
}

// applyDeployments applies the manifests' Deployments of cluster with
// kubectl apply, as the lab injects them (topology.InjectedDeployments).
func applyDeployments(ctx context.Context, kubectl kubectlFunc, cluster string, t *topology.Topology) error {
	var docs []applyDoc
	for _, d := range t.InjectedDeployments(cluster) {
		data, err := yaml.Marshal(d)
		if err != nil {
			return fmt.Errorf("topology %s: encode Deployment %s/%s: %w", t.Metadata.Name, d.Namespace, d.Name, err)
		}
		docs = append(docs, applyDoc{data, func(err error) error {
			return fmt.Errorf("topology %s: apply Deployment %s/%s in cluster %s: %w", t.Metadata.Name, d.Namespace, d.Name, cluster, err)
		}})
	}
	return applyAll(ctx, kubectl, docs, "apply", "-f", "-")
}

// applyDoc is one YAML stream to apply, and how a failure to apply it is
// told (naming its file or object).
type applyDoc struct {
	data []byte
	wrap func(error) error
}

// applyAll applies docs, in their order, with one kubectl (args, reading
// stdin): each kubectl process costs about 0.1 s of CPU and the API server
// its discovery and OpenAPI requests, which a cluster's dozen files used to
// pay each. When that apply fails, the docs are applied again one at a
// time (apply is idempotent), so that the error names the file or object
// at fault as a per-file apply did.
func applyAll(ctx context.Context, kubectl kubectlFunc, docs []applyDoc, args ...string) error {
	switch len(docs) {
	case 0:
		return nil
	case 1:
		_, err := kubectl(ctx, docs[0].data, args...)
		if err != nil {
			return docs[0].wrap(err)
		}
		return nil
	}
	var all bytes.Buffer
	for _, d := range docs {
		// A document separator on a line of its own, whatever the
		// previous stream ended with.
		all.WriteString("\n---\n")
		all.Write(d.data)
	}
	_, batchErr := kubectl(ctx, all.Bytes(), args...)
	if batchErr == nil {
		return nil
	}
	for _, d := range docs {
		if _, err := kubectl(ctx, d.data, args...); err != nil {
			return d.wrap(err)
		}
	}
	// Each went through on its own: what failed together was passing (an
	// API server not yet serving a kind), and everything is applied now.
	return nil
}
