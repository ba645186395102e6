package meshconfig

import (
	"fmt"
	"strings"
	"testing"
)

// exposeV1 is the skupper-services ConfigMap `skupper expose
// deployment/<addr> --port 8080` leaves in a site (Skupper 1.x): one key,
// the address, whose JSON's target selects the app's pods.
func exposeV1(ns, addr, selector string) string {
	return skupperServices(ns, addr, fmt.Sprintf(`{"address":%q,"protocol":"tcp","ports":[8080],"targets":[{"name":%q,"selector":%q}]}`, addr, addr, selector))
}

// skupperServices is a skupper-services ConfigMap with one entry.
func skupperServices(ns, key, json string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: skupper-services, namespace: %s, resourceVersion: "31"}
data:
  %s: '%s'
`, ns, key, json)
}

// skupperV2 is a v2 Listener (in the entry site) or Connector with a
// routing key; a Connector selects app=backend.
func skupperV2(kind, name, key string) string {
	spec := fmt.Sprintf("{routingKey: %s, host: backend, port: 8080}", key)
	if kind == "Connector" {
		spec = fmt.Sprintf("{routingKey: %s, selector: app=backend, port: 8080}", key)
	}
	return fmt.Sprintf(`apiVersion: skupper.io/v2alpha1
kind: %s
metadata: {name: %s, namespace: hello, resourceVersion: "9"}
spec: %s
`, kind, name, spec)
}

const skupperLink = `apiVersion: v1
kind: Secret
metadata: {name: link1, namespace: hello, labels: {skupper.io/type: connection-token}, annotations: {skupper.io/cost: "1"}}
`

// TestResolveSkupperExposure: a Skupper site takes part in the router's
// choice only where the address is exposed (v1's skupper-services entry,
// v2's Connector with a Listener of the same routing key in the entry
// site); the unexposed ones get no share and a line saying why.
func TestResolveSkupperExposure(t *testing.T) {
	t.Parallel()
	q := Query{Ref: Ref{Kind: KindSkupper, Namespace: "hello", Name: "backend"}, By: ByCluster, Clusters: []string{"c1", "c2", "c3"}, Selector: "app=backend", Connections: 2}
	b2, b3 := pod("hello", "b2", "{app: backend}"), pod("hello", "b3", "{app: backend}")
	join := func(docs ...string) string { return strings.Join(docs, "---\n") }
	for _, tc := range []struct {
		name    string
		objs    map[string]string
		shares  map[string]float64
		explain []string // substrings of the explanation
		// notExplain: substrings the explanation must not have.
		notExplain []string
		sources    []string // Source.String() substrings
		wantErr    []string
	}{
		{
			name:    "v1 exposed in both remote sites: balanced over them",
			objs:    map[string]string{"c2": join(b2, skupperLink, exposeV1("hello", "backend", "app=backend")), "c3": join(b3, skupperLink, exposeV1("hello", "backend", "app=backend"))},
			shares:  map[string]float64{"c1": 0, "c2": 0.5, "c3": 0.5},
			sources: []string{"ConfigMap hello/skupper-services in cluster c2 (resourceVersion 31)", "ConfigMap hello/skupper-services in cluster c3"},
		},
		{
			name:    "v1 exposed in c2 only: c2 only",
			objs:    map[string]string{"c2": join(b2, skupperLink, exposeV1("hello", "backend", "app=backend")), "c3": join(b3, skupperLink)},
			shares:  map[string]float64{"c1": 0, "c2": 1, "c3": 0},
			explain: []string{"cluster c3: address backend is not exposed there, so no share: no ConfigMap hello/skupper-services"},
		},
		{
			name: "v1 entry of another address, or a target selecting other pods: not counted",
			objs: map[string]string{
				"c2": join(b2, skupperLink, exposeV1("hello", "backend", "app=backend")),
				"c3": join(b3, skupperLink, exposeV1("hello", "frontend", "app=frontend"), "apiVersion: v1\nkind: Pod\nmetadata: {name: x, namespace: other}\n"),
			},
			shares:  map[string]float64{"c1": 0, "c2": 1, "c3": 0},
			explain: []string{"ConfigMap hello/skupper-services has no key backend"},
		},
		{
			name:       "a site scaled to zero stays exposed and takes nothing",
			objs:       map[string]string{"c2": join(b2, skupperLink, exposeV1("hello", "backend", "app=backend")), "c3": join(skupperLink, exposeV1("hello", "backend", "app=backend"))},
			shares:     map[string]float64{"c1": 0, "c2": 1, "c3": 0},
			explain:    []string{"c3: no ready pods, so no traffic"},
			notExplain: []string{"cluster c3: address backend is not exposed"},
		},
		{
			name:    "v1 target selector selects no serving pod",
			objs:    map[string]string{"c2": join(b2, skupperLink, exposeV1("hello", "backend", "app=backend")), "c3": join(b3, skupperLink, exposeV1("hello", "backend", "app=other"))},
			shares:  map[string]float64{"c1": 0, "c2": 1, "c3": 0},
			explain: []string{"key backend: no target selects a pod that serves it"},
		},
		{
			name: "v2 connectors with the entry site's listener",
			objs: map[string]string{
				"c1": skupperV2("Listener", "backend", "backend"),
				"c2": join(b2, skupperLink, skupperV2("Connector", "backend", "backend")),
				"c3": join(b3, skupperLink, skupperV2("Connector", "backend", "backend")),
			},
			shares:  map[string]float64{"c1": 0, "c2": 0.5, "c3": 0.5},
			sources: []string{"Listener hello/backend in cluster c1", "Connector hello/backend in cluster c2", "Connector hello/backend in cluster c3"},
		},
		{
			name: "v2 connector without a listener for its routing key: not counted",
			objs: map[string]string{
				"c1": skupperV2("Listener", "backend", "backend"),
				"c2": join(b2, skupperLink, skupperV2("Connector", "backend", "backend")),
				"c3": join(b3, skupperLink, skupperV2("Connector", "backend", "backend-v2")),
			},
			shares:  map[string]float64{"c1": 0, "c2": 1, "c3": 0},
			explain: []string{`cluster c3: address backend is not exposed there`, `Connector hello/backend: routing key "backend-v2" has no Listener for backend in the entry site`},
		},
		{
			name: "v2 listener in another site than the entry's does not count",
			objs: map[string]string{
				"c2": join(b2, skupperLink, skupperV2("Connector", "backend", "backend"), skupperV2("Listener", "backend", "backend")),
				"c3": join(b3, skupperLink, exposeV1("hello", "backend", "app=backend")),
			},
			shares: map[string]float64{"c1": 0, "c2": 0, "c3": 1},
		},
		{
			name:    "nothing exposed anywhere: an error naming what is missing",
			objs:    map[string]string{"c2": join(b2, skupperLink), "c3": join(b3, skupperLink, skupperV2("Connector", "backend", "backend"))},
			wantErr: []string{"exposed in none of the clusters c1, c2, c3", "ConfigMap skupper-services with the key backend", "targets[].selector", "Connector (spec.routingKey, spec.selector)", "Listener in cluster c1 with spec.host backend"},
		},
		{
			name:    "bad JSON: an error naming the ConfigMap and its key",
			objs:    map[string]string{"c2": join(b2, skupperLink, skupperServices("hello", "backend", `{"address": "backend", targets`))},
			wantErr: []string{"ConfigMap hello/skupper-services in cluster c2, field data.backend", "not the JSON of a Skupper service definition"},
		},
		{
			name: "bad JSON of another address's key is not read",
			objs: map[string]string{"c2": join(b2, skupperLink, `apiVersion: v1
kind: ConfigMap
metadata: {name: skupper-services, namespace: hello}
data:
  backend: '{"address":"backend","targets":[{"selector":"app=backend"}]}'
  frontend: '{"address"'
`)},
			shares:  map[string]float64{"c1": 0, "c2": 1, "c3": 0},
			explain: []string{"cluster c3: address backend is not exposed there"},
		},
		{
			name:    "entry too big",
			objs:    map[string]string{"c2": join(b2, skupperLink, skupperServices("hello", "backend", `{"address":"backend","x":"`+strings.Repeat("a", MaxSkupperServiceBytes)+`"}`))},
			wantErr: []string{"field data.backend", "a Skupper service definition holds at most 65536"},
		},
		{
			name:    "target without selector or service",
			objs:    map[string]string{"c2": join(b2, skupperLink, skupperServices("hello", "backend", `{"address":"backend","targets":[{"name":"x"}]}`))},
			wantErr: []string{"field data.backend.targets[0]", "want a selector or a service"},
		},
		{
			name:    "entry defining another address",
			objs:    map[string]string{"c2": join(b2, skupperLink, skupperServices("hello", "backend", `{"address":"front","targets":[{"selector":"app=backend"}]}`))},
			wantErr: []string{"field data.backend.address", `"front"`},
		},
		{
			name:    "bad target selector",
			objs:    map[string]string{"c2": join(b2, skupperLink, skupperServices("hello", "backend", `{"address":"backend","targets":[{"selector":"app in ("}]}`))},
			wantErr: []string{"field data.backend.targets[0].selector", `"app in ("`},
		},
		{
			name:    "connector with neither selector nor host",
			objs:    map[string]string{"c1": skupperV2("Listener", "backend", "backend"), "c2": join(b2, skupperLink, "apiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {name: c, namespace: hello}\nspec: {routingKey: backend, port: 8080}\n")},
			wantErr: []string{"Connector hello/c in cluster c2, field spec", "one of selector or host"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := Resolve(q, objects(t, tc.objs))
			if !checkSharesOrError(t, e, err, tc.shares, tc.wantErr) {
				return
			}
			explanation := strings.Join(e.Explanation, "\n")
			for _, w := range tc.explain {
				if !strings.Contains(explanation, w) {
					t.Errorf("explanation lacks %q:\n%s", w, explanation)
				}
			}
			for _, w := range tc.notExplain {
				if strings.Contains(explanation, w) {
					t.Errorf("explanation has %q:\n%s", w, explanation)
				}
			}
			var sources []string
			for _, s := range e.Sources {
				sources = append(sources, s.String())
			}
			for _, w := range tc.sources {
				if !strings.Contains(strings.Join(sources, "\n"), w) {
					t.Errorf("sources lack %q: %v", w, sources)
				}
			}
		})
	}
}

// FuzzSkupperServices: any skupper-services entry for the address
// resolves or is refused with an error naming the ConfigMap; it never
// panics and shares stay a distribution.
func FuzzSkupperServices(f *testing.F) {
	f.Add(`{"address":"backend","protocol":"tcp","ports":[8080],"targets":[{"name":"backend","selector":"app=backend"}]}`)
	f.Add(`{"address":"backend","targets":[{"service":"backend"}]}`)
	f.Add(`{"targets":[{"selector":"app in ("}]}`)
	f.Add(`{"targets":"x"}`)
	f.Add(`null`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, entry string) {
		q := Query{Ref: Ref{Kind: KindSkupper, Namespace: "hello", Name: "backend"}, By: ByCluster, Clusters: []string{"c1", "c2"}, Selector: "app=backend"}
		objs := objects(t, map[string]string{"c2": pod("hello", "b2", "{app: backend}") + "---\n" + skupperLink})
		cm := objects(t, map[string]string{"c2": skupperServices("hello", "backend", "{}")})["c2"][0]
		cm.Object["data"] = map[string]any{"backend": entry}
		objs["c2"] = append(objs["c2"], cm)
		e, err := Resolve(q, objs)
		checkResolved(t, e, err, "backend")
	})
}

// TestSkupperServiceLimit: an entry of skupper-services beyond
// MaxSkupperServiceBytes is refused, one at the limit is read.
func TestSkupperServiceLimit(t *testing.T) {
	t.Parallel()
	def := `{"address":"app","ports":[8080],"targets":[{"selector":"app=app"}],"labels":{"pad":"`
	at := def + strings.Repeat("x", MaxSkupperServiceBytes-len(def)-3) + `"}}`
	if len(at) != MaxSkupperServiceBytes {
		t.Fatalf("test entry is %d bytes, want %d", len(at), MaxSkupperServiceBytes)
	}
	if _, err := ParseSkupperService(at); err != nil {
		t.Errorf("an entry of %d bytes: %v, want it read", len(at), err)
	}
	over := strings.Replace(at, `"pad":"`, `"pad":"y`, 1)
	if _, err := ParseSkupperService(over); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("an entry of %d bytes: %v, want it refused by its size", len(over), err)
	}
}
