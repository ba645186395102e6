package meshroute

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/mesh-verify/mesh-verify/lab/meshsim"
)

// objects loads YAML manifests per cluster, as `lab up` does (Services,
// which lab.yaml renders, decoded as they are), with the namespace
// kubectl would give an object that names none.
func objects(t *testing.T, byCluster map[string]string) Objects {
	t.Helper()
	out := Objects{}
	for c, src := range byCluster {
		var objs []*unstructured.Unstructured
		if strings.Contains(src, "kind: Service\n") {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(src), &m); err != nil {
				t.Fatal(err)
			}
			objs = append(objs, &unstructured.Unstructured{Object: m})
		} else {
			ms, err := Load(c+".yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				objs = append(objs, m.Object)
			}
		}
		for _, o := range objs {
			if o.GetNamespace() == "" && o.GetKind() != "TrafficRoute" && o.GetKind() != "Namespace" {
				o.SetNamespace("default")
			}
			out[c] = append(out[c], o)
		}
	}
	return out
}

// The Istio tutorial's DestinationRule and VirtualService, field for field.
const istioDR = `apiVersion: networking.istio.io/v1beta1
kind: DestinationRule
metadata:
  name: callme-service-destination
spec:
  host: callme-service
  subsets:
    - name: v1
      labels:
        version: v1
    - name: v2
      labels:
        version: v2
`

const istioVS = `apiVersion: networking.istio.io/v1beta1
kind: VirtualService
metadata:
  name: callme-service-route
spec:
  hosts:
    - callme-service
  http:
    - route:
      - destination:
          host: callme-service
          subset: v1
        weight: 100
      mirror:
        host: callme-service
        subset: v2
      mirrorPercentage:
        value: 50.
`

// gatewayVS routes callme-service to v2 for the gateway "ingress" only.
const gatewayVS = `apiVersion: networking.istio.io/v1beta1
kind: VirtualService
metadata:
  name: callme-service-ingress
spec:
  hosts:
    - callme-service
  gateways: [ingress]
  http:
    - route:
      - destination:
          host: callme-service
          subset: v2
`

func TestDerive(t *testing.T) {
	t.Parallel()
	istio := Entry{Name: "istio-proxy", Mesh: MeshIstio, Cluster: "c1", Namespace: "default", To: "callme-service", ServicePort: 8080, Clusters: []string{"c1", "c2"}}
	kuma := Entry{Name: "edge-gateway", Mesh: MeshKuma, Cluster: "c1", Namespace: "kuma-demo", To: "test-server", ServicePort: 80, Clusters: []string{"c1", "c2"}}
	flagger := Entry{Name: "kuma-sidecar", Mesh: MeshKuma, Cluster: "c1", Namespace: "callme", To: "callme-service", ServicePort: 8080, Clusters: []string{"c1", "c2"}}
	skupper := Entry{Name: "skupper-router", Mesh: MeshSkupper, Cluster: "c1", Namespace: "interconnect", To: "app", ServicePort: 8080, Clusters: []string{"c1", "c2", "c3"},
		PodLabels: []map[string]string{{"app": "app", "version": "v1"}}}
	cilium := Entry{Name: "x-wing", Mesh: MeshCilium, Cluster: "c1", Namespace: "default", To: "rebel-base", ServicePort: 80, Clusters: []string{"c1", "c2"}}
	link := func(cost string) string {
		s := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: link1\n  namespace: interconnect\n  labels: {skupper.io/type: connection-token}\n"
		if cost != "" {
			s += "  annotations: {skupper.io/cost: \"" + cost + "\"}\n"
		}
		return s
	}
	// exposed is the skupper-services ConfigMap `skupper expose
	// deployment/app --port 8080` leaves (def: the entry's JSON).
	exposed := func(def string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: skupper-services, namespace: interconnect}\ndata:\n  app: '" + def + "'\n"
	}
	expose := exposed(`{"address":"app","protocol":"tcp","ports":[8080],"targets":[{"name":"app","selector":"app=app"}]}`)
	connector := func(key, sel string) string {
		return "apiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {name: app, namespace: interconnect}\nspec: {routingKey: " + key + ", selector: '" + sel + "', port: 8080}\n"
	}
	listener := func(key, host string) string {
		return "apiVersion: skupper.io/v2alpha1\nkind: Listener\nmetadata: {name: app, namespace: interconnect}\nspec: {routingKey: " + key + ", host: " + host + ", port: 8080}\n"
	}
	v2link := func(cost int) string {
		return fmt.Sprintf("apiVersion: skupper.io/v2alpha1\nkind: Link\nmetadata: {name: l, namespace: interconnect}\nspec: {cost: %d, endpoints: [{host: x}]}\n", cost)
	}
	svc := func(ann string) string {
		return "apiVersion: v1\nkind: Service\nmetadata:\n  name: rebel-base\n  annotations: {" + ann + "}\nspec: {ports: [{port: 80}]}\n"
	}
	tests := []struct {
		name     string
		entry    Entry
		objs     map[string]string
		want     meshsim.Policy
		clusters []string
		services []string // Route.Services
		ignored  string   // a substring of one Ignored entry
		err      string   // a substring of the error
	}{
		// A single destination takes every request whatever its weight
		// (pilot route.go): weight 1.
		{name: "istio tutorial: 100% v1, 50% mirrored to v2", entry: istio, objs: map[string]string{"c1": istioDR + "---\n" + istioVS},
			want:     meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByVersion, Weights: map[string]float64{"v1": 1}, Mirror: &meshsim.Mirror{Version: "v2", Percent: 50}, Local: "c1"},
			clusters: []string{"c1", "c2"}},
		// Argo Rollouts' host-level traffic splitting: the Service callers
		// use routed to its stableService and canaryService.
		{name: "istio: Argo Rollouts' host-level split between Services", entry: istio, objs: map[string]string{"c1": argoVS("callme-service-stable", "callme-service-canary.default.svc.cluster.local", 75, 25)},
			want:     meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByService, Weights: map[string]float64{"callme-service-stable": 75, "callme-service-canary": 25}, Local: "c1"},
			clusters: []string{"c1", "c2"}, services: []string{"callme-service-canary", "callme-service-stable"}},
		{name: "istio: Argo's step 0 (canary weight 0)", entry: istio, objs: map[string]string{"c1": argoVS("callme-service-stable", "callme-service-canary", 100, 0)},
			want:     meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByService, Weights: map[string]float64{"callme-service-stable": 100, "callme-service-canary": 0}, Local: "c1"},
			clusters: []string{"c1", "c2"}, services: []string{"callme-service-canary", "callme-service-stable"}},
		{name: "istio: another Service mixed with the routed one", entry: istio, objs: map[string]string{"c1": argoVS("callme-service-stable", "callme-service", 75, 25)},
			err: "spec.http[0].route: weights between other Services of namespace default and callme-service itself"},
		{name: "istio: a Service of another namespace", entry: istio, objs: map[string]string{"c1": argoVS("callme-service-stable.other", "callme-service-canary", 75, 25)},
			err: `spec.http[0].route[0].destination.host: "callme-service-stable.other" is not Service default/callme-service`},
		// istiod applies a VirtualService bound to gateways only (spec.gateways
		// without "mesh") to those gateways, never to sidecars.
		{name: "istio: a sidecar routes by the mesh VirtualService, not the gateway's", entry: istio,
			objs:     map[string]string{"c1": istioDR + "---\n" + strings.Replace(istioVS, "  hosts:\n", "  gateways: [mesh]\n  hosts:\n", 1) + "---\n" + gatewayVS},
			want:     meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByVersion, Weights: map[string]float64{"v1": 1}, Mirror: &meshsim.Mirror{Version: "v2", Percent: 50}, Local: "c1"},
			clusters: []string{"c1", "c2"}},
		{name: "istio: a gateway-only VirtualService alone leaves a sidecar balancing over every pod", entry: istio, objs: map[string]string{"c1": istioDR + "---\n" + gatewayVS},
			want: meshsim.Policy{Mode: meshsim.ModePerPod, Local: "c1"}, clusters: []string{"c1", "c2"}},
		{name: "istio: no VirtualService balances over every pod", entry: istio, objs: map[string]string{"c1": istioDR},
			want: meshsim.Policy{Mode: meshsim.ModePerPod, Local: "c1"}, clusters: []string{"c1", "c2"}},
		{name: "istio: weights are relative (not summing to 100 is fine since 1.15)", entry: istio,
			objs: map[string]string{"c1": istioDR + "---\n" + strings.Replace(strings.Replace(istioVS, "        weight: 100\n", "        weight: 3\n      - destination:\n          host: callme-service\n          subset: v2\n        weight: 1\n", 1), "      mirror:\n        host: callme-service\n        subset: v2\n      mirrorPercentage:\n        value: 50.\n", "      retries: {attempts: 3, perTryTimeout: 2s}\n", 1)},
			want: meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByVersion, Weights: map[string]float64{"v1": 3, "v2": 1}, Local: "c1",
				Retry: &meshsim.Retry{Attempts: 3, Codes: []int{503}, ConnectFailure: true}},
			clusters: []string{"c1", "c2"}, ignored: "spec.http[0].retries.perTryTimeout"},
		{name: "istio: retries on gateway errors", entry: istio,
			objs: map[string]string{"c1": istioDR + "---\n" + strings.Replace(istioVS, "      mirrorPercentage:\n", "      retries: {attempts: 4, retryOn: \"gateway-error,connect-failure,refused-stream,504\"}\n      mirrorPercentage:\n", 1)},
			want: meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByVersion, Weights: map[string]float64{"v1": 1}, Mirror: &meshsim.Mirror{Version: "v2", Percent: 50}, Local: "c1",
				Retry: &meshsim.Retry{Attempts: 4, Codes: []int{502, 503, 504}, ConnectFailure: true}},
			clusters: []string{"c1", "c2"}},
		{name: "istio: retries attempts 0 retries nothing", entry: istio,
			objs: map[string]string{"c1": istioDR + "---\n" + strings.Replace(istioVS, "      mirrorPercentage:\n", "      retries: {attempts: 0}\n      mirrorPercentage:\n", 1)},
			want: meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByVersion, Weights: map[string]float64{"v1": 1}, Mirror: &meshsim.Mirror{Version: "v2", Percent: 50}, Local: "c1",
				Retry: &meshsim.Retry{Attempts: 0, Codes: []int{503}, ConnectFailure: true}},
			clusters: []string{"c1", "c2"}},
		{name: "istio: an unknown retry condition", entry: istio,
			objs: map[string]string{"c1": istioDR + "---\n" + strings.Replace(istioVS, "      mirrorPercentage:\n", "      retries: {attempts: 2, retryOn: \"5xx,sometimes\"}\n      mirrorPercentage:\n", 1)},
			err:  `spec.http[0].retries.retryOn: unknown retry condition "sometimes"`},
		{name: "istio: too many retries", entry: istio,
			objs: map[string]string{"c1": istioDR + "---\n" + strings.Replace(istioVS, "      mirrorPercentage:\n", "      retries: {attempts: 11}\n      mirrorPercentage:\n", 1)},
			err:  `spec.http[0].retries.attempts: 11: want a whole number 0..10`},
		{name: "istio: mirror without a percentage copies 100%", entry: istio,
			objs:     map[string]string{"c1": istioDR + "---\n" + strings.Replace(istioVS, "      mirrorPercentage:\n        value: 50.\n", "", 1)},
			want:     meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByVersion, Weights: map[string]float64{"v1": 1}, Mirror: &meshsim.Mirror{Version: "v2", Percent: 100}, Local: "c1"},
			clusters: []string{"c1", "c2"}},
		{name: "istio: mirrorPercentage 0 mirrors nothing", entry: istio,
			objs:     map[string]string{"c1": istioDR + "---\n" + strings.Replace(istioVS, "value: 50.", "value: 0", 1)},
			want:     meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByVersion, Weights: map[string]float64{"v1": 1}, Local: "c1"},
			clusters: []string{"c1", "c2"}},
		{name: "istio: a route to an undefined subset", entry: istio, objs: map[string]string{"c1": istioDR + "---\n" + strings.Replace(istioVS, "subset: v1", "subset: v3", 1)},
			err: `VirtualService default/callme-service-route in cluster c1: spec.http[0].route[0].destination.subset: subset "v3" is not defined by any DestinationRule`},
		{name: "istio: a negative weight", entry: istio, objs: map[string]string{"c1": istioDR + "---\n" + strings.Replace(istioVS, "weight: 100", "weight: -5", 1)},
			err: "spec.http[0].route[0].weight: -5: want a whole number >= 0"},
		{name: "istio: several destinations and no weight", entry: istio,
			objs: map[string]string{"c1": istioDR + "---\n" + strings.Replace(istioVS, "        weight: 100\n", "      - destination:\n          host: callme-service\n          subset: v2\n", 1)},
			err:  "spec.http[0].route: 2 destinations and none has a weight"},
		{name: "kuma: MeshHTTPRoute 90/10 by zone", entry: kuma, objs: map[string]string{"c1": `apiVersion: kuma.io/v1alpha1
kind: MeshHTTPRoute
metadata: {name: canary, namespace: kuma-demo}
spec:
  targetRef: {kind: Mesh}
  to:
    - targetRef: {kind: MeshService, name: test-server}
      rules:
        - matches: [{path: {type: PathPrefix, value: /}}]
          default:
            backendRefs:
              - {kind: MeshServiceSubset, name: test-server, tags: {kuma.io/zone: c1}, weight: 90}
              - {kind: MeshServiceSubset, name: test-server, tags: {kuma.io/zone: c2}, weight: 10}
`}, want: meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByCluster, Weights: map[string]float64{"c1": 90, "c2": 10}, Local: "c1"},
			clusters: []string{"c1", "c2"}, ignored: "matches"},
		{name: "kuma: TrafficRoute by version", entry: kuma, objs: map[string]string{"c1": `apiVersion: kuma.io/v1alpha1
kind: TrafficRoute
mesh: default
metadata: {name: canary}
spec:
  sources: [{match: {kuma.io/service: "*"}}]
  destinations: [{match: {kuma.io/service: test-server_kuma-demo_svc_80}}]
  conf:
    split:
      - {weight: 80, destination: {kuma.io/service: test-server_kuma-demo_svc_80, version: v1}}
      - {weight: 20, destination: {kuma.io/service: test-server_kuma-demo_svc_80, version: v2}}
`}, want: meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByVersion, Weights: map[string]float64{"v1": 80, "v2": 20}, Local: "c1"},
			clusters: []string{"c1", "c2"}},
		// What Flagger's Kuma router writes: a split between the apex's
		// primary and canary Services, named by kuma.io/service alone.
		{name: "kuma: TrafficRoute by Flagger, between Services", entry: flagger, objs: map[string]string{"c1": flaggerRoute("callme", 80, 20)},
			want:     meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByService, Weights: map[string]float64{"callme-service-primary": 80, "callme-service-canary": 20}, Local: "c1"},
			clusters: []string{"c1", "c2"}, services: []string{"callme-service-primary", "callme-service-canary"}},
		{name: "kuma: TrafficRoute to a Service of another namespace", entry: flagger, objs: map[string]string{"c1": flaggerRoute("other", 80, 20)},
			err: `spec.conf.split[0].destination.kuma.io/service: "callme-service-primary_other_svc_8080" is not callme-service_callme_svc_8080`},
		{name: "kuma: TrafficRoute mixing Services and versions", entry: flagger, objs: map[string]string{"c1": strings.Replace(flaggerRoute("callme", 80, 20),
			"{kuma.io/service: callme-service-canary_callme_svc_8080}", "{kuma.io/service: callme-service_callme_svc_8080, version: v2}", 1)},
			err: "mixes subsets by service and by version"},
		{name: "kuma: TrafficRoute split without a weight", entry: kuma, objs: map[string]string{"c1": `apiVersion: kuma.io/v1alpha1
kind: TrafficRoute
metadata: {name: canary}
spec:
  destinations: [{match: {kuma.io/service: test-server_kuma-demo_svc_80}}]
  conf:
    split:
      - {destination: {kuma.io/service: test-server_kuma-demo_svc_80, version: v1}}
`}, err: "TrafficRoute canary in cluster c1: spec.conf.split[0].weight: missing"},
		{name: "skupper: link Secrets' costs; the router's own site costs 0", entry: skupper,
			objs:     map[string]string{"c1": expose, "c2": link("4") + "---\n" + expose, "c3": link("2") + "---\n" + expose},
			want:     meshsim.Policy{Mode: meshsim.ModeBalanced, Costs: map[string]float64{"c2": 4, "c3": 2}, Local: "c1"},
			clusters: []string{"c1", "c2", "c3"}},
		{name: "skupper: default cost 1; an exposed site without a link is out of reach", entry: skupper,
			objs:     map[string]string{"c2": link("") + "---\n" + expose, "c3": expose},
			want:     meshsim.Policy{Mode: meshsim.ModeBalanced, Costs: map[string]float64{"c2": 1}, Local: "c1"},
			clusters: []string{"c2"}, ignored: "the app is exposed in cluster c3, which has no link"},
		{name: "skupper: linked everywhere, exposed in c2 only: only c2", entry: skupper,
			objs:     map[string]string{"c2": link("") + "---\n" + expose, "c3": link("")},
			want:     meshsim.Policy{Mode: meshsim.ModeBalanced, Costs: map[string]float64{"c2": 1}, Local: "c1"},
			clusters: []string{"c2"}},
		{name: "skupper: linked, exposed nowhere: the router has no target", entry: skupper,
			objs:     map[string]string{"c2": link(""), "c3": link("")},
			want:     meshsim.Policy{Mode: meshsim.ModeBalanced, Costs: map[string]float64{}, Local: "c1"},
			clusters: []string{}},
		{name: "skupper: a target selecting other pods, another address, another port expose nothing", entry: skupper,
			objs: map[string]string{
				"c2": link("") + "---\n" + exposed(`{"address":"app","protocol":"tcp","ports":[8080],"targets":[{"selector":"app=other"}]}`),
				"c3": link("") + "---\n" + exposed(`{"address":"app","ports":[9090],"targets":[{"selector":"app=app"}]}`)},
			want:     meshsim.Policy{Mode: meshsim.ModeBalanced, Costs: map[string]float64{}, Local: "c1"},
			clusters: []string{}, ignored: "targets select none of app's pods"},
		{name: "skupper: an unknown field of a definition is named", entry: skupper,
			objs:     map[string]string{"c2": link("") + "---\n" + exposed(`{"address":"app","ports":[8080],"headless":{"name":"x"},"targets":[{"service":"app"}]}`)},
			want:     meshsim.Policy{Mode: meshsim.ModeBalanced, Costs: map[string]float64{"c2": 1}, Local: "c1"},
			clusters: []string{"c2"}, ignored: "data.app.headless"},
		{name: "skupper: v2 Link's cost, below 1 clamped to 1; Connectors matching the router's Listener", entry: skupper,
			objs: map[string]string{"c1": listener("app", "app"),
				"c2": v2link(0) + "---\n" + connector("app", "app=app"),
				"c3": v2link(5) + "---\n" + connector("app", "app=app,version=v1")},
			want:     meshsim.Policy{Mode: meshsim.ModeBalanced, Costs: map[string]float64{"c2": 1, "c3": 5}, Local: "c1"},
			clusters: []string{"c2", "c3"}},
		{name: "skupper: v2 Connector without a matching Listener is not reached", entry: skupper,
			objs: map[string]string{"c1": listener("app", "app"),
				"c2": v2link(1) + "---\n" + connector("other", "app=app"),
				"c3": v2link(1) + "---\n" + connector("app", "app=app")},
			want:     meshsim.Policy{Mode: meshsim.ModeBalanced, Costs: map[string]float64{"c3": 1}, Local: "c1"},
			clusters: []string{"c3"}, ignored: `routing key "other" matches no Listener for app:8080`},
		{name: "skupper: v2 Listener for another host or in another site routes nothing here", entry: skupper,
			objs: map[string]string{"c1": listener("app", "other-svc"),
				"c2": v2link(1) + "---\n" + connector("app", "app=app") + "---\n" + listener("app", "app")},
			want:     meshsim.Policy{Mode: meshsim.ModeBalanced, Costs: map[string]float64{}, Local: "c1"},
			clusters: []string{}},
		{name: "skupper: v2 Connector selecting none of the app's pods", entry: skupper,
			objs:     map[string]string{"c1": listener("app", "app"), "c2": v2link(1) + "---\n" + connector("app", "app=other")},
			want:     meshsim.Policy{Mode: meshsim.ModeBalanced, Costs: map[string]float64{}, Local: "c1"},
			clusters: []string{}, ignored: "selects none of app's pods"},
		{name: "skupper: a cost that is no number", entry: skupper, objs: map[string]string{"c2": link("cheap")},
			err: `Secret interconnect/link1 in cluster c2: metadata.annotations.skupper.io/cost: "cheap"`},
		{name: "skupper: a bad target selector", entry: skupper,
			objs: map[string]string{"c2": exposed(`{"address":"app","ports":[8080],"targets":[{"selector":"app==,="}]}`)},
			err:  `ConfigMap interconnect/skupper-services in cluster c2: data.app.targets[0].selector: "app==,="`},
		{name: "skupper: a protocol skupper expose refuses", entry: skupper,
			objs: map[string]string{"c2": exposed(`{"address":"app","protocol":"udp2","ports":[8080],"targets":[{"selector":"app=app"}]}`)},
			err:  `data.app.protocol: "udp2": want tcp, http or http2`},
		{name: "skupper: a definition that is no JSON object", entry: skupper,
			objs: map[string]string{"c2": exposed(`[1]`)},
			err:  `ConfigMap interconnect/skupper-services in cluster c2: data.app: not the JSON of a Skupper service definition`},
		{name: "skupper: a port out of range", entry: skupper,
			objs: map[string]string{"c2": exposed(`{"address":"app","ports":[70000],"targets":[{"selector":"app=app"}]}`)},
			err:  `data.app.ports[0]: 70000: want a port in 1..65535`},
		{name: "skupper: a target with neither selector nor service", entry: skupper,
			objs: map[string]string{"c2": exposed(`{"address":"app","ports":[8080],"targets":[{"name":"app"}]}`)},
			err:  `data.app.targets[0]: want a selector or a service`},
		{name: "skupper: a v2 Connector with a bad selector", entry: skupper,
			objs: map[string]string{"c1": listener("app", "app"), "c2": connector("app", "app in (")},
			err:  `Connector interconnect/app in cluster c2: spec.selector: "app in ("`},
		{name: "skupper: a v2 Connector with both selector and host", entry: skupper,
			objs: map[string]string{"c2": strings.Replace(connector("app", "app=app"), "port: 8080", "port: 8080, host: app", 1)},
			err:  `Connector interconnect/app in cluster c2: spec: want one of selector or host`},
		{name: "skupper: a v2 Listener without a port", entry: skupper,
			objs: map[string]string{"c1": strings.Replace(listener("app", "app"), ", port: 8080", "", 1)},
			err:  `Listener interconnect/app in cluster c1: spec.port: <nil>: want a port in 1..65535`},
		{name: "skupper: a v2 Connector without a routing key", entry: skupper,
			objs: map[string]string{"c2": strings.Replace(connector("app", "app=app"), "routingKey: app, ", "", 1)},
			err:  `Connector interconnect/app in cluster c2: spec.routingKey: required`},
		{name: "cilium: not global: local backends only", entry: cilium, objs: map[string]string{"c1": svc(""), "c2": svc("service.cilium.io/global: \"true\"")},
			want: meshsim.Policy{Mode: meshsim.ModePerPod, PerConnection: true, Local: "c1"}, clusters: []string{"c1"}},
		{name: "cilium: global (legacy annotation): every cluster's pods", entry: cilium,
			objs: map[string]string{"c1": svc(`io.cilium/global-service: "true"`), "c2": svc(`io.cilium/global-service: "true"`)},
			want: meshsim.Policy{Mode: meshsim.ModePerPod, PerConnection: true, Local: "c1"}, clusters: []string{"c1", "c2"}},
		{name: "cilium: affinity local", entry: cilium,
			objs: map[string]string{"c1": svc(`service.cilium.io/global: "true", service.cilium.io/affinity: local`), "c2": svc(`service.cilium.io/global: "true"`)},
			want: meshsim.Policy{Mode: meshsim.ModeFailover, Order: []string{"c1", "c2"}, PerConnection: true, Local: "c1"}, clusters: []string{"c1", "c2"}},
		{name: "cilium: a remote cluster that does not share", entry: cilium,
			objs: map[string]string{"c1": svc(`service.cilium.io/global: "true"`), "c2": svc(`service.cilium.io/global: "true", service.cilium.io/shared: "false"`)},
			want: meshsim.Policy{Mode: meshsim.ModePerPod, PerConnection: true, Local: "c1"}, clusters: []string{"c1"}},
		{name: "cilium: a bad affinity", entry: cilium,
			objs: map[string]string{"c1": svc(`service.cilium.io/global: "true", service.cilium.io/affinity: nearby`)},
			err:  `metadata.annotations.service.cilium.io/affinity: "nearby": want local, remote or none`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, ok := derived(t, tc.entry, objects(t, tc.objs), tc.err)
			if !ok {
				return
			}
			want := tc.want
			if tc.entry.Mesh == MeshIstio && want.Retry == nil {
				// istiod's default retry policy, on every route.
				want.Retry = &meshsim.Retry{Attempts: 2, Codes: []int{503}, ConnectFailure: true}
			}
			if !reflect.DeepEqual(r.Policy, want) {
				t.Errorf("policy = %+v (retry %+v), want %+v (retry %+v)", r.Policy, r.Policy.Retry, want, want.Retry)
			}
			if !reflect.DeepEqual(r.Clusters, tc.clusters) {
				t.Errorf("clusters = %v, want %v", r.Clusters, tc.clusters)
			}
			if !reflect.DeepEqual(r.Services, tc.services) {
				t.Errorf("services = %v, want %v", r.Services, tc.services)
			}
			if tc.entry.Mesh == MeshIstio && tc.want.WeightBy == meshsim.ByVersion && r.Subsets["v1"] != "v1" {
				t.Errorf("subsets %v: want version v1 routed to subset v1", r.Subsets)
			}
			checkIgnored(t, r, tc.ignored)
			if _, err := meshsim.New(r.Policy); err != nil {
				t.Errorf("the simulator refuses the derived policy: %v", err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src, err string
		n              int
	}{
		{name: "two documents and comments", src: "# head\n" + istioDR + "---\n# c\n" + istioVS, n: 2},
		{name: "an unknown kind", src: istioDR + "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: x}\n",
			err: "f.yaml:15: ServiceEntry x: kind ServiceEntry (apiVersion networking.istio.io/v1) is not a kind the lab serves"},
		{name: "a version the lab does not serve", src: "apiVersion: kuma.io/v1\nkind: MeshHTTPRoute\nmetadata: {name: x}\n",
			err: "f.yaml:1: MeshHTTPRoute x: apiVersion kuma.io/v1: the lab serves MeshHTTPRoute as kuma.io/v1alpha1"},
		{name: "a tutorial's Service and Deployment", src: "apiVersion: v1\nkind: Service\nmetadata: {name: x}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n", n: 2},
		{name: "a Deployment of an old API", src: "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: x}\n",
			err: "f.yaml:1: Deployment x: apiVersion extensions/v1beta1: the lab serves Deployment as apps/v1"},
		{name: "no name", src: "apiVersion: v1\nkind: Secret\nmetadata: {}\n", err: "f.yaml:1: Secret: metadata.name is required"},
		{name: "not YAML", src: "a: [\n", err: "f.yaml:1:"},
		{name: "empty", src: "---\n# nothing\n---\n", n: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ms, err := Load("f.yaml", []byte(tc.src))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Load = %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil || len(ms) != tc.n {
				t.Fatalf("Load = %d objects, %v; want %d", len(ms), err, tc.n)
			}
		})
	}
	if _, err := Load("big.yaml", make([]byte, MaxManifestBytes+1)); err == nil || !strings.Contains(err.Error(), "big.yaml") {
		t.Errorf("a file over MaxManifestBytes: %v, want an error naming it", err)
	}
}

// FuzzLoad: any input either loads into named objects of known kinds or
// fails with an error naming the file; Derive on what loaded never panics.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(istioDR + "---\n" + istioVS))
	f.Add([]byte("apiVersion: v1\nkind: Secret\nmetadata: {name: l, labels: {skupper.io/type: connection-token}, annotations: {skupper.io/cost: \"-1\"}}\n"))
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: skupper-services}\ndata: {test-server: '{\"address\":\"test-server\",\"ports\":[80],\"targets\":[{\"selector\":\"app=test-server\"}]}'}\n---\napiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {name: c}\nspec: {routingKey: k, selector: app=test-server, port: 80}\n"))
	f.Add([]byte("apiVersion: kuma.io/v1alpha1\nkind: MeshHTTPRoute\nmetadata: {name: m}\nspec: {to: [{targetRef: {name: test-server}, rules: [{default: {backendRefs: [{kind: MeshService, weight: 2}]}}]}]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := Load("fuzz.yaml", data)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		objs := Objects{}
		for _, m := range ms {
			if m.Object.GetName() == "" {
				t.Fatalf("loaded an object without a name: %v", m.Object)
			}
			objs["c1"] = append(objs["c1"], m.Object)
			objs["c2"] = append(objs["c2"], m.Object)
		}
		for _, mesh := range Meshes() {
			e := Entry{Name: "e", Mesh: mesh, Cluster: "c1", Namespace: "", To: "test-server", ServicePort: 80, Clusters: []string{"c1", "c2"}}
			if r, err := Derive(e, objs); err == nil {
				if _, err := meshsim.New(r.Policy); err != nil && r.Policy.Mode != meshsim.ModeWeighted {
					t.Fatalf("mesh %s: derived a policy the simulator refuses: %v", mesh, err)
				}
			}
		}
	})
}

// argoVS is the VirtualService Argo Rollouts' Istio host-level traffic
// splitting keeps: the route named primary (trafficRouting.istio.
// virtualService.routes) to the stableService and the canaryService,
// their weights set at each step.
func argoVS(stable, canary string, ws, wc int) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1beta1
kind: VirtualService
metadata: {name: callme-service}
spec:
  hosts: [callme-service]
  http:
  - name: primary
    route:
    - destination: {host: %s}
      weight: %d
    - destination: {host: %s}
      weight: %d
`, stable, ws, canary, wc)
}

// flaggerRoute is the TrafficRoute Flagger's Kuma router writes for the
// Canary callme-service (port 8080) at a canary weight; ns is the
// namespace its split's kuma.io/service tags name.
func flaggerRoute(ns string, primary, canary int) string {
	return fmt.Sprintf(`apiVersion: kuma.io/v1alpha1
kind: TrafficRoute
mesh: default
metadata: {name: callme-service}
spec:
  sources: [{match: {kuma.io/service: "*"}}]
  destinations: [{match: {kuma.io/service: callme-service_callme_svc_8080}}]
  conf:
    loadBalancer: {roundRobin: {}}
    split:
      - {weight: %d, destination: {kuma.io/service: callme-service-primary_%s_svc_8080}}
      - {weight: %d, destination: {kuma.io/service: callme-service-canary_%s_svc_8080}}
`, primary, ns, canary, ns)
}
