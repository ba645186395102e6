package topology

import (
	"strings"
	"testing"
)

const good = `apiVersion: lab.mesh-verify.io/v1alpha1
kind: Topology
metadata: {name: t1}
clusters: [c1, c2]
apps:
  - name: callme
    kind: callme
    service: callme-service
    replicas: {c1: 1, c2: 2}
  - name: caller
    kind: caller
    service: caller-service
    replicas: {c1: 1}
    calls: callme-service:8080
services:
  - name: callme-service
  - name: caller-service
    clusters: [c1]
entries:
  - name: router
    cluster: c1
    service: entry
    to: callme-service
    mesh: skupper
  - name: sidecar
    cluster: c1
    sidecarOf: caller
    to: callme-service
    mesh: istio
`

func TestParseGood(t *testing.T) {
	top, err := Parse("t.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := top.ExpectedPods(); got["c1"] != 3 || got["c2"] != 2 {
		t.Errorf("ExpectedPods = %v, want c1=3 (callme, caller, router) c2=2", got)
	}
	a := top.App("callme")
	if a.Namespace != "default" || a.Port != (Port{8080, "http"}) || a.Version != "v1" {
		t.Errorf("defaults not applied: %+v", a)
	}
	if got := top.ServiceClusters(top.ServiceByName("default", "callme-service")); strings.Join(got, ",") != "c1,c2" {
		t.Errorf("callme-service clusters = %v", got)
	}
	ds := top.Deployments("c1")
	if len(ds) != 3 || ds[2].Name != "router" || ds[2].Spec.Template.Labels[LabelEntry] != "router" {
		t.Fatalf("c1 Deployments = %d, last %v", len(ds), ds[len(ds)-1].Name)
	}
	if *ds[0].Spec.Replicas != 1 || ds[0].Spec.Template.Labels[LabelApp] != "callme-service" ||
		ds[0].Spec.Template.Spec.Containers[0].Ports[0].Name != "http" {
		t.Errorf("callme Deployment = %+v", ds[0].Spec)
	}
	svcs := top.ServiceObjects("c1")
	names := []string{}
	for _, s := range svcs {
		names = append(names, s.Name+"->"+s.Spec.Ports[0].TargetPort.String())
	}
	if strings.Join(names, " ") != "callme-service->http caller-service->http entry->http" {
		t.Errorf("c1 Services = %v", names)
	}
	if got := top.Namespaces("c2"); len(got) != 1 || got[0] != "default" {
		t.Errorf("Namespaces(c2) = %v", got)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []edit{
		{"unknown field", "    calls: callme-service:8080\n", "    calls: callme-service:8080\n    cals: x\n"},
		{"unknown cluster", "{c1: 1, c2: 2}", "{c1: 1, c4: 2}"},
		{"bad kind", "kind: callme\n", "kind: callmee\n"},
		{"undeclared service", "to: callme-service\n    mesh: skupper", "to: nope\n    mesh: skupper"},
		{"unknown data plane", "    mesh: istio\n", "    mesh: istio\n    dataPlane: envoy\n"},
		{"a private policy", "    mesh: skupper\n", "    mesh: skupper\n    policy: {mode: balanced, costs: {c2: 3}}\n"},
		{"an empty private policy", "    mesh: skupper\n", "    mesh: skupper\n    policy:\n"},
		{"a private policy {}", "    mesh: skupper\n", "    mesh: skupper\n    policy: {}\n"},
		{"no mesh", "    mesh: istio\n", ""},
		{"unknown mesh", "mesh: istio", "mesh: linkerd"},
		{"selector selects nothing", "  - name: caller-service\n    clusters: [c1]\n", "  - name: caller-service\n    clusters: [c1]\n    selector: {app: nobody}\n"},
		{"bad app name", "    service: caller-service\n", "    service: caller-service\n    appName: Caller_Service\n"},
		{"gateway labels on a sidecar", "    sidecarOf: caller\n", "    sidecarOf: caller\n    labels: {istio: ingressgateway}\n"},
		{"a lab label on a gateway", "    service: entry\n", "    service: entry\n    labels: {app: other}\n"},
		{"a bad label value", "    service: entry\n", "    service: entry\n    labels: {istio: \"in gress\"}\n"},
	}
	wants := map[string][]string{
		"unknown field":      {"t.yaml:15", "unknown field cals"},
		"unknown cluster":    {"t.yaml:9:", "apps[0].replicas.c4", `unknown cluster "c4" (declared: c1, c2)`},
		"bad kind":           {"t.yaml:7:", "apps[0].kind", `unknown kind "callmee"`},
		"undeclared service": {"t.yaml:23:9", "entries[0].to", "no Service default/nope"},
		"unknown data plane": {"t.yaml:30:16", "entries[1].dataPlane", `unknown data plane "envoy" (known: simulator, nginx)`},
		"a private policy": {"t.yaml:25:5", "entries[0].policy", "entry router: the lab's private policy block is gone; routing comes from the mesh's own objects",
			"Skupper's link Secrets with skupper.io/cost"},
		"an empty private policy":     {"t.yaml:25:", "entries[0].policy", "entry router: the lab's private policy block is gone"},
		"a private policy {}":         {"t.yaml:25:5", "entries[0].policy", "entry router: the lab's private policy block is gone"},
		"no mesh":                     {"entries[1].mesh", "required: the mesh whose own objects route entry sidecar"},
		"unknown mesh":                {"t.yaml:29:11", "entries[1].mesh", `unknown mesh "linkerd" (known: cilium, istio, kuma, skupper)`},
		"selector selects nothing":    {"services[1].name", "Service default/caller-service selects no app's pods"},
		"bad app name":                {"apps[1].appName", `invalid app name "Caller_Service"`},
		"gateway labels on a sidecar": {"entries[1].labels", "labels are a gateway entry's pod labels; this entry runs no pod of its own"},
		"a lab label on a gateway":    {"entries[0].labels.app", "the lab sets app itself"},
		"a bad label value":           {"entries[0].labels.istio", `value "in gress"`},
	}
	wantParseErrors(t, "t.yaml", good, cases, wants)
}

// `lab up --data-plane nginx` plays every entry with nginx, or says which
// entry's route nginx cannot play: Skupper's router (balanced by open
// connections + link cost) it cannot, an Istio sidecar without a
// VirtualService (per pod) it can.
func TestUseDataPlane(t *testing.T) {
	top, err := Parse("t.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	err = top.UseDataPlane(DataPlaneNginx)
	if err == nil || !strings.Contains(err.Error(), "topology t1, entry router: the nginx data plane cannot play the route its manifests give: mode balanced") ||
		strings.Contains(err.Error(), "entry sidecar") {
		t.Fatalf("UseDataPlane(nginx) = %v, want only the balanced router refused", err)
	}
	if !top.Entry("sidecar").UsesNginx() {
		t.Error("the weighted sidecar does not use nginx")
	}
	if err := top.UseDataPlane("envoy"); err == nil || !strings.Contains(err.Error(), `data plane "envoy": want one of simulator, nginx`) {
		t.Errorf("UseDataPlane(envoy) = %v", err)
	}
	if err := top.UseDataPlane(DataPlaneSimulator); err != nil || top.Entry("router").UsesNginx() {
		t.Errorf("UseDataPlane(simulator) = %v", err)
	}
}

func TestCallerNeedsSidecar(t *testing.T) {
	src := strings.Replace(good, "    sidecarOf: caller\n", "    sidecarOf: callme\n", 1)
	_, err := Parse("t.yaml", []byte(src))
	for _, w := range []string{"caller caller in cluster c1 has no sidecar entry", "app callme is a callme; only a caller"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v, want %q", err, w)
		}
	}
}

func TestEmptyAndMultiDoc(t *testing.T) {
	if _, err := Parse("e.yaml", nil); err == nil || !strings.Contains(err.Error(), "empty topology") {
		t.Errorf("empty: %v", err)
	}
	if _, err := Parse("m.yaml", []byte(good+"---\n"+good)); err == nil || !strings.Contains(err.Error(), "second YAML document") {
		t.Errorf("two documents: %v", err)
	}
}

// Flagger's Services: the apex selects the primary's pods (which carry
// app=<apex>-primary), the canary Service the canary's (app=<apex>); a
// Service whose selector leaves out the app named after it is accepted,
// and SelectedBy follows the selectors, not the apps' service field.
func TestFlaggerServicesSelect(t *testing.T) {
	t.Parallel()
	topo, err := Parse("flagger.yaml", []byte(`apiVersion: lab.mesh-verify.io/v1alpha1
kind: Topology
metadata: {name: flagger}
clusters: [c1]
apps:
  - {name: callme-service-primary, kind: callme, service: callme-service-primary, appName: callme-service, version: v1, namespace: callme, replicas: {c1: 1}}
  - {name: callme-service, kind: callme, service: callme-service, version: v2, namespace: callme, replicas: {c1: 1}}
services:
  - {name: callme-service, namespace: callme, selector: {app: callme-service-primary}}
  - {name: callme-service-primary, namespace: callme}
  - {name: callme-service-canary, namespace: callme, selector: {app: callme-service}}
entries:
  - {name: gw, cluster: c1, namespace: callme, service: gw, to: callme-service, mesh: istio}
`))
	if err != nil {
		t.Fatal(err)
	}
	primary, canary := topo.App("callme-service-primary"), topo.App("callme-service")
	for _, c := range []struct {
		a       *App
		service string
		want    bool
	}{
		{primary, "callme-service", true}, {canary, "callme-service", false},
		{primary, "callme-service-primary", true}, {canary, "callme-service-primary", false},
		{primary, "callme-service-canary", false}, {canary, "callme-service-canary", true},
	} {
		if got := topo.SelectedBy(c.a, "callme", c.service); got != c.want {
			t.Errorf("SelectedBy(%s, %s) = %v, want %v", c.a.Name, c.service, got, c.want)
		}
	}
	if primary.Says() != "callme-service" || canary.Says() != "callme-service" {
		t.Errorf("the apps say %q and %q, want callme-service both", primary.Says(), canary.Says())
	}
	if got := topo.ServiceClusters(topo.ServiceByName("callme", "callme-service-canary")); len(got) != 1 || got[0] != "c1" {
		t.Errorf("the canary Service is created in %v, want [c1] where its pods run", got)
	}
	// Its Istio gateway has no Gateway object: it comes up, as a real one
	// does, and lab up says it will answer every request 404.
	notes, err := topo.CheckRoutes()
	if err != nil || !strings.Contains(strings.Join(notes, "\n"), "entry gw: no route, every request answered 404 (NR): no VirtualService bound to a Gateway selecting gw (pod labels app=gw,istio=ingressgateway,lab.mesh-verify.io/entry=gw)") {
		t.Errorf("CheckRoutes = %v, notes %q: want a note that gateway gw has no route", err, notes)
	}
}

// A Kuma gateway entry is a delegated gateway: its pod carries
// kuma.io/gateway: enabled, as Kuma's docs have a user mark one; other
// meshes' gateways do not.
func TestKumaGatewayIsDelegated(t *testing.T) {
	t.Parallel()
	for _, mesh := range []string{"kuma", "skupper"} {
		top, err := Parse("t.yaml", []byte(strings.Replace(good, "    mesh: skupper\n", "    mesh: "+mesh+"\n", 1)))
		if err != nil {
			t.Fatal(err)
		}
		ds := top.Deployments("c1")
		got := ds[len(ds)-1].Spec.Template.Annotations[kumaGatewayAnnotation]
		if want := map[string]string{"kuma": "enabled"}[mesh]; got != want || ds[len(ds)-1].Name != "router" {
			t.Errorf("mesh %s: gateway %s annotation %s=%q, want %q", mesh, ds[len(ds)-1].Name, kumaGatewayAnnotation, got, want)
		}
	}
}
