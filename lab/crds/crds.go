// Package crds holds the CustomResourceDefinitions of the mesh kinds the
// lab's topologies apply (Istio's VirtualService, DestinationRule and
// Gateway; Kuma's MeshHTTPRoute and TrafficRoute; Skupper v2's Link,
// Connector and Listener), as
// upstream publishes them (each file's header names its source and
// commit). `lab up` registers them in every cluster's API server before it
// applies a topology's manifests, so kubectl validates and stores the
// tutorials' objects as a real cluster with the mesh installed does.
package crds

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
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

// Names lists the CRDs of every file (plural.group), sorted: what `lab
// up` waits to be Established.
func Names() []string {
	var out []string
	for _, f := range Files() {
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
