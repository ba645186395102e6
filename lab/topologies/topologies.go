// Package topologies is the lab's built-in catalog: one topology per seed
// experiment (the Skupper, Istio and Cilium tutorials and the Kuma
// multi-zone canary), embedded in the binary so `mesh-verify lab up
// --topology skupper-2` works anywhere.
package topologies

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/mesh-verify/mesh-verify/internal/boundedfile"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// files holds the catalog. go:embed needs a package-level variable;
// embed.FS is read-only, so it is not mutable state.
//
//go:embed *.yaml
var files embed.FS

// Names lists the built-in topologies, sorted.
func Names() []string {
	entries, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Builtin parses a built-in topology afresh (callers may change it).
func Builtin(name string) (*topology.Topology, error) {
	data, err := Source(name)
	if err != nil {
		return nil, err
	}
	return topology.Parse("builtin:"+name, data)
}

// Source is the YAML of a built-in topology.
func Source(name string) ([]byte, error) {
	if strings.ContainsAny(name, "/\\") {
		return nil, unknown(name)
	}
	data, err := files.ReadFile(name + ".yaml")
	if err != nil {
		return nil, unknown(name)
	}
	return data, nil
}

func unknown(name string) error {
	return fmt.Errorf("no built-in topology %q (built-in: %s; or give a file path)", name, strings.Join(Names(), ", "))
}

// Resolve takes a built-in name or a file path (anything with a slash or
// a .yaml/.yml suffix, or an existing file) and returns the topology and
// its YAML source.
func Resolve(nameOrFile string) (*topology.Topology, []byte, error) {
	if nameOrFile == "" {
		return nil, nil, fmt.Errorf("no topology given (built-in: %s)", strings.Join(Names(), ", "))
	}
	if data, err := Source(nameOrFile); err == nil {
		t, err := topology.Parse("builtin:"+nameOrFile, data)
		return t, data, err
	}
	looksLikeFile := strings.ContainsAny(nameOrFile, "/\\") || strings.HasSuffix(nameOrFile, ".yaml") || strings.HasSuffix(nameOrFile, ".yml")
	data, err := topology.ReadFile(nameOrFile)
	if err != nil {
		if looksLikeFile || errors.Is(err, boundedfile.ErrRefused) {
			return nil, nil, err
		}
		return nil, nil, unknown(nameOrFile)
	}
	t, err := topology.Parse(nameOrFile, data)
	return t, data, err
}
