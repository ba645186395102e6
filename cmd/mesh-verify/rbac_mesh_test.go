package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/exitcode"
)

// A split that reads its expectation from the mesh: rbac grants the
// reads of that kind only, where they are made, and plan says the shares
// come from the object at run time.
func TestRBACAndPlanFromMesh(t *testing.T) {
	dir := t.TempDir()
	scenario := func(name, split string) string {
		p := filepath.Join(dir, name+".yaml")
		src := `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: ` + name + `}
clusters: [{name: c1, context: kind-c1}, {name: c2, context: kind-c2}]
target: {url: "http://127.0.0.1:1/"}
attack: {rate: 10, requests: 100}
attribution: {preset: tutorial}
expect:
  - split: ` + split + "\n"
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	vs := scenario("vs", "{by: version, fromMesh: {virtualService: demo/reviews}}")
	sk := scenario("sk", "{by: cluster, fromMesh: {skupper: hello/backend, selector: app=backend}}")
	for _, c := range []struct {
		args       []string
		has, hasNo []string
	}{
		{[]string{"rbac", vs, "--cluster", "c1"}, []string{"namespace: demo", "- virtualservices", "- destinationrules", "networking.istio.io", "- services", "- pods"}, []string{"- secrets", "kind: ClusterRole\n", "pods/log"}},
		// c2 holds no VirtualService: only the Service and pods behind it.
		{[]string{"rbac", vs, "--cluster", "c2"}, []string{"- services", "- pods"}, []string{"- virtualservices"}},
		{[]string{"rbac", sk, "--cluster", "c2"}, []string{"namespace: hello", "- secrets", "- links", "skupper.io", "- connectors", "- listeners", "- skupper-services\n  resources:\n  - configmaps"}, []string{"- virtualservices"}},
		{[]string{"plan", vs}, []string{"not planned here: its expected shares are read from VirtualService/demo/reviews when the run starts"}, nil},
	} {
		var out, errb bytes.Buffer
		code := execute(c.args, &out, &errb)
		text := out.String() + errb.String()
		if code != exitcode.Pass {
			t.Errorf("%v: exit %d: %s", c.args, code, text)
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
