package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

var updateRBAC = flag.Bool("update-rbac", false, "rewrite examples/rbac.yaml from `mesh-verify rbac`")

// examples/rbac.yaml is what `mesh-verify rbac` prints today: a change to
// the permissions package kube declares must come with the regenerated
// example (go test ./cmd/mesh-verify -run RBACExample -update-rbac).
func TestRBACExampleIsGenerated(t *testing.T) {
	var out, errb bytes.Buffer
	if code := execute([]string{"rbac"}, &out, &errb); code != exitcode.Pass {
		t.Fatalf("rbac: exit %d: %s", code, errb.String())
	}
	path := filepath.Join("..", "..", "examples", "rbac.yaml")
	if *updateRBAC {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("examples/rbac.yaml differs from `mesh-verify rbac` (regenerate with -update-rbac):\n--- mesh-verify rbac\n%s\n--- %s\n%s", out.String(), path, want)
	}
}

func TestRBACCommand(t *testing.T) {
	// skupper-1 with its namespaces left unset: -n fills them, as run -n does.
	src, err := scenarios.BuiltinSource("skupper-1")
	if err != nil {
		t.Fatal(err)
	}
	unset := filepath.Join(t.TempDir(), "no-namespace.yaml")
	if err := os.WriteFile(unset, regexp.MustCompile(`(?m)^\s+namespace: interconnect\n`).ReplaceAll(src, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args       []string
		code       int
		has, hasNo []string
	}{
		// The built-in skupper-1 forwards to a Service in c1 and reads the
		// app's logs in c2 and c3: one Role in interconnect, no ClusterRole.
		{[]string{"rbac", "skupper-1"}, exitcode.Pass,
			[]string{"kind: Role\n", "namespace: interconnect", "- pods/log", "- services", "- pods/portforward"},
			[]string{"kind: ClusterRole", "deployments", "pods/proxy"}},
		// Only c2's needs: the app's logs, no port-forward.
		{[]string{"rbac", "skupper-1", "--cluster", "c2"}, exitcode.Pass,
			[]string{"- pods/log"}, []string{"- services", "- pods/portforward"}},
		{[]string{"rbac", "--cluster-wide", "--service-account", "gate", "-n", "ci"}, exitcode.Pass,
			// The workers' ServiceAccount keeps its Role in its namespace.
			[]string{"kind: ClusterRole\n", "name: ci:gate", "kind: ClusterRoleBinding", "- nodes", "- deployments", "- jobs",
				"kind: Role\nmetadata:\n  labels:\n    app.kubernetes.io/name: mesh-verify\n  name: mesh-verify-worker\n  namespace: ci\n"},
			[]string{"kind: Role\nmetadata:\n  labels:\n    app.kubernetes.io/name: mesh-verify\n  name: gate\n", "resourceNames"}},
		{[]string{"rbac", "skupper-1", "--cluster", "c9"}, exitcode.InvalidInput, []string{"--cluster c9: scenario skupper-1 declares no such cluster"}, nil},
		{[]string{"rbac", "url-split"}, exitcode.InvalidInput, []string{"makes no Kubernetes API call"}, nil},
		{[]string{"rbac", "-n", "Not_A_Namespace"}, exitcode.InvalidInput, []string{`--namespace "Not_A_Namespace"`}, nil},
		{[]string{"rbac", "--cluster", "c1"}, exitcode.InvalidInput, []string{"--cluster c1 needs a scenario"}, nil},
		{[]string{"rbac", unset, "-n", "shop"}, exitcode.Pass, []string{"namespace: shop", "- pods/log", "- pods/portforward"}, []string{"interconnect"}},
		{[]string{"rbac", "skupper-1", "--set", "target.portForward.resource=deploy/router"}, exitcode.Pass,
			[]string{"- deployments", "namespace: interconnect"}, []string{"- services"}},
		{[]string{"rbac", "skupper-1", "--set", "observe[0].namespace=shop", "--cluster", "c2"}, exitcode.Pass,
			[]string{"namespace: shop"}, []string{"interconnect"}},
		// Workers: their Role and ServiceAccount in the target's namespace,
		// named as the scenario's attack.serviceAccount says.
		{[]string{"rbac", "kuma-canary", "--cluster", "c1", "--set", "attack.workers=2", "--set", "attack.serviceAccount=load-sa"}, exitcode.Pass,
			[]string{"kind: ServiceAccount\nmetadata:\n  labels:\n    app.kubernetes.io/name: mesh-verify\n  name: load-sa\n  namespace: kuma-demo\n", "- jobs"},
			[]string{"mesh-verify-worker", "- pods/portforward"}},
		// --workers N is --set attack.workers=N: the Job's and the workers'
		// permissions appear, which the same scenario without it lacks.
		{[]string{"rbac", "kuma-canary", "--cluster", "c1", "--workers", "3"}, exitcode.Pass,
			[]string{"kind: ServiceAccount\nmetadata:\n  labels:\n    app.kubernetes.io/name: mesh-verify\n  name: mesh-verify-worker\n", "- jobs", "- secrets"}, nil},
		{[]string{"rbac", "kuma-canary", "--cluster", "c1"}, exitcode.Pass, nil, []string{"- jobs", "mesh-verify-worker"}},
		{[]string{"rbac", "kuma-canary", "--workers", "1001"}, exitcode.InvalidInput, []string{"--workers 1001: want 0 (attack from this process) to 1000 worker pods"}, nil},
		{[]string{"rbac", "--workers", "2"}, exitcode.InvalidInput, []string{"--workers needs a scenario"}, nil},
		{[]string{"rbac", "skupper-1", "--set", "attack.rat=5"}, exitcode.InvalidInput, []string{`--set attack.rat=5: attack.rat: unknown field`}, nil},
		{[]string{"rbac", "--set", "attack.rate=5/s"}, exitcode.InvalidInput, []string{"--set needs a scenario"}, nil},
	} {
		var out, errb bytes.Buffer
		code := execute(c.args, &out, &errb)
		text := out.String() + errb.String()
		if code != c.code {
			t.Errorf("%v: exit %d, want %d: %s", c.args, code, c.code, text)
			continue
		}
		for _, h := range c.has {
			if !strings.Contains(text, h) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, h, text)
			}
		}
		for _, h := range c.hasNo {
			if strings.Contains(text, h) {
				t.Errorf("%v: output has %q:\n%s", c.args, h, text)
			}
		}
	}
}
