package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/mesh-verify/mesh-verify/lab/kwok"
)

// findBinaries locates the lab's tool binaries (see Options.Bin).
func findBinaries(ctx context.Context, o Options) (kwok.Binaries, error) {
	if o.Bin != "" {
		b := kwok.Binaries(o.Bin)
		return b, b.Check()
	}
	if d := os.Getenv("MESH_VERIFY_LAB_BIN"); d != "" {
		if b := kwok.Binaries(d); b.Check() == nil {
			return b, nil
		}
	}
	root := o.RepoRoot
	if root == "" {
		root = findRepoRoot()
	}
	if root != "" {
		fmt.Fprintf(o.Out, "  lab binaries: tools/lab/build.sh (minutes on the first run, instant when cached)\n")
		return kwok.FindBinaries(ctx, root)
	}
	if b := newestCachedBuild(); b != "" {
		return b, nil
	}
	return "", fmt.Errorf("lab binaries not found: set MESH_VERIFY_LAB_BIN or --bin to the output of tools/lab/build.sh, or run from the mesh-verify repository")
}

// findRepoRoot walks up from the working directory to the directory that
// holds tools/lab/build.sh.
func findRepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if st, err := os.Stat(filepath.Join(dir, "tools", "lab", "build.sh")); err == nil && !st.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// newestCachedBuild is the most recent complete bin-* directory that
// build.sh left in its default cache.
func newestCachedBuild() kwok.Binaries {
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	dirs, _ := filepath.Glob(filepath.Join(cache, "mesh-verify", "lab", "bin-*"))
	type cand struct {
		dir string
		mod int64
	}
	var cs []cand
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && kwok.Binaries(d).Check() == nil {
			cs = append(cs, cand{d, st.ModTime().UnixNano()})
		}
	}
	if len(cs) == 0 {
		return ""
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].mod > cs[j].mod })
	return kwok.Binaries(cs[0].dir)
}
