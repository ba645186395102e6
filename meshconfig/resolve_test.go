package meshconfig

import (
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// objects builds Objects from YAML documents, each prefixed with the
// cluster it lives in ("c1: " on the first line is not YAML, so the
// cluster is given per call).
func objects(t *testing.T, byCluster map[string]string) Objects {
	t.Helper()
	out := Objects{}
	for c, docs := range byCluster {
		for _, d := range strings.Split(docs, "\n---\n") {
			if strings.TrimSpace(d) == "" {
				continue
			}
			m := map[string]any{}
			if err := yaml.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("cluster %s: %v\n%s", c, err, d)
			}
			out[c] = append(out[c], &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

// pod is a ready pod's YAML.
func pod(ns, name string, lbls string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: ` + ns + `, labels: ` + lbls + `}
status: {conditions: [{type: Ready, status: "True"}]}
`
}

const reviewsSvc = `apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: demo, resourceVersion: "7"}
spec: {selector: {app: reviews}}
`

const reviewsDR = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: demo, resourceVersion: "5"}
spec:
  host: reviews
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
  - {name: v3, labels: {version: v3}}
`

func reviewsVS(http string) string {
	return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: demo, resourceVersion: "42"}
spec:
  hosts: [reviews]
  http:
` + http
}

var reviewsPods = pod("demo", "reviews-v1-a", "{app: reviews, version: v1}") + "---\n" +
	pod("demo", "reviews-v2-a", "{app: reviews, version: v2}") + "---\n" +
	pod("demo", "reviews-v2-b", "{app: reviews, version: v2}")

func vsRef() Ref { return Ref{Kind: KindVirtualService, Namespace: "demo", Name: "reviews"} }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestResolve(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		q       Query
		objs    map[string]string
		shares  map[string]float64
		mirrors []Mirror
		rule    string
		// backends: the ready pods counted per cluster, for the kinds
		// whose shares follow them (nil: not checked).
		backends map[string]int
		wantErr  []string // substrings of the error; nil: no error
	}{
		{
			name: "istio weights are relative",
			q:    Query{Ref: vsRef(), By: ByVersion},
			objs: map[string]string{"c1": reviewsVS(`  - route:
    - {destination: {host: reviews, subset: v1}, weight: 1}
    - {destination: {host: reviews, subset: v2}, weight: 3}
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods},
			shares: map[string]float64{"v1": 0.25, "v2": 0.75},
			rule:   "spec.http[0]",
		},
		{
			name: "istio first matching rule by path, method and header",
			q:    Query{Ref: vsRef(), By: ByVersion, Request: Request{Method: "POST", Path: "/api/x?debug=1", Headers: map[string]string{"End-User": "jason"}}},
			objs: map[string]string{"c1": reviewsVS(`  - match: [{uri: {prefix: /other}}]
    route: [{destination: {host: reviews, subset: v1}}]
  - match: [{method: {exact: GET}}, {headers: {end-user: {exact: bob}}}]
    route: [{destination: {host: reviews, subset: v1}}]
  - match: [{uri: {regex: "/api/.*"}, method: {exact: POST}, headers: {end-user: {exact: jason}}, queryParams: {debug: {exact: "1"}}}]
    route: [{destination: {host: reviews, subset: v2}, weight: 20}, {destination: {host: reviews, subset: v1}, weight: 80}]
  - route: [{destination: {host: reviews, subset: v1}}]
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods},
			shares: map[string]float64{"v1": 0.8, "v2": 0.2},
			rule:   "spec.http[2]",
		},
		{
			name: "istio single destination takes everything whatever its weight",
			q:    Query{Ref: vsRef(), By: ByVersion},
			objs: map[string]string{"c1": reviewsVS(`  - route: [{destination: {host: reviews, subset: v2}, weight: 30}]
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods},
			shares: map[string]float64{"v2": 1},
		},
		{
			name: "istio section names the route",
			q:    Query{Ref: Ref{Kind: KindVirtualService, Namespace: "demo", Name: "reviews", Section: "canary"}, By: ByVersion},
			objs: map[string]string{"c1": reviewsVS(`  - match: [{sourceLabels: {app: x}}]
    route: [{destination: {host: reviews, subset: v1}}]
  - name: canary
    route: [{destination: {host: reviews, subset: v1}, weight: 90}, {destination: {host: reviews, subset: v2}, weight: 10}]
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods},
			shares: map[string]float64{"v1": 0.9, "v2": 0.1},
			rule:   "spec.http[1]",
		},
		{
			name: "istio host-level split: the version of each Service's pods (Flagger)",
			q:    Query{Ref: Ref{Kind: KindVirtualService, Namespace: "demo", Name: "podinfo"}, By: ByVersion},
			objs: map[string]string{"c1": `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: podinfo, namespace: demo}
spec:
  hosts: [podinfo]
  http:
  - route:
    - {destination: {host: podinfo-primary}, weight: 70}
    - {destination: {host: podinfo-canary.demo.svc.cluster.local}, weight: 30}
---
apiVersion: v1
kind: Service
metadata: {name: podinfo-primary, namespace: demo}
spec: {selector: {app: podinfo-primary}}
---
apiVersion: v1
kind: Service
metadata: {name: podinfo-canary, namespace: demo}
spec: {selector: {app: podinfo}}
---
` + pod("demo", "p1", "{app: podinfo-primary, version: '6.0'}") + "---\n" + pod("demo", "c1", "{app: podinfo, version: '6.1'}")},
			shares: map[string]float64{"6.0": 0.7, "6.1": 0.3},
		},
		{
			name: "istio mirror with the default 100 percent, and mirrors[] with a percentage",
			q:    Query{Ref: vsRef(), By: ByVersion},
			objs: map[string]string{"c1": reviewsVS(`  - route: [{destination: {host: reviews, subset: v1}, weight: 100}]
    mirror: {host: reviews, subset: v2}
    mirrors: [{destination: {host: reviews, subset: v2}, percentage: {value: 12.5}}]
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods},
			shares:  map[string]float64{"v1": 1},
			mirrors: []Mirror{{Bucket: "v2", Percent: 100}, {Bucket: "v2", Percent: 12.5, Field: "spec.http[0].mirrors[0].percentage.value"}},
		},
		{
			name: "istio mirror percentage 0 mirrors nothing",
			q:    Query{Ref: vsRef(), By: ByVersion},
			objs: map[string]string{"c1": reviewsVS(`  - route: [{destination: {host: reviews, subset: v1}}]
    mirror: {host: reviews, subset: v2}
    mirrorPercentage: {value: 0}
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods},
			shares: map[string]float64{"v1": 1},
		},
		{
			name: "istio pods in another cluster count",
			q:    Query{Ref: vsRef(), By: ByVersion, Clusters: []string{"c1", "c2"}},
			objs: map[string]string{
				"c1": reviewsVS(`  - route: [{destination: {host: reviews, subset: v1}, weight: 50}, {destination: {host: reviews, subset: v3}, weight: 50}]
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods,
				"c2": pod("demo", "reviews-v3", "{app: reviews, version: v3}"),
			},
			shares: map[string]float64{"v1": 0.5, "v3": 0.5},
		},
		{
			name:    "istio object not found",
			q:       Query{Ref: vsRef(), By: ByVersion},
			objs:    map[string]string{"c1": reviewsSvc},
			wantErr: []string{"VirtualService demo/reviews in cluster c1: not found"},
		},
		{
			name: "istio undefined subset",
			q:    Query{Ref: vsRef(), By: ByVersion},
			objs: map[string]string{"c1": reviewsVS(`  - route: [{destination: {host: reviews, subset: v9}, weight: 50}, {destination: {host: reviews, subset: v1}, weight: 50}]
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods},
			wantErr: []string{"VirtualService demo/reviews", "spec.http[0].route[0].destination.subset", `subset "v9" is defined by no DestinationRule`, "[v1 v2 v3]"},
		},
		{
			name: "istio subset without pods",
			q:    Query{Ref: vsRef(), By: ByVersion},
			objs: map[string]string{"c1": reviewsVS(`  - route: [{destination: {host: reviews, subset: v3}, weight: 50}, {destination: {host: reviews, subset: v1}, weight: 50}]
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods},
			wantErr: []string{"DestinationRule demo/reviews", "spec.subsets[2]", `subset "v3"`, "matches no ready pod"},
		},
		{
			name: "istio zero-weight subset without pods is fine",
			q:    Query{Ref: vsRef(), By: ByVersion},
			objs: map[string]string{"c1": reviewsVS(`  - route: [{destination: {host: reviews, subset: v3}, weight: 0}, {destination: {host: reviews, subset: v1}, weight: 50}]
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods},
			shares: map[string]float64{"v1": 1, "v3": 0},
		},
		{
			name: "istio negative weight",
			q:    Query{Ref: vsRef(), By: ByVersion},
			objs: map[string]string{"c1": reviewsVS(`  - route: [{destination: {host: reviews, subset: v1}, weight: -1}, {destination: {host: reviews, subset: v2}, weight: 50}]
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods},
			wantErr: []string{"spec.http[0].route[0].weight", "-1"},
		},
		{
			name: "istio several destinations without weight",
			q:    Query{Ref: vsRef(), By: ByVersion},
			objs: map[string]string{"c1": reviewsVS(`  - route: [{destination: {host: reviews, subset: v1}}, {destination: {host: reviews, subset: v2}}]
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods},
			wantErr: []string{"spec.http[0].route", "2 destinations and no weight above 0"},
		},
		{
			name: "istio no rule matches the request",
			q:    Query{Ref: vsRef(), By: ByVersion, Request: Request{Method: "GET", Path: "/b"}},
			objs: map[string]string{"c1": reviewsVS(`  - match: [{uri: {exact: /a}}]
    route: [{destination: {host: reviews, subset: v1}}]
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods},
			wantErr: []string{"spec.http", "no route matches the attack's requests (GET /b)"},
		},
		{
			name: "istio a condition the request cannot tell",
			q:    Query{Ref: vsRef(), By: ByVersion},
			objs: map[string]string{"c1": reviewsVS(`  - match: [{sourceLabels: {app: productpage}}]
    route: [{destination: {host: reviews, subset: v1}}]
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods},
			wantErr: []string{"spec.http[0].match[0].sourceLabels", "#SECTION"},
		},
		{
			name: "istio routes bound to a gateway only",
			q:    Query{Ref: vsRef(), By: ByVersion},
			objs: map[string]string{"c1": `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: demo}
spec:
  hosts: [reviews]
  gateways: [bookinfo-gateway]
  http: [{route: [{destination: {host: reviews}}]}]
`},
			wantErr: []string{"spec.gateways", "come through mesh"},
		},
		{
			name: "istio destination reaching several versions",
			q:    Query{Ref: vsRef(), By: ByVersion},
			objs: map[string]string{"c1": reviewsVS(`  - route: [{destination: {host: reviews}}]
`) + "---\n" + reviewsSvc + "---\n" + reviewsPods},
			wantErr: []string{"spec.http[0].route[0].destination", "several versions [v1 v2]"},
		},
		{
			name:    "istio cannot split by cluster",
			q:       Query{Ref: vsRef(), By: ByCluster},
			wantErr: []string{`split by "cluster" cannot be read from a VirtualService`},
		},
		{
			name: "kuma MeshHTTPRoute by zone, default weight 1, most specific rule",
			q:    Query{Ref: Ref{Kind: KindMeshHTTPRoute, Namespace: "kuma-demo", Name: "canary"}, By: ByCluster, Request: Request{Path: "/api/v1"}},
			objs: map[string]string{"c1": `apiVersion: kuma.io/v1alpha1
kind: MeshHTTPRoute
metadata: {name: canary, namespace: kuma-demo, resourceVersion: "3"}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: MeshService, name: test-server}
    rules:
    - matches: [{path: {type: PathPrefix, value: /}}]
      default:
        backendRefs:
        - {kind: MeshService, labels: {kuma.io/zone: c1}, weight: 90}
        - {kind: MeshService, labels: {kuma.io/zone: c2}, weight: 10}
    - matches: [{path: {type: PathPrefix, value: /api}}]
      default:
        backendRefs:
        - {kind: MeshService, labels: {kuma.io/zone: c1}, weight: 3}
        - {kind: MeshService, labels: {kuma.io/zone: c2}}
        - {kind: MeshService, labels: {kuma.io/zone: c3}, weight: 0}
        filters:
        - {type: RequestMirror, requestMirror: {backendRef: {kind: MeshService, labels: {kuma.io/zone: c3}}, percentage: "25"}}
`},
			shares:  map[string]float64{"c1": 0.75, "c2": 0.25, "c3": 0},
			mirrors: []Mirror{{Bucket: "c3", Percent: 25, Field: "spec.to[0].rules[1].default.filters[0].requestMirror.percentage"}},
			rule:    "spec.to[0].rules[1]",
		},
		{
			name: "kuma MeshHTTPRoute prefix is by path element",
			q:    Query{Ref: Ref{Kind: KindMeshHTTPRoute, Namespace: "kuma-demo", Name: "canary"}, By: ByVersion, Request: Request{Path: "/apiary"}},
			objs: map[string]string{"c1": meshHTTPRoute(`    - matches: [{path: {type: PathPrefix, value: /api}}]
      default: {backendRefs: [{kind: MeshServiceSubset, name: test-server, tags: {version: v2}}]}
    - matches: [{path: {type: PathPrefix, value: /}, method: GET}]
      default: {backendRefs: [{kind: MeshServiceSubset, name: test-server, tags: {version: v1}}]}
`)},
			shares: map[string]float64{"v1": 1},
			rule:   "spec.to[0].rules[1]",
		},
		{
			name: "kuma MeshHTTPRoute no rule matches",
			q:    Query{Ref: Ref{Kind: KindMeshHTTPRoute, Namespace: "kuma-demo", Name: "canary"}, By: ByVersion, Request: Request{Method: "POST", Path: "/x"}},
			objs: map[string]string{"c1": meshHTTPRoute(`    - matches: [{method: GET}, {headers: [{name: x-canary, value: "1"}]}]
      default: {backendRefs: [{kind: MeshServiceSubset, tags: {version: v2}}]}
`)},
			wantErr: []string{"MeshHTTPRoute kuma-demo/canary", "spec.to[0].rules", "no rule matches the attack's requests (POST /x)"},
		},
		{
			name: "kuma MeshHTTPRoute negative weight",
			q:    Query{Ref: Ref{Kind: KindMeshHTTPRoute, Namespace: "kuma-demo", Name: "canary"}, By: ByVersion},
			objs: map[string]string{"c1": meshHTTPRoute(`    - matches: [{path: {type: PathPrefix, value: /}}]
      default: {backendRefs: [{kind: MeshServiceSubset, tags: {version: v2}, weight: -5}, {kind: MeshServiceSubset, tags: {version: v1}}]}
`)},
			wantErr: []string{"spec.to[0].rules[0].default.backendRefs[0].weight", "-5"},
		},
		{
			name: "kuma TrafficRoute split by zone",
			q:    Query{Ref: Ref{Kind: KindTrafficRoute, Name: "test-server"}, By: ByCluster},
			objs: map[string]string{"c1": `apiVersion: kuma.io/v1alpha1
kind: TrafficRoute
mesh: default
metadata: {name: test-server}
spec:
  conf:
    http:
    - match: {path: {prefix: /admin}}
      destination: {kuma.io/service: x, kuma.io/zone: c2}
    split:
    - {weight: 90, destination: {kuma.io/service: x, kuma.io/zone: c1}}
    - {weight: 10, destination: {kuma.io/service: x, kuma.io/zone: c2}}
`},
			shares: map[string]float64{"c1": 0.9, "c2": 0.1},
			rule:   "spec.conf",
		},
		{
			// What Flagger's Kuma router writes at a 10% step (pkg/router/kuma.go):
			// the split names the primary and canary Services by kuma.io/service
			// alone; their pods, in the zones, carry the versions.
			name: "kuma TrafficRoute by Flagger, primary and canary services",
			q:    Query{Ref: Ref{Kind: KindTrafficRoute, Name: "callme-service"}, By: ByVersion, Clusters: []string{"c1", "c2"}},
			objs: map[string]string{
				"c1": flaggerTrafficRoute(90, 10) + "---\n" + callmeSvc("callme-service-primary") + "---\n" + callmeSvc("callme-service-canary") +
					"---\n" + pod("callme", "p1", "{app: callme-service-primary, version: v1}") + "---\n" + pod("callme", "c1", "{app: callme-service, version: v2}"),
				"c2": callmeSvc("callme-service-primary") + "---\n" + pod("callme", "p2", "{app: callme-service-primary, version: v1}"),
			},
			shares: map[string]float64{"v1": 0.9, "v2": 0.1},
			rule:   "spec.conf",
		},
		{
			name: "kuma TrafficRoute by Flagger, canary service missing",
			q:    Query{Ref: Ref{Kind: KindTrafficRoute, Name: "callme-service"}, By: ByVersion, Clusters: []string{"c1"}},
			objs: map[string]string{
				"c1": flaggerTrafficRoute(90, 10) + "---\n" + callmeSvc("callme-service-primary") + "---\n" + pod("callme", "p1", "{app: callme-service-primary, version: v1}"),
			},
			wantErr: []string{"TrafficRoute callme-service", "spec.conf.split[1].destination", "no Service callme/callme-service-canary in clusters c1"},
		},
		{
			name: "kuma TrafficRoute by Flagger, canary without ready pods",
			q:    Query{Ref: Ref{Kind: KindTrafficRoute, Name: "callme-service"}, By: ByVersion, Clusters: []string{"c1"}},
			objs: map[string]string{
				"c1": flaggerTrafficRoute(90, 10) + "---\n" + callmeSvc("callme-service-primary") + "---\n" + callmeSvc("callme-service-canary") + "---\n" + pod("callme", "p1", "{app: callme-service-primary, version: v1}"),
			},
			wantErr: []string{"spec.conf.split[1].destination", "Service callme/callme-service-canary selects no ready pod"},
		},
		{
			name: "kuma TrafficRoute by Flagger, several versions behind one service",
			q:    Query{Ref: Ref{Kind: KindTrafficRoute, Name: "callme-service"}, By: ByVersion, Clusters: []string{"c1"}},
			objs: map[string]string{
				"c1": flaggerTrafficRoute(90, 10) + "---\n" + callmeSvc("callme-service-primary") + "---\n" + callmeSvc("callme-service-canary") +
					"---\n" + pod("callme", "p1", "{app: callme-service-primary, version: v1}") + "---\n" + pod("callme", "p2", "{app: callme-service-primary, version: v3}") +
					"---\n" + pod("callme", "c1", "{app: callme-service, version: v2}"),
			},
			wantErr: []string{"spec.conf.split[0].destination", "reaches pods of several versions [v1 v3]"},
		},
		{
			name:    "kuma TrafficRoute by Flagger, split by cluster",
			q:       Query{Ref: Ref{Kind: KindTrafficRoute, Name: "callme-service"}, By: ByCluster, Clusters: []string{"c1"}},
			objs:    map[string]string{"c1": flaggerTrafficRoute(90, 10)},
			wantErr: []string{"spec.conf.split[0].destination", "in no one zone", "split by version"},
		},
		{
			name: "kuma TrafficRoute by Flagger, weight 0 canary needs no pods",
			q:    Query{Ref: Ref{Kind: KindTrafficRoute, Name: "callme-service"}, By: ByVersion, Clusters: []string{"c1"}},
			objs: map[string]string{
				"c1": flaggerTrafficRoute(100, 0) + "---\n" + callmeSvc("callme-service-primary") + "---\n" + callmeSvc("callme-service-canary") +
					"---\n" + pod("callme", "p1", "{app: callme-service-primary, version: v1}") + "---\n" + pod("callme", "c1", "{app: callme-service, version: v2}"),
			},
			shares: map[string]float64{"v1": 1, "v2": 0},
		},
		{
			name: "kuma TrafficRoute by Flagger, weight 0 canary scaled to zero",
			q:    Query{Ref: Ref{Kind: KindTrafficRoute, Name: "callme-service"}, By: ByVersion, Clusters: []string{"c1"}},
			objs: map[string]string{
				"c1": flaggerTrafficRoute(100, 0) + "---\n" + callmeSvc("callme-service-primary") + "---\n" + callmeSvc("callme-service-canary") +
					"---\n" + pod("callme", "p1", "{app: callme-service-primary, version: v1}"),
			},
			shares: map[string]float64{"v1": 1},
		},
		{
			name: "kuma TrafficRoute split entry without weight",
			q:    Query{Ref: Ref{Kind: KindTrafficRoute, Name: "test-server"}, By: ByCluster},
			objs: map[string]string{"c1": `apiVersion: kuma.io/v1alpha1
kind: TrafficRoute
metadata: {name: test-server}
spec:
  conf:
    split:
    - {destination: {kuma.io/zone: c1}}
    - {weight: 10, destination: {kuma.io/zone: c2}}
`},
			wantErr: []string{"spec.conf.split[0].weight", "requires a weight"},
		},
		{
			name: "skupper sequential traffic stays local",
			q:    Query{Ref: Ref{Kind: KindSkupper, Namespace: "hello", Name: "backend"}, By: ByCluster, Clusters: []string{"c1", "c2", "c3"}, Selector: "app=backend"},
			objs: map[string]string{
				"c1": pod("hello", "b1", "{app: backend}") + "---\n" + exposeV1("hello", "backend", "app=backend"),
				"c2": pod("hello", "b2", "{app: backend}") + "---\n" + exposeV1("hello", "backend", "app=backend") + "---\n" + `apiVersion: v1
kind: Secret
metadata: {name: link1, namespace: hello, labels: {skupper.io/type: connection-token}, annotations: {skupper.io/cost: "5"}}
`,
				"c3": pod("hello", "b3", "{app: backend}") + "---\n" + exposeV1("hello", "backend", "app=backend") + "---\n" + `apiVersion: skupper.io/v2alpha1
kind: Link
metadata: {name: link1, namespace: hello}
spec: {cost: 2}
`,
			},
			shares:   map[string]float64{"c1": 1, "c2": 0, "c3": 0},
			backends: map[string]int{"c1": 1, "c2": 1, "c3": 1},
		},
		{
			name: "skupper balanced over concurrent connections",
			q:    Query{Ref: Ref{Kind: KindSkupper, Namespace: "hello", Name: "backend"}, By: ByCluster, Clusters: []string{"c1", "c2"}, Selector: "app=backend", Connections: 4},
			objs: map[string]string{
				"c1": pod("hello", "b1", "{app: backend}") + "---\n" + exposeV1("hello", "backend", "app=backend"),
				"c2": pod("hello", "b2", "{app: backend}") + "---\n" + exposeV1("hello", "backend", "app=backend") + "---\n" + `apiVersion: v1
kind: Secret
metadata: {name: link1, namespace: hello, labels: {skupper.io/type: connection-token}, annotations: {skupper.io/cost: "2"}}
`,
			},
			// open counts: c1 0,1,2 (values 0,1,2 < c2's 2 until c1 has 2, tie goes local), then c2: c1 3, c2 1
			shares: map[string]float64{"c1": 0.75, "c2": 0.25},
		},
		{
			name: "skupper bad cost annotation",
			q:    Query{Ref: Ref{Kind: KindSkupper, Namespace: "hello", Name: "backend"}, By: ByCluster, Clusters: []string{"c1", "c2"}, Selector: "app=backend"},
			objs: map[string]string{"c2": pod("hello", "b2", "{app: backend}") + "---\n" + exposeV1("hello", "backend", "app=backend") + "---\n" + `apiVersion: v1
kind: Secret
metadata: {name: link1, namespace: hello, labels: {skupper.io/type: connection-token}, annotations: {skupper.io/cost: "cheap"}}
`},
			wantErr: []string{"Secret hello/link1 in cluster c2", "metadata.annotations.skupper.io/cost", `"cheap"`},
		},
		{
			name: "cilium global, affinity none: per pod",
			q:    Query{Ref: Ref{Kind: KindService, Namespace: "rb", Name: "rebel-base"}, By: ByCluster, Clusters: []string{"c1", "c2"}},
			objs: map[string]string{
				"c1": ciliumSvc(`{service.cilium.io/global: "true"}`) + "---\n" + pod("rb", "a", "{app: rb}"),
				"c2": ciliumSvc(`{service.cilium.io/global: "true"}`) + "---\n" + pod("rb", "b", "{app: rb}") + "---\n" + pod("rb", "c", "{app: rb}"),
			},
			shares:   map[string]float64{"c1": 1.0 / 3, "c2": 2.0 / 3},
			backends: map[string]int{"c1": 1, "c2": 2},
		},
		{
			name: "cilium affinity local with local backends",
			q:    Query{Ref: Ref{Kind: KindService, Namespace: "rb", Name: "rebel-base"}, By: ByCluster, Clusters: []string{"c1", "c2"}},
			objs: map[string]string{
				"c1": ciliumSvc(`{service.cilium.io/global: "true", service.cilium.io/affinity: local}`) + "---\n" + pod("rb", "a", "{app: rb}"),
				"c2": ciliumSvc(`{io.cilium/global-service: "true"}`) + "---\n" + pod("rb", "b", "{app: rb}"),
			},
			shares: map[string]float64{"c1": 1, "c2": 0},
		},
		{
			name: "cilium affinity local without local backends fails over",
			q:    Query{Ref: Ref{Kind: KindService, Namespace: "rb", Name: "rebel-base"}, By: ByCluster, Clusters: []string{"c1", "c2"}},
			objs: map[string]string{
				"c1": ciliumSvc(`{service.cilium.io/global: "true", service.cilium.io/affinity: local}`),
				"c2": ciliumSvc(`{service.cilium.io/global: "true"}`) + "---\n" + pod("rb", "b", "{app: rb}"),
			},
			shares:   map[string]float64{"c1": 0, "c2": 1},
			backends: map[string]int{"c1": 0, "c2": 1},
		},
		{
			name: "cilium not shared remote",
			q:    Query{Ref: Ref{Kind: KindService, Namespace: "rb", Name: "rebel-base"}, By: ByCluster, Clusters: []string{"c1", "c2"}},
			objs: map[string]string{
				"c1": ciliumSvc(`{service.cilium.io/global: "true"}`) + "---\n" + pod("rb", "a", "{app: rb}"),
				"c2": ciliumSvc(`{service.cilium.io/global: "true", service.cilium.io/shared: "false"}`) + "---\n" + pod("rb", "b", "{app: rb}"),
			},
			shares:   map[string]float64{"c1": 1},
			backends: map[string]int{"c1": 1},
		},
		{
			name:    "cilium bad affinity",
			q:       Query{Ref: Ref{Kind: KindService, Namespace: "rb", Name: "rebel-base"}, By: ByCluster, Clusters: []string{"c1"}},
			objs:    map[string]string{"c1": ciliumSvc(`{service.cilium.io/global: "true", service.cilium.io/affinity: nearest}`) + "---\n" + pod("rb", "a", "{app: rb}")},
			wantErr: []string{"Service rb/rebel-base in cluster c1", "metadata.annotations.service.cilium.io/affinity", `"nearest"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := tt.q
			if q.Clusters == nil {
				q.Clusters = []string{"c1"}
			}
			e, err := Resolve(q, objects(t, tt.objs))
			if !checkSharesOrError(t, e, err, tt.shares, tt.wantErr) {
				return
			}
			if len(e.Mirrors) != len(tt.mirrors) {
				t.Errorf("mirrors %+v, want %+v", e.Mirrors, tt.mirrors)
			}
			for i := range min(len(e.Mirrors), len(tt.mirrors)) {
				if e.Mirrors[i] != tt.mirrors[i] {
					t.Errorf("mirror %d = %+v, want %+v", i, e.Mirrors[i], tt.mirrors[i])
				}
			}
			if tt.rule != "" && e.Rule != tt.rule {
				t.Errorf("rule %s, want %s", e.Rule, tt.rule)
			}
			if len(e.Sources) == 0 {
				t.Error("no sources")
			}
			if tt.backends != nil && !maps.Equal(e.Backends, tt.backends) {
				t.Errorf("backends %v of %q, want %v", e.Backends, e.BackendsOf, tt.backends)
			}
		})
	}
}

// meshHTTPRoute is MeshHTTPRoute kuma-demo/canary with rules for
// test-server.
func meshHTTPRoute(rules string) string {
	return `apiVersion: kuma.io/v1alpha1
kind: MeshHTTPRoute
metadata: {name: canary, namespace: kuma-demo}
spec:
  to:
  - targetRef: {kind: MeshService, name: test-server}
    rules:
` + rules
}

func ciliumSvc(annotations string) string {
	return `apiVersion: v1
kind: Service
metadata: {name: rebel-base, namespace: rb, annotations: ` + annotations + `}
spec: {selector: {app: rb}}
`
}

// TestProvenance checks that the sources name the objects with their
// resourceVersion and the fields read.
// checkSharesOrError checks Resolve's answer against a table row: the
// error's substrings when wantErr is set, else the shares. It reports
// whether the shares were checked (no error wanted).
func checkSharesOrError(t *testing.T, e Expected, err error, shares map[string]float64, wantErr []string) bool {
	t.Helper()
	if wantErr != nil {
		if err == nil {
			t.Fatalf("no error; shares %v", e.Shares)
		}
		for _, w := range wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not say %q", err, w)
			}
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Shares) != len(shares) {
		t.Errorf("shares %v, want %v", e.Shares, shares)
	}
	for b, want := range shares {
		if got, ok := e.Shares[b]; !ok || !near(got, want) {
			t.Errorf("share of %s = %v, want %v (all %v; %s)", b, got, want, e.Shares, strings.Join(e.Explanation, "; "))
		}
	}
	return true
}

func TestProvenance(t *testing.T) {
	t.Parallel()
	objs := objects(t, map[string]string{"c1": reviewsVS(`  - route:
    - {destination: {host: reviews, subset: v1}, weight: 1}
    - {destination: {host: reviews, subset: v2}, weight: 3}
`) + "---\n" + reviewsDR + "---\n" + reviewsSvc + "---\n" + reviewsPods})
	e, err := Resolve(Query{Ref: vsRef(), By: ByVersion, Clusters: []string{"c1"}}, objs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"VirtualService demo/reviews in cluster c1 (resourceVersion 42)", "DestinationRule demo/reviews in cluster c1 (resourceVersion 5)", "Service demo/reviews in cluster c1 (resourceVersion 7)"}
	if len(e.Sources) != len(want) {
		t.Fatalf("sources %v, want %v", e.Sources, want)
	}
	for i, w := range want {
		if e.Sources[i].String() != w {
			t.Errorf("source %d = %s, want %s", i, e.Sources[i], w)
		}
	}
	for _, f := range []string{"spec.http[0].route[0].weight", "spec.http[0].route[1].destination.subset"} {
		if !strings.Contains(strings.Join(e.Sources[0].Fields, " "), f) {
			t.Errorf("fields %v lack %s", e.Sources[0].Fields, f)
		}
	}
	if e.Weights["v1"] != 1 || e.Weights["v2"] != 3 {
		t.Errorf("weights %v, want the object's own 1 and 3", e.Weights)
	}
}

// flaggerTrafficRoute is the TrafficRoute Flagger's Kuma router writes for
// Canary callme/callme-service (port 8080) at a canary weight.
func flaggerTrafficRoute(primary, canary int) string {
	return fmt.Sprintf(`apiVersion: kuma.io/v1alpha1
kind: TrafficRoute
mesh: default
metadata: {name: callme-service, resourceVersion: "12"}
spec:
  sources:
  - match: {kuma.io/service: "*"}
  destinations:
  - match: {kuma.io/service: callme-service_callme_svc_8080}
  conf:
    loadBalancer: {roundRobin: {}}
    split:
    - {weight: %d, destination: {kuma.io/service: callme-service-primary_callme_svc_8080}}
    - {weight: %d, destination: {kuma.io/service: callme-service-canary_callme_svc_8080}}
`, primary, canary)
}

// callmeSvc is one of the Services Flagger makes for callme-service: the
// primary's selects app=callme-service-primary, the canary's app=callme-service.
func callmeSvc(name string) string {
	app := strings.TrimSuffix(strings.TrimSuffix(name, "-primary"), "-canary")
	if strings.HasSuffix(name, "-primary") {
		app = name
	}
	return `apiVersion: v1
kind: Service
metadata: {name: ` + name + `, namespace: callme}
spec: {selector: {app: ` + app + `}, ports: [{port: 8080}]}
`
}

// FuzzResolveTrafficRoute feeds arbitrary TrafficRoute bodies (Flagger's
// and the lab's as seeds) with Flagger's Services and pods: Resolve never
// panics, and an error names the TrafficRoute; shares, when there are
// some, are in [0, 1] and add up to 1.
func FuzzResolveTrafficRoute(f *testing.F) {
	f.Add(flaggerTrafficRoute(90, 10))
	f.Add(flaggerTrafficRoute(0, 0))
	f.Add("apiVersion: kuma.io/v1alpha1\nkind: TrafficRoute\nmetadata: {name: callme-service}\nspec:\n  conf:\n    destination: {kuma.io/service: a_b_svc_1}\n")
	f.Add("apiVersion: kuma.io/v1alpha1\nkind: TrafficRoute\nmetadata: {name: callme-service}\nspec:\n  conf:\n    split:\n    - {weight: 1, destination: {kuma.io/service: x__svc_80, version: v1}}\n")
	f.Fuzz(func(t *testing.T, route string) {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(route), &m); err != nil || m == nil {
			return
		}
		m["kind"], m["apiVersion"] = "TrafficRoute", "kuma.io/v1alpha1"
		if md, ok := m["metadata"].(map[string]any); ok {
			md["name"] = "callme-service"
		} else {
			m["metadata"] = map[string]any{"name": "callme-service"}
		}
		objs := objects(t, map[string]string{"c1": callmeSvc("callme-service-primary") + "---\n" + callmeSvc("callme-service-canary") +
			"---\n" + pod("callme", "p1", "{app: callme-service-primary, version: v1}") + "---\n" + pod("callme", "c1", "{app: callme-service, version: v2}")})
		objs["c1"] = append(objs["c1"], &unstructured.Unstructured{Object: m})
		for _, by := range []string{ByVersion, ByCluster} {
			e, err := Resolve(Query{Ref: Ref{Kind: KindTrafficRoute, Name: "callme-service"}, By: by, Clusters: []string{"c1"}}, objs)
			checkResolved(t, e, err, "callme-service")
		}
	})
}

// checkResolved is a fuzz target's check of Resolve's answer: an error
// names the object (want in its text); shares are in [0, 1] and, when
// there are some, add up to 1.
func checkResolved(t *testing.T, e Expected, err error, want string) {
	t.Helper()
	if err != nil {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error names no %s: %v", want, err)
		}
		return
	}
	sum := 0.0
	for b, v := range e.Shares {
		if !(v >= 0 && v <= 1) {
			t.Fatalf("share of %q = %v", b, v)
		}
		sum += v
	}
	if len(e.Shares) > 0 && math.Abs(sum-1) > 1e-6 {
		t.Fatalf("shares %v add up to %v", e.Shares, sum)
	}
}
