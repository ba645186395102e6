package topology

import (
	"strings"
	"testing"
)

const withSidecars = `apiVersion: lab.mesh-verify.io/v1alpha1
kind: Topology
metadata: {name: s1}
clusters: [c1, c2]
apps:
  - name: caller
    kind: caller
    service: caller-service
    replicas: {c1: 1}
    calls: callme-service:8080
    sidecar: istio
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
  - name: echo
    kind: echo
    service: echo
    replicas: {c2: 1}
    variant: "1.18"
    sidecar: kuma
services:
  - name: caller-service
  - name: callme-service
  - name: rebel-base
    port: 80
  - name: echo
entries:
  - name: istio-proxy
    cluster: c1
    sidecarOf: caller
    to: callme-service
    mesh: istio
  - name: gateway
    cluster: c1
    service: gateway
    to: echo
    accessLog: kuma
    mesh: kuma
  - name: router
    cluster: c2
    service: router
    to: rebel-base
    mesh: skupper
`

func TestSidecarsAndRealAppsRender(t *testing.T) {
	top, err := Parse("s.yaml", []byte(withSidecars))
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{top.Envoy(top.Entry("istio-proxy")), top.Envoy(top.Entry("gateway")), top.Envoy(top.Entry("router"))}; strings.Join(got, ",") != "istio,kuma," {
		t.Errorf("Envoy formats of the entries = %q, want istio, kuma and none", got)
	}
	ds := map[string]int{}
	for i, d := range top.Deployments("c1") {
		ds[d.Name] = i
	}
	d1 := top.Deployments("c1")
	callme := d1[ds["callme"]].Spec.Template
	if n := len(callme.Spec.Containers); n != 2 || callme.Spec.Containers[1].Name != "istio-proxy" ||
		callme.Spec.Containers[1].Ports[0].ContainerPort != 15090 || callme.Spec.Containers[1].Ports[0].Name != "http-envoy-prom" {
		t.Fatalf("callme containers %+v, want the app and istio-proxy with port 15090", callme.Spec.Containers)
	}
	if callme.Annotations["prometheus.io/port"] != "15020" || callme.Annotations["kubectl.kubernetes.io/default-logs-container"] != "callme" ||
		callme.Labels["service.istio.io/canonical-revision"] != "v1" {
		t.Errorf("callme annotations %v labels %v", callme.Annotations, callme.Labels)
	}
	rb := d1[ds["rebel-base"]].Spec.Template.Spec.Containers
	if len(rb) != 1 || rb[0].LivenessProbe == nil || rb[0].LivenessProbe.PeriodSeconds != 1 || rb[0].ReadinessProbe.PeriodSeconds != 10 ||
		rb[0].LivenessProbe.HTTPGet.Path != "/" || rb[0].LivenessProbe.HTTPGet.Port.IntValue() != 80 {
		t.Errorf("rebel-base containers %+v, want the tutorial's probes", rb)
	}
	for _, d := range top.Deployments("c2") {
		if d.Name == "echo" {
			cs := d.Spec.Template.Spec.Containers
			if len(cs) != 2 || cs[1].Name != "kuma-sidecar" || d.Spec.Template.Annotations["prometheus.metrics.kuma.io/port"] != "5670" {
				t.Errorf("echo containers %+v annotations %v, want kuma-sidecar", cs, d.Spec.Template.Annotations)
			}
		}
	}
}

func TestSidecarAndIdentityErrors(t *testing.T) {
	cases := []edit{
		{"unknown sidecar", "    sidecar: kuma\n", "    sidecar: linkerd\n"},
		{"cluster names on callme", "    replicas: {c1: 1, c2: 1}\n    sidecar: istio\n", "    replicas: {c1: 1, c2: 1}\n    sidecar: istio\n    clusterNames: {c1: x}\n"},
		{"rebel-base without a cluster name", "{c1: Cluster-1, c2: Cluster-2}", "{c1: Cluster-1}"},
		{"cluster name with a quote", "c2: Cluster-2}", `c2: 'Clu"ster'}`},
		{"unknown variant", `variant: "1.18"`, `variant: "1.17"`},
		{"access log on a sidecar entry", "    sidecarOf: caller\n", "    sidecarOf: caller\n    accessLog: istio\n"},
		{"unknown access log", "accessLog: kuma", "accessLog: json"},
	}
	wants := map[string][]string{
		"unknown sidecar":                   {"s.yaml:28:14", "apps[3].sidecar", `unknown sidecar "linkerd" (known: istio, kuma)`},
		"cluster names on callme":           {"apps[1].clusterNames", "applies to kinds echo and rebel-base only"},
		"rebel-base without a cluster name": {"apps[2].clusterNames", "cluster c2 has none"},
		"cluster name with a quote":         {"apps[2].clusterNames.c2", "without quotes or spaces"},
		"unknown variant":                   {"apps[3].variant", `unknown echo variant "1.17"`},
		"access log on a sidecar entry":     {"entries[0].accessLog", "set the app's sidecar instead"},
		"unknown access log":                {"entries[1].accessLog", `unknown access-log format "json" (known: istio, kuma, istio-json, kuma-json)`},
	}
	wantParseErrors(t, "s.yaml", withSidecars, cases, wants)
}

// edit replaces the first edit in a sample with want.
type edit struct{ name, edit, want string }

// wantParseErrors parses each edited sample and checks its error has
// every string wants lists for the edit's name.
func wantParseErrors(t *testing.T, file, sample string, cases []edit, wants map[string][]string) {
	t.Helper()
	for _, c := range cases {
		src := sample
		if c.edit != "" {
			if !strings.Contains(src, c.edit) {
				t.Fatalf("%s: edit %q not in the sample", c.name, c.edit)
			}
			src = strings.Replace(src, c.edit, c.want, 1)
		}
		_, err := Parse(file, []byte(src))
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range wants[c.name] {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.name, err, w)
			}
		}
	}
}
