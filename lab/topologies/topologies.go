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
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mesh-verify/mesh-verify/internal/boundedfile"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// files holds the catalog: topology directories (NAME/lab.yaml with
// NAME/<cluster>/*.yaml, the tutorial's own manifests; single files
// NAME.yaml are read too). go:embed needs a package-level variable;
// embed.FS is read-only, so it is not mutable state.
//
//go:embed */lab.yaml */*/*.yaml
var files embed.FS

// Names lists the built-in topologies, sorted.
func Names() []string {
	entries, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && !e.IsDir() {
			out = append(out, n)
		} else if _, err := fs.Stat(files, e.Name()+"/"+topology.LabFile); e.IsDir() && err == nil {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// Builtin parses a built-in topology afresh (callers may change it).
func Builtin(name string) (*topology.Topology, error) {
	if _, err := Source(name); err != nil {
		return nil, err
	}
	t, _, err := Resolve(name)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// isDir reports whether the built-in name is a topology directory.
func isDir(name string) bool {
	st, err := fs.Stat(files, name)
	return err == nil && st.IsDir()
}

// Source is the YAML of a built-in topology: its file, or a directory's
// lab.yaml (its manifests are Manifests).
func Source(name string) ([]byte, error) {
	if strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return nil, unknown(name)
	}
	if isDir(name) {
		return files.ReadFile(name + "/" + topology.LabFile)
	}
	data, err := files.ReadFile(name + ".yaml")
	if err != nil {
		return nil, unknown(name)
	}
	return data, nil
}

// Manifests are a built-in topology directory's manifest files by path
// (c1/virtualservice.yaml), nil for a single-file topology: what a test
// edits to make a broken variant (WriteDir).
func Manifests(name string) (map[string][]byte, error) {
	if _, err := Source(name); err != nil {
		return nil, err
	}
	if !isDir(name) {
		return nil, nil
	}
	out := map[string][]byte{}
	err := fs.WalkDir(files, name, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == name+"/"+topology.LabFile {
			return err
		}
		b, err := files.ReadFile(p)
		out[strings.TrimPrefix(p, name+"/")] = b
		return err
	})
	return out, err
}

func unknown(name string) error {
	return fmt.Errorf("no built-in topology %q (built-in: %s; or give a file or directory path)", name, strings.Join(Names(), ", "))
}

// Resolve takes a built-in name, a topology directory or a file path
// (anything with a slash or a .yaml/.yml suffix, or an existing file) and
// returns the topology and its lab YAML (a directory's lab.yaml; its
// manifests are in Topology.Manifests).
func Resolve(nameOrFile string) (*topology.Topology, []byte, error) {
	if nameOrFile == "" {
		return nil, nil, fmt.Errorf("no topology given (built-in: %s)", strings.Join(Names(), ", "))
	}
	if data, err := Source(nameOrFile); err == nil {
		if isDir(nameOrFile) {
			t, err := topology.ParseDir(files, nameOrFile, "builtin:"+nameOrFile)
			return t, data, err
		}
		t, err := topology.Parse("builtin:"+nameOrFile, data)
		return t, data, err
	}
	if st, err := os.Stat(nameOrFile); err == nil && st.IsDir() {
		t, err := topology.ParseDir(os.DirFS(nameOrFile), ".", nameOrFile)
		if err != nil {
			return nil, nil, err
		}
		data, err := topology.ReadFile(filepath.Join(nameOrFile, topology.LabFile))
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

// WriteDir writes a topology directory under dir: lab.yaml and the
// manifest files by path. Tests use it for variants of a built-in.
func WriteDir(dir string, lab []byte, manifests map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, topology.LabFile), lab, 0o644); err != nil {
		return err
	}
	for p, b := range manifests {
		f := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
