//go:build unix

package topology_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mesh-verify/mesh-verify/lab/topologies"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// `lab up --topology FILE` reads a regular file of at most MaxFileBytes:
// a FIFO, /dev/zero or a larger file is refused before it is read, by
// Load and by topologies.Resolve alike (a FIFO's name need not look like
// a file's).
func TestTopologyFileBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("#"), topology.MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "topo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		big:         big + " is larger than 256 KiB, the limit of a topology file",
		fifo:        fifo + " is not a regular file (a FIFO): want a topology file",
		"/dev/zero": "/dev/zero is not a regular file (a character device): want a topology file",
	} {
		if _, err := topology.Load(file); err == nil || !strings.Contains(err.Error(), "read topology: "+want) {
			t.Errorf("Load(%s): %v, want %q", file, err, want)
		}
		if _, _, err := topologies.Resolve(file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Resolve(%s): %v, want %q", file, err, want)
		}
	}
	// The limit is above every built-in topology.
	for _, name := range topologies.Names() {
		if src, err := topologies.Source(name); err != nil || len(src) > topology.MaxFileBytes/8 {
			t.Errorf("built-in %s: %d bytes, %v; want far below the %d of a file", name, len(src), err, topology.MaxFileBytes)
		}
	}
}
