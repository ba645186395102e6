package kwok

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// A cluster created again (lab up recreates one that came up broken)
// finds its earlier kind-NAME context still there: the rename replaces it
// instead of failing as `kubectl config rename-context` does.
func TestRenameContextReplacesAStaleOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const kc = `apiVersion: v1
kind: Config
clusters:
- {name: kwok-c1, cluster: {server: "https://127.0.0.1:2"}}
- {name: old, cluster: {server: "https://127.0.0.1:1"}}
users: [{name: kwok-c1, user: {}}]
contexts:
- {name: kwok-c1, context: {cluster: kwok-c1, user: kwok-c1}}
- {name: kind-c1, context: {cluster: old, user: kwok-c1}}
current-context: kwok-c1
`
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := renameContext(path, "kwok-c1", "kind-c1"); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Contexts["kwok-c1"]; ok || cfg.Contexts["kind-c1"] == nil || cfg.Contexts["kind-c1"].Cluster != "kwok-c1" || cfg.CurrentContext != "kind-c1" {
		t.Fatalf("contexts %v, current %q: want kind-c1 on cluster kwok-c1, current", cfg.Contexts, cfg.CurrentContext)
	}
	if err := renameContext(path, "kwok-c9", "kind-c9"); err == nil {
		t.Error("renaming a context that does not exist succeeded")
	}
}
