package topology

import "testing"

// A workers entry: the outbound data plane of mesh-verify's worker pods
// in its cluster, running no pod of its own and routed by a mesh.
const withWorkers = `apiVersion: lab.mesh-verify.io/v1alpha1
kind: Topology
metadata: {name: w1}
clusters: [c1, c2]
apps:
  - name: callme
    kind: callme
    service: callme-service
    replicas: {c1: 1, c2: 1}
    sidecar: istio
  - name: rebel-base
    kind: rebel-base
    service: rebel-base
    port: {number: 80, name: http}
    replicas: {c1: 2, c2: 2}
    clusterNames: {c1: Cluster-1, c2: Cluster-2}
services:
  - name: callme-service
  - name: rebel-base
    port: 80
    annotations: {service.cilium.io/global: "true"}
entries:
  - name: client-sidecar
    workers: true
    cluster: c1
    to: callme-service
    accessLog: istio
    mesh: istio
  - name: client-datapath
    workers: true
    cluster: c2
    to: rebel-base
    mesh: cilium
`

func TestWorkersEntries(t *testing.T) {
	t.Parallel()
	top, err := Parse("w.yaml", []byte(withWorkers))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cluster, entry, envoy string }{{"c1", "client-sidecar", "istio"}, {"c2", "client-datapath", ""}} {
		ws := top.WorkersIn(c.cluster)
		if len(ws) != 1 || ws[0].Name != c.entry {
			t.Fatalf("WorkersIn(%s) = %v, want %s", c.cluster, ws, c.entry)
		}
		e := ws[0]
		if e.Gateway() || e.Pods() != 0 || top.Envoy(e) != c.envoy {
			t.Errorf("%s: gateway %v, %d pods, Envoy %q; want no gateway, no pod, Envoy %q", e.Name, e.Gateway(), e.Pods(), top.Envoy(e), c.envoy)
		}
	}
	// Only the apps' pods (callme 1, rebel-base 2): a workers entry
	// renders no Deployment.
	for _, c := range []string{"c1", "c2"} {
		if got := top.ExpectedPods()[c]; got != 3 {
			t.Errorf("expected pods in %s: %d, want 3", c, got)
		}
	}
	cases := []edit{
		{"a service", "    workers: true\n    cluster: c1\n", "    workers: true\n    service: sleep\n    cluster: c1\n"},
		{"no mesh", "    accessLog: istio\n    mesh: istio\n", "    accessLog: istio\n"},
		{"istio without its log", "    accessLog: istio\n    mesh: istio\n", "    mesh: istio\n"},
		{"kuma's log on istio", "    accessLog: istio\n    mesh: istio\n", "    accessLog: kuma\n    mesh: istio\n"},
		{"a log on cilium", "    mesh: cilium\n", "    mesh: cilium\n    accessLog: istio\n"},
		{"an edge", "    mesh: cilium\n", "    mesh: cilium\n    edge: true\n"},
		{"nginx", "    mesh: cilium\n", "    mesh: cilium\n    dataPlane: nginx\n"},
	}
	wants := map[string][]string{
		"a service":             {"entries[0].workers", "service, port, replicas and sidecarOf do not apply"},
		"no mesh":               {"entries[0].mesh", "required for a workers entry"},
		"istio without its log": {"entries[0].accessLog", `want "istio": the istio sidecar injected into a worker pod writes istio's access log`},
		"kuma's log on istio":   {"entries[0].accessLog", `want "istio"`},
		"a log on cilium":       {"entries[1].accessLog", "cilium injects no proxy into a worker pod: no access log"},
		"an edge":               {"entries[1].edge", "no edge proxy"},
		"nginx":                 {"entries[1].dataPlane", "played by the simulator only"},
	}
	wantParseErrors(t, "w.yaml", withWorkers, cases, wants)
}

// The injectors' decision, as for the topology's Deployments: the
// namespace's label, overridden by the pod's label or annotation.
func TestInjectedSidecar(t *testing.T) {
	t.Parallel()
	istioNS := map[string]string{"istio-injection": "enabled"}
	kumaNS := map[string]string{"kuma.io/sidecar-injection": "enabled"}
	for _, c := range []struct {
		name               string
		ns, labels, annots map[string]string
		want, err          string
	}{
		{"istio namespace", istioNS, nil, nil, "istio", ""},
		{"kuma namespace", kumaNS, nil, nil, "kuma", ""},
		{"plain namespace", nil, nil, nil, "", ""},
		{"istio opted out by label", istioNS, map[string]string{"sidecar.istio.io/inject": "false"}, nil, "", ""},
		{"istio opted in by label", nil, map[string]string{"sidecar.istio.io/inject": "true"}, nil, "istio", ""},
		{"kuma opted out by annotation", kumaNS, nil, map[string]string{"kuma.io/sidecar-injection": "disabled"}, "", ""},
		{"kuma opted in by annotation", nil, nil, map[string]string{"kuma.io/sidecar-injection": "enabled"}, "kuma", ""},
		{"a bad istio value", istioNS, map[string]string{"sidecar.istio.io/inject": "yes"}, nil, "", `sidecar.istio.io/inject "yes": want "true" or "false"`},
		{"a bad kuma value", nil, nil, map[string]string{"kuma.io/sidecar-injection": "on"}, "", `kuma.io/sidecar-injection "on": want enabled or disabled`},
	} {
		got, err := InjectedSidecar(c.ns, c.labels, c.annots)
		switch {
		case c.err != "" && (err == nil || err.Error() != c.err):
			t.Errorf("%s: error %v, want %q", c.name, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
