package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// complete runs cobra's hidden __complete command, as the shell scripts
// of `mesh-verify completion` do, and returns the candidates.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := execute(append([]string{"__complete"}, args...), &out, &errb); code != 0 {
		t.Fatalf("__complete %q: exit %d: %s", args, code, errb.String())
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if l != "" && !strings.HasPrefix(l, ":") {
			got = append(got, strings.SplitN(l, "\t", 2)[0])
		}
	}
	return got
}

func has(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, l := range list {
			found = found || l == w
		}
		if !found {
			return false
		}
	}
	return true
}

// TestCompletion: run (several), validate (several), plan and rbac
// complete built-in scenarios and YAML files;
// --context completes the kubeconfig's contexts, after CLUSTER= for a
// scenario with several clusters; lab up --topology the topologies; -o the
// outputs (issue 26).
func TestCompletion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"canary.yaml", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "scen"), 0o755); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: a, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts:
  - {name: kind-c1, context: {cluster: a, user: u}}
  - {name: kind-c2, context: {cluster: a, user: u}}
  - {name: prod-eu, context: {cluster: a, user: u}}
`), 0o600); err != nil {
		t.Fatal(err)
	}

	if got := complete(t, "run", "skupper-"); !has(got, "skupper-1", "skupper-2", "skupper-3", "skupper-4") {
		t.Errorf("run skupper-: %q", got)
	}
	got := complete(t, "run", dir+"/")
	if !has(got, dir+"/canary.yaml", dir+"/scen/") || has(got, dir+"/notes.txt") {
		t.Errorf("run %s/: %q, want canary.yaml and scen/, not notes.txt", dir, got)
	}
	if got := complete(t, "run", ""); !has(got, "istio-mirror", "url-split") {
		t.Errorf("run '': %q, want the built-ins", got)
	}
	if got := complete(t, "run", "skupper-2", "--kubeconfig", kc, "--context", ""); !has(got, "c1=", "c2=", "c3=") {
		t.Errorf("run skupper-2 --context '': %q, want the scenario's clusters", got)
	}
	if got := complete(t, "run", "skupper-2", "--kubeconfig", kc, "--context", "c2=kind"); !has(got, "c2=kind-c1", "c2=kind-c2") || has(got, "c2=prod-eu") {
		t.Errorf("run skupper-2 --context c2=kind: %q", got)
	}
	if got := complete(t, "port-forward", "--kubeconfig", kc, "--context", "prod"); !has(got, "prod-eu") || len(got) != 1 {
		t.Errorf("port-forward --context prod: %q", got)
	}
	if got := complete(t, "lab", "up", "--topology", "istio"); !has(got, "istio-mirror") {
		t.Errorf("lab up --topology istio: %q", got)
	}
	if got := complete(t, "run", "x.yaml", "-o", ""); !has(got, "table", "json", "md") {
		t.Errorf("run -o: %q", got)
	}
	// Several scenarios: run and validate go on completing after the
	// first; plan and rbac take one (a file or a built-in).
	if got := complete(t, "run", "url-split", "skupper-"); !has(got, "skupper-1") {
		t.Errorf("run url-split skupper-: %q, want the built-ins again", got)
	}
	if got := complete(t, "rbac", dir+"/"); !has(got, dir+"/canary.yaml") {
		t.Errorf("rbac %s/: %q, want scenario files too", dir, got)
	}
	if got := complete(t, "rbac", "url-split", ""); len(got) != 0 {
		t.Errorf("rbac url-split '': %q, want nothing (one scenario)", got)
	}
}
