// Package sibling finds mesh-verify's other program: mesh-verify runs
// mesh-verify-lab for `mesh-verify lab` (as kubectl runs its plugins), and
// the lab's daemon runs mesh-verify for the pods of mesh-verify's image.
// `make build` puts both in bin/, `go install` both in GOBIN.
package sibling

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Find returns the path of the executable name: the one beside the running
// executable first (the pair built together), else the first on PATH.
func Find(name string) (string, error) {
	self, err := os.Executable()
	if err == nil {
		beside := filepath.Join(filepath.Dir(self), name)
		if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return beside, nil
		}
	}
	p, lerr := exec.LookPath(name)
	if lerr == nil {
		return p, nil
	}
	where := "beside this executable"
	if err == nil {
		where = "in " + filepath.Dir(self)
	}
	return "", fmt.Errorf("find %s: none %s nor on PATH (make build builds it into bin/, go install ./cmd/%s into GOBIN): %w", name, where, name, lerr)
}
