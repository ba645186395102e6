package topology

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/mesh-verify/mesh-verify/lab/meshroute"
	"github.com/mesh-verify/mesh-verify/lab/nginx"
)

// LabFile is a topology directory's lab description: clusters, apps,
// Services and entries, without routing. Next to it, a directory per
// cluster holds the Kubernetes manifests the tutorial applies there (the
// meshes' own objects), which `lab up` applies with kubectl.
const LabFile = "lab.yaml"

// Manifest is one manifest file of a topology directory.
type Manifest struct {
	Cluster string
	// File is its path inside the topology directory, like c1/virtualservice.yaml.
	File    string
	Data    []byte
	Objects []meshroute.Manifest
}

// ParseDir loads a topology directory: name/lab.yaml and
// name/<cluster>/*.yaml in fsys. where names the directory in errors
// ("builtin:istio-mirror" or a path). It checks every entry's route
// against the manifests, so a manifest the mesh would refuse fails here.
func ParseDir(fsys fs.FS, dir, where string) (*Topology, error) {
	data, err := fs.ReadFile(fsys, path.Join(dir, LabFile))
	if err != nil {
		return nil, fmt.Errorf("topology directory %s: %w", where, err)
	}
	file := where + "/" + LabFile
	t, root, err := decode(file, data)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("topology directory %s: %w", where, err)
	}
	for _, de := range entries {
		switch {
		case de.Name() == LabFile:
		case de.IsDir() && slices.Contains(t.Clusters, de.Name()):
			if err := t.loadManifests(fsys, dir, where, de.Name()); err != nil {
				return nil, err
			}
		case de.IsDir():
			return nil, fmt.Errorf("%s/%s: not a cluster of the topology (clusters: %s); a topology directory holds %s and one directory of manifests per cluster",
				where, de.Name(), strings.Join(t.Clusters, ", "), LabFile)
		case strings.HasPrefix(de.Name(), ".") || strings.HasSuffix(de.Name(), ".md"):
		default:
			return nil, fmt.Errorf("%s/%s: a topology directory holds %s and one directory of manifests per cluster", where, de.Name(), LabFile)
		}
	}
	// The tutorial's Deployments and Services join lab.yaml's apps and
	// Services before either is validated: entries route to them.
	if err := t.loadWorkloads(); err != nil {
		return nil, err
	}
	if err := t.validateAt(file, root); err != nil {
		return nil, err
	}
	if _, err := t.CheckRoutes(); err != nil {
		return nil, err
	}
	t.File = where
	return t, nil
}

func (t *Topology) loadManifests(fsys fs.FS, dir, where, cluster string) error {
	files, err := fs.ReadDir(fsys, path.Join(dir, cluster))
	if err != nil {
		return fmt.Errorf("topology directory %s: %w", where, err)
	}
	for _, f := range files {
		name := cluster + "/" + f.Name()
		if f.IsDir() || !(strings.HasSuffix(f.Name(), ".yaml") || strings.HasSuffix(f.Name(), ".yml")) {
			return fmt.Errorf("%s/%s: want only .yaml manifests in a cluster's directory", where, name)
		}
		data, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return fmt.Errorf("topology directory %s: %w", where, err)
		}
		objs, err := meshroute.Load(where+"/"+name, data)
		if err != nil {
			return err
		}
		t.Manifests = append(t.Manifests, Manifest{Cluster: cluster, File: name, Data: data, Objects: objs})
	}
	return nil
}

// ManifestFiles are the manifests' contents by their path in the
// topology directory (nil without any), for ParseFiles.
func (t *Topology) ManifestFiles() map[string]string {
	if len(t.Manifests) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, m := range t.Manifests {
		out[m.File] = string(m.Data)
	}
	return out
}

// ParseFiles loads a topology directory from its lab.yaml and its
// manifests by path (ManifestFiles), as ParseDir does from a directory.
func ParseFiles(where string, labYAML []byte, manifests map[string]string) (*Topology, error) {
	fsys := fstest.MapFS{LabFile: &fstest.MapFile{Data: labYAML}}
	for name, data := range manifests {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	return ParseDir(fsys, ".", where)
}

// ManifestsOf lists cluster's manifest files, in file order.
func (t *Topology) ManifestsOf(cluster string) []Manifest {
	var out []Manifest
	for _, m := range t.Manifests {
		if m.Cluster == cluster {
			out = append(out, m)
		}
	}
	return out
}

// ManifestsDigest identifies the manifests' content ("" without any): a
// lab whose manifests changed is not the same lab.
func (t *Topology) ManifestsDigest() string {
	if len(t.Manifests) == 0 {
		return ""
	}
	h := sha256.New()
	for _, m := range t.Manifests {
		fmt.Fprintf(h, "%s\x00%d\x00", m.File, len(m.Data))
		h.Write(m.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// MeshObjects are the objects the lab's API servers will hold once the
// topology is applied — its manifests (in the namespace kubectl gives
// those that name none) and its Services — as meshroute reads them.
func (t *Topology) MeshObjects() (meshroute.Objects, error) {
	out := meshroute.Objects{}
	for _, m := range t.Manifests {
		for _, o := range m.Objects {
			switch o.Object.GetKind() {
			case "Service", "Deployment":
				continue // the Services come from ServiceObjects below; no mesh reads a Deployment
			}
			u := o.Object.DeepCopy()
			if u.GetNamespace() == "" && namespaced(u.GetKind()) {
				u.SetNamespace(DefaultNamespace)
			}
			out[m.Cluster] = append(out[m.Cluster], u)
		}
	}
	for _, c := range t.Clusters {
		for _, s := range t.ServiceObjects(c) {
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
			if err != nil {
				return nil, fmt.Errorf("Service %s/%s: %w", s.Namespace, s.Name, err)
			}
			out[c] = append(out[c], &unstructured.Unstructured{Object: obj})
		}
	}
	return out, nil
}

// definedAt is " (file:line)" of the manifest that defines the object an
// error is about, "" when no manifest does (a Service of lab.yaml).
func (t *Topology) definedAt(err error) string {
	var oe *meshroute.ObjectError
	if !errors.As(err, &oe) {
		return ""
	}
	for _, m := range t.Manifests {
		if m.Cluster != oe.Cluster {
			continue
		}
		for _, o := range m.Objects {
			ns := o.Object.GetNamespace()
			if ns == "" && namespaced(o.Object.GetKind()) {
				ns = DefaultNamespace
			}
			if o.Object.GetKind() == oe.Kind && o.Object.GetName() == oe.Name && ns == oe.Namespace {
				return fmt.Sprintf(" (%s:%d)", o.File, o.Line)
			}
		}
	}
	return ""
}

// namespaced reports whether a manifest kind lives in a namespace.
func namespaced(kind string) bool {
	return kind != "Namespace" && kind != "TrafficRoute" && kind != "TrafficLog"
}

// RouteEntry is e as meshroute derives its route.
func (t *Topology) RouteEntry(e *Entry) meshroute.Entry {
	out := meshroute.Entry{Name: e.Name, Mesh: e.Mesh, Cluster: e.Cluster, Namespace: e.Namespace, To: e.To, Clusters: t.Clusters,
		Gateway: e.Gateway(), IstioNoShadowSuffix: t.Istio.DisableShadowHostSuffix}
	if e.Gateway() {
		out.Labels = e.podLabels()
	}
	if s := t.ServiceByName(e.Namespace, e.To); s != nil {
		out.ServicePort = s.Port
	}
	for i := range t.Apps {
		if a := &t.Apps[i]; t.SelectedBy(a, e.Namespace, e.To) {
			out.PodLabels = append(out.PodLabels, a.podLabels())
		}
	}
	return out
}

// CheckRoutes derives every mesh entry's route from the manifests, as the
// daemon will from the API servers, and says which object or field the
// mesh would refuse, or which policy the entry's data plane cannot play.
// notes say, per entry, what the objects set that the lab does not play.
func (t *Topology) CheckRoutes() (notes []string, err error) {
	objs, err := t.MeshObjects()
	if err != nil {
		return nil, err
	}
	notes = append(notes, t.WorkloadNotes...)
	var errs []error
	for i := range t.Entries {
		e := &t.Entries[i]
		if e.Mesh == "" {
			continue
		}
		r, err := meshroute.Derive(t.RouteEntry(e), objs)
		if err != nil {
			errs = append(errs, fmt.Errorf("topology %s: %w%s", t.Metadata.Name, err, t.definedAt(err)))
			continue
		}
		for _, ig := range r.Ignored {
			notes = append(notes, fmt.Sprintf("entry %s: not modelled by the lab: %s", e.Name, ig))
		}
		if r.Policy.NoRoute != "" {
			// As a real gateway comes up without a route: not a failure of
			// lab up, but every request it gets will be answered 404.
			notes = append(notes, fmt.Sprintf("entry %s: no route, every request answered 404 (NR): %s", e.Name, r.Policy.NoRoute))
		}
		if e.UsesNginx() {
			if err := nginx.Supports(r.Policy); err != nil {
				errs = append(errs, fmt.Errorf("topology %s, entry %s: the nginx data plane cannot play the route its manifests give: %w", t.Metadata.Name, e.Name, err))
			}
		}
	}
	return notes, errors.Join(errs...)
}

// WithoutDeployments is the manifest as applyManifests applies it: its
// bytes as written when it holds no Deployment, else its other objects
// (nil when there are none), since the lab applies its Deployments as it
// injects them (InjectedDeployments).
func (m Manifest) WithoutDeployments() ([]byte, error) {
	var rest []*unstructured.Unstructured
	deployments := false
	for _, o := range m.Objects {
		if o.Object.GetKind() == "Deployment" {
			deployments = true
			continue
		}
		rest = append(rest, o.Object)
	}
	switch {
	case !deployments:
		return m.Data, nil
	case len(rest) == 0:
		return nil, nil
	}
	var b bytes.Buffer
	for _, u := range rest {
		y, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}
