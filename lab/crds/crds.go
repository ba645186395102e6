// Package crds holds the CustomResourceDefinitions of the mesh kinds the
// lab's topologies apply (Istio's VirtualService, DestinationRule and
// Gateway; Kuma's MeshHTTPRoute and TrafficRoute; Skupper v2's Link,
// Connector and Listener), as
// upstream publishes them (each file's header names its source and
// commit). `lab up` registers those of the topology's meshes (ForGroups)
// in every cluster's API server before it applies the topology's
// manifests, so kubectl validates and stores the tutorials' objects as a
// real cluster with the mesh installed does.
package crds

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
)

// files holds the CRD YAML. go:embed needs a package-level variable;
// embed.FS is read-only, so it is not mutable state.
//
//go:embed *.yaml
var files embed.FS

// Files are the CRD files' names, sorted.
func Files() []string {
	names, _ := fs.Glob(files, "*.yaml")
	slices.Sort(names)
	return names
}

// YAML is one CRD file's content.
func YAML(file string) ([]byte, error) {
	b, err := files.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("lab CRDs: no file %s (have %v)", file, Files())
	}
	return b, nil
}

// crdName matches a CRD document's metadata.name: the first "  name:"
// line after a "metadata:" line at the top level. The files are
// upstream's, written by controller-gen and cue-gen, which always lay
// them out so.
var crdName = regexp.MustCompile(`(?m)^metadata:\n(?:  [^\n]*\n)*?  name: ([a-z0-9.-]+)\s*$`)

// Names lists the CRDs (plural.group) of the files, every file when none
// is named, sorted: what `lab up` waits to be Established.
func Names(of ...string) []string {
	if len(of) == 0 {
		of = Files()
	}
	var out []string
	for _, f := range of {
		b, _ := files.ReadFile(f)
		for _, doc := range bytes.Split(b, []byte("\n---\n")) {
			if m := crdName.FindSubmatch(doc); m != nil {
				out = append(out, string(m[1]))
			}
		}
	}
	slices.Sort(out)
	return out
}

// ForGroups lists the files, sorted, that define a kind of any of the API
// groups: the CRDs a cluster needs to serve those groups' objects (a
// CRD's name is plural.group, TestFilesAreTheCRDsTheLabRoutesBy).
func ForGroups(groups []string) []string {
	var out []string
	for _, f := range Files() {
		for _, n := range Names(f) {
			_, group, _ := strings.Cut(n, ".")
			if slices.Contains(groups, group) {
				out = append(out, f)
				break
			}
		}
	}
	return out
}
