// Package yamlfiles completes file arguments for the shell: the YAML files
// and directories a typed prefix can become. mesh-verify's scenario
// arguments and mesh-verify-lab's --topology both take such files.
package yamlfiles

import (
	"os"
	"path/filepath"
	"strings"
)

// Complete lists the .yaml/.yml files and the directories (with a
// trailing /) whose path starts with prefix. Hidden entries are left out
// unless prefix names one.
func Complete(prefix string) []string {
	dir, base := filepath.Split(prefix)
	read := dir
	if read == "" {
		read = "."
	}
	entries, err := os.ReadDir(read)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, base) || strings.HasPrefix(name, ".") && !strings.HasPrefix(base, ".") {
			continue
		}
		switch {
		case e.IsDir():
			out = append(out, dir+name+"/")
		case strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"):
			out = append(out, dir+name)
		}
	}
	return out
}
