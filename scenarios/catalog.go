package scenarios

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// catalog holds the built-in scenarios. go:embed needs a package-level
// variable; embed.FS is read-only, so it is not mutable state.
//
//go:embed catalog/*.yaml
var catalog embed.FS

// BuiltinNames lists the built-in scenarios, sorted.
func BuiltinNames() []string {
	entries, _ := fs.ReadDir(catalog, "catalog")
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// BuiltinSource is a built-in scenario's YAML as shipped, comments and
// all (`mesh-verify scenarios show NAME`).
func BuiltinSource(name string) ([]byte, error) {
	data, err := catalog.ReadFile(path.Join("catalog", name+".yaml"))
	if err != nil || strings.ContainsAny(name, "/\\") {
		return nil, fmt.Errorf("no built-in scenario %q (built-in: %s)", name, strings.Join(BuiltinNames(), ", "))
	}
	return data, nil
}

// Builtin loads a built-in scenario by name, freshly parsed each time so
// callers may change the result. Its File is "" (it has no path on disk).
func Builtin(name string) (*Scenario, error) {
	data, err := BuiltinSource(name)
	if err != nil {
		return nil, err
	}
	s, err := Parse("builtin:"+name, data)
	if err != nil {
		return nil, err
	}
	s.File = ""
	return s, nil
}
