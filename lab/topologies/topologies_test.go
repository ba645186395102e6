package topologies

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every built-in topology parses, is named after its file, and says which
// seed experiment it reproduces.
func TestBuiltins(t *testing.T) {
	names := Names()
	for _, want := range []string{"skupper-1", "skupper-2", "skupper-3", "skupper-4", "istio-mirror", "cilium-c2", "cilium-both", "kuma-canary"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("built-ins %v lack %s", names, want)
		}
	}
	for _, n := range names {
		top, err := Builtin(n)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if top.Metadata.Name != n || top.Metadata.Seed == "" {
			t.Errorf("%s: name %q, seed %q", n, top.Metadata.Name, top.Metadata.Seed)
		}
	}
	if _, err := Builtin("../topologies/skupper-1"); err == nil {
		t.Error("a path is not a built-in name")
	}
}

func TestResolve(t *testing.T) {
	if top, src, err := Resolve("skupper-3"); err != nil || top.File != "builtin:skupper-3" || len(src) == 0 {
		t.Fatalf("Resolve(skupper-3) = %v, %d bytes, %v", top, len(src), err)
	}
	src, _ := Source("kuma-canary")
	f := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(f, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if top, _, err := Resolve(f); err != nil || top.File != f {
		t.Fatalf("Resolve(file) = %v, %v", top, err)
	}
	if _, _, err := Resolve("nope"); err == nil || !strings.Contains(err.Error(), "skupper-1") {
		t.Errorf("Resolve(nope) = %v, want the list of built-ins", err)
	}
	if _, _, err := Resolve("missing.yaml"); err == nil || !strings.Contains(err.Error(), "read topology") {
		t.Errorf("Resolve(missing.yaml) = %v", err)
	}
}
