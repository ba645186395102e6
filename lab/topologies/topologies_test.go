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

// A topology directory: the built-in's manifests load with it, a copy on
// disk resolves the same, and a manifest the mesh would refuse fails the
// load with the object and the field named, as kubectl or istioctl would.
func TestTopologyDirectories(t *testing.T) {
	top, src, err := Resolve("istio-mirror")
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) == 0 || !strings.Contains(string(src), "mesh: istio") || top.ManifestsDigest() == "" {
		t.Fatalf("istio-mirror: %d manifests, lab.yaml %q", len(top.Manifests), src)
	}
	// What the objects set and the lab does not play is reported by path.
	k, _, err := Resolve("kuma-canary-v3")
	if err != nil {
		t.Fatal(err)
	}
	if notes, err := k.CheckRoutes(); err != nil || !strings.Contains(strings.Join(notes, "\n"), "MeshHTTPRoute kuma-demo/test-server-canary in cluster c1: spec.to[0].rules[0].matches") {
		t.Errorf("kuma-canary-v3 notes %q, %v: want the route's matches named", notes, err)
	}
	ms, err := Manifests("istio-mirror")
	if err != nil {
		t.Fatal(err)
	}
	vs := string(ms["c1/virtualservice.yaml"])
	write := func(t *testing.T, labYAML string, files map[string]string) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "topo")
		out := map[string][]byte{}
		for k, v := range ms {
			out[k] = v
		}
		for k, v := range files {
			out[k] = []byte(v)
		}
		if err := WriteDir(dir, []byte(labYAML), out); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	if d, _, err := Resolve(write(t, string(src), nil)); err != nil || d.ManifestsDigest() != top.ManifestsDigest() {
		t.Fatalf("a copy on disk: %v (digest %s, want %s)", err, d.ManifestsDigest(), top.ManifestsDigest())
	}
	tests := []struct {
		name  string
		lab   string
		files map[string]string
		err   string
	}{
		{"a route to an undefined subset", string(src), map[string]string{"c1/virtualservice.yaml": strings.Replace(vs, "subset: v1", "subset: v9", 1)},
			`spec.http[0].route[0].destination.subset: subset "v9" is not defined`},
		{"a negative weight", string(src), map[string]string{"c1/virtualservice.yaml": strings.Replace(vs, "weight: 100", "weight: -1", 1)},
			"spec.http[0].route[0].weight: -1"},
		{"an unknown kind", string(src), map[string]string{"c1/extra.yaml": "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: s}\n"},
			"c1/extra.yaml:1: Sidecar s: kind Sidecar (apiVersion networking.istio.io/v1) is not a kind the lab serves"},
		{"a directory that is no cluster", string(src), map[string]string{"c9/x.yaml": vs}, "c9: not a cluster of the topology"},
		{"a policy beside the mesh", strings.Replace(string(src), "    mesh: istio\n", "    mesh: istio\n    policy: {mode: per-pod}\n", 1), nil,
			"entries[0].policy: entry istio-proxy routes by istio's own objects"},
		{"a selector its apps' pods do not match", strings.Replace(string(src), "  - name: callme-service\n    port: 8080\n", "  - name: callme-service\n    port: 8080\n    selector: {name: callme}\n", 1), nil,
			"services[1].selector.name: app callme-service-v1's pods do not carry name=callme"},
		{"a pod label the lab sets itself", strings.Replace(string(src), "    sidecar: istio\n", "    sidecar: istio\n    labels: {version: v9}\n", 1), nil,
			"apps[0].labels.version: the lab sets version itself"},
		{"an unknown mesh", strings.Replace(string(src), "mesh: istio", "mesh: linkerd", 1), nil, `entries[0].mesh: unknown mesh "linkerd"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Resolve(write(t, tc.lab, tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Resolve = %v, want an error containing %q", err, tc.err)
			}
		})
	}
}
