package meshroute

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Limits of Load: a manifest file is a tutorial's handful of objects; a
// file beyond these is a mistake (the wrong file), refused with its name.
const (
	MaxManifestBytes     = 4 << 20
	MaxManifestDocuments = 1000
)

// Kind is a kind the lab's API servers serve and its simulator reads, or
// applies without reading (Namespace).
type Kind struct {
	APIVersions []string
	Kind        string
	// Mesh is the mesh that reads it; "" for core kinds any mesh may use.
	Mesh string
}

// Kinds are what a topology's manifests may hold.
func Kinds() []Kind {
	istio := []string{"networking.istio.io/v1", "networking.istio.io/v1beta1", "networking.istio.io/v1alpha3"}
	return []Kind{
		{[]string{"v1"}, "Namespace", ""},
		// The tutorial's workloads: lab/topology turns each Deployment
		// into a lab app (its kind from the image) and serves it.
		{[]string{"apps/v1"}, "Deployment", ""},
		{[]string{"v1"}, "Service", ""},
		// What an app serves from a volume: Cilium's rebel-base answers
		// its ConfigMap's JSON, which lab/topology reads.
		{[]string{"v1"}, "ConfigMap", ""},
		{[]string{"v1"}, "Secret", MeshSkupper},
		{istio, "VirtualService", MeshIstio},
		{istio, "DestinationRule", MeshIstio},
		{istio, "Gateway", MeshIstio},
		{[]string{"kuma.io/v1alpha1"}, "MeshHTTPRoute", MeshKuma},
		{[]string{"kuma.io/v1alpha1"}, "TrafficRoute", MeshKuma},
		{[]string{"kuma.io/v1alpha1"}, "MeshAccessLog", MeshKuma},
		{[]string{"kuma.io/v1alpha1"}, "TrafficLog", MeshKuma},
		{[]string{"skupper.io/v2alpha1"}, "Link", MeshSkupper},
		{[]string{"skupper.io/v2alpha1"}, "Connector", MeshSkupper},
		{[]string{"skupper.io/v2alpha1"}, "Listener", MeshSkupper},
	}
}

// Manifest is one object of a manifest file, with where it came from.
type Manifest struct {
	Object *unstructured.Unstructured
	File   string
	Line   int // the document's first line
}

// Where names the object and its place: "file:line: Kind ns/name".
func (m Manifest) Where() string {
	return fmt.Sprintf("%s:%d: %s", m.File, m.Line, describe(m.Object))
}

// separator is a YAML document separator line.
var separator = regexp.MustCompile(`(?m)^---[ \t]*(?:#.*)?$`)

// Load decodes a file of Kubernetes manifests (YAML documents separated by
// ---) as kubectl apply -f reads it, and refuses what the lab cannot serve:
// a kind no registered CRD or core type provides, an apiVersion of it the
// lab does not serve, a document without a name. Errors name the file,
// the document's line and the object.
func Load(file string, data []byte) ([]Manifest, error) {
	if len(data) > MaxManifestBytes {
		return nil, fmt.Errorf("%s: %d bytes; a manifest file of the lab holds at most %d", file, len(data), MaxManifestBytes)
	}
	var out []Manifest
	line := 1
	rest := data
	for doc := 0; ; doc++ {
		var chunk []byte
		loc := separator.FindIndex(rest)
		if loc == nil {
			chunk = rest
		} else {
			chunk = rest[:loc[0]]
		}
		start := line + leadingBlank(chunk)
		if len(bytes.TrimSpace(stripComments(chunk))) > 0 {
			if len(out) == MaxManifestDocuments {
				return nil, fmt.Errorf("%s:%d: more than %d documents", file, start, MaxManifestDocuments)
			}
			m, err := decode(file, start, chunk)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
		if loc == nil {
			break
		}
		line += bytes.Count(rest[:loc[1]], []byte("\n"))
		rest = rest[loc[1]:]
		if len(rest) > 0 && rest[0] == '\n' {
			rest = rest[1:]
			line++
		}
	}
	return out, nil
}

func leadingBlank(b []byte) int {
	n := 0
	for _, l := range bytes.Split(b, []byte("\n")) {
		t := bytes.TrimSpace(l)
		if len(t) > 0 && t[0] != '#' {
			break
		}
		n++
	}
	return n
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}

func decode(file string, line int, doc []byte) (Manifest, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return Manifest{}, fmt.Errorf("%s:%d: %w", file, line, err)
	}
	if obj == nil {
		return Manifest{}, fmt.Errorf("%s:%d: the document is not an object", file, line)
	}
	u := &unstructured.Unstructured{Object: obj}
	m := Manifest{Object: u, File: file, Line: line}
	if u.GetKind() == "" || u.GetAPIVersion() == "" {
		return m, fmt.Errorf("%s:%d: apiVersion and kind are required (have apiVersion %q, kind %q)", file, line, u.GetAPIVersion(), u.GetKind())
	}
	if u.GetName() == "" {
		return m, fmt.Errorf("%s:%d: %s: metadata.name is required", file, line, u.GetKind())
	}
	k, ok := findKind(u.GetKind())
	if !ok {
		var names []string
		for _, k := range Kinds() {
			names = append(names, k.Kind)
		}
		return m, fmt.Errorf("%s: kind %s (apiVersion %s) is not a kind the lab serves (known: %s)", m.Where(), u.GetKind(), u.GetAPIVersion(), strings.Join(names, ", "))
	}
	if !slices.Contains(k.APIVersions, u.GetAPIVersion()) {
		return m, fmt.Errorf("%s: apiVersion %s: the lab serves %s as %s", m.Where(), u.GetAPIVersion(), k.Kind, strings.Join(k.APIVersions, ", "))
	}
	return m, nil
}

func findKind(kind string) (Kind, bool) {
	for _, k := range Kinds() {
		if k.Kind == kind {
			return k, true
		}
	}
	return Kind{}, false
}

// describe is "Kind ns/name" (or "Kind name" when cluster-scoped).
func describe(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + " " + u.GetName()
	}
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}
