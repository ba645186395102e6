package meshroute

import (
	"reflect"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/lab/meshsim"
)

// helloworldGateway is samples/helloworld/helloworld-gateway.yaml (istio
// master), field for field, in namespace sample.
const helloworldGateway = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: helloworld-gateway
  namespace: sample
spec:
  selector:
    istio: ingressgateway # use istio default controller
  servers:
  - port:
      number: 80
      name: http
      protocol: HTTP
    hosts:
    - "*"
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: helloworld
  namespace: sample
spec:
  hosts:
  - "*"
  gateways:
  - helloworld-gateway
  http:
  - match:
    - uri:
        exact: /hello
    route:
    - destination:
        host: helloworld
        port:
          number: 5000
`

// TestDeriveIstioGateway: a gateway entry routes by the VirtualService
// bound to a Gateway that selects its pods, with the hosts and uri
// conditions as match conditions; with none it has no route (404).
func TestDeriveIstioGateway(t *testing.T) {
	t.Parallel()
	gw := Entry{Name: "istio-ingressgateway", Mesh: MeshIstio, Cluster: "c1", Namespace: "sample", To: "helloworld", ServicePort: 5000,
		Clusters: []string{"c1", "c2"}, Gateway: true,
		Labels: map[string]string{"istio": "ingressgateway", "app": "istio-ingressgateway"}}
	hello := &meshsim.Match{Hosts: []string{"*"}, URIs: []meshsim.URIMatch{{Kind: meshsim.URIExact, Value: "/hello"}}}
	sub := func(old, new string) string { return strings.Replace(helloworldGateway, old, new, 1) }
	tests := []struct {
		name    string
		entry   Entry
		objs    string
		want    *meshsim.Match // the policy's Match when routed
		noRoute string         // a substring of Policy.NoRoute: no route
		ignored string
		err     string
	}{
		{name: "the tutorial's Gateway and VirtualService", entry: gw, objs: helloworldGateway, want: hello},
		{name: "no Gateway, no VirtualService: 404", entry: gw, objs: "",
			noRoute: "no VirtualService bound to a Gateway selecting istio-ingressgateway (pod labels app=istio-ingressgateway,istio=ingressgateway); no Gateway in cluster c1 selects it"},
		{name: "a VirtualService of the backend host for the sidecars does not bind the gateway", entry: gw,
			objs:    "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: hw, namespace: sample}\nspec:\n  hosts: [helloworld]\n  http:\n  - route:\n    - destination: {host: helloworld}\n",
			noRoute: "no VirtualService bound to a Gateway selecting istio-ingressgateway"},
		{name: "a Gateway that selects other pods", entry: gw, objs: sub("istio: ingressgateway #", "istio: eastwestgateway #"),
			noRoute: "no Gateway in cluster c1 selects it"},
		{name: "spec.gateways names a Gateway that does not exist", entry: gw, objs: sub("  - helloworld-gateway\n", "  - hellowrld-gateway\n"),
			noRoute: "Gateways selecting it: sample/helloworld-gateway; VirtualService sample/helloworld: spec.gateways[0] names Gateway sample/hellowrld-gateway, which does not exist in cluster c1"},
		{name: "a bare gateway name is in the VirtualService's namespace", entry: gw,
			objs:    strings.Replace(helloworldGateway, "  name: helloworld-gateway\n  namespace: sample\n", "  name: helloworld-gateway\n  namespace: istio-system\n", 1),
			noRoute: "spec.gateways[0] names Gateway sample/helloworld-gateway, which does not exist"},
		{name: "a namespace-qualified gateway name", entry: gw,
			objs: strings.Replace(sub("  - helloworld-gateway\n", "  - istio-system/helloworld-gateway\n"), "  name: helloworld-gateway\n  namespace: sample\n", "  name: helloworld-gateway\n  namespace: istio-system\n", 1),
			want: hello},
		{name: "mesh alone binds no gateway", entry: gw, objs: sub("  - helloworld-gateway\n", "  - mesh\n"),
			noRoute: "Gateways selecting it: sample/helloworld-gateway"},
		{name: "hosts that match no server host", entry: gw,
			objs:    strings.Replace(sub("    - \"*\"\n---", "    - \"*.example.com\"\n---"), "  hosts:\n  - \"*\"\n  gateways", "  hosts:\n  - helloworld.other.org\n  gateways", 1),
			noRoute: "no VirtualService bound"},
		{name: "a wildcard VirtualService host takes the server's narrower host", entry: gw, objs: sub("    - \"*\"\n---", "    - \"*.example.com\"\n---"),
			want: &meshsim.Match{Hosts: []string{"*.example.com"}, URIs: hello.URIs}},
		{name: "a server host of another namespace", entry: gw, objs: sub("    - \"*\"\n---", "    - \"other/*\"\n---"),
			noRoute: "no VirtualService bound"},
		{name: "a server host of the Gateway's own namespace", entry: gw, objs: sub("    - \"*\"\n---", "    - \"./*\"\n---"), want: hello},
		{name: "an HTTPS server's routes are not played", entry: gw, objs: sub("protocol: HTTP\n", "protocol: HTTPS\n"),
			noRoute: "no VirtualService bound", ignored: `spec.servers[0] (protocol "HTTPS"`},
		{name: "prefix and regex conditions, ORed", entry: gw,
			objs: sub("    - uri:\n        exact: /hello\n", "    - uri:\n        prefix: /api/\n    - uri:\n        regex: /v[0-9]+/hello\n      ignoreUriCase: false\n"),
			want: &meshsim.Match{Hosts: []string{"*"}, URIs: []meshsim.URIMatch{{Kind: meshsim.URIPrefix, Value: "/api/"}, {Kind: meshsim.URIRegex, Value: "/v[0-9]+/hello"}}}},
		{name: "a header condition is reported, the uri played", entry: gw,
			objs: sub("    - uri:\n        exact: /hello\n", "    - uri:\n        exact: /hello\n      headers: {end-user: {exact: jason}}\n"),
			want: hello, ignored: "spec.http[0].match[0].headers"},
		{name: "a condition without uri takes every path", entry: gw,
			objs: sub("    - uri:\n        exact: /hello\n", "    - uri:\n        exact: /hello\n    - method: {exact: GET}\n"),
			want: &meshsim.Match{Hosts: []string{"*"}}, ignored: "spec.http[0].match[1].method"},
		{name: "a bad regex", entry: gw, objs: sub("exact: /hello", "regex: \"/hello(\""),
			err: `VirtualService sample/helloworld in cluster c1: spec.http[0].match[0].uri.regex: "/hello(": error parsing regexp`},
		{name: "two string matches in one uri", entry: gw, objs: sub("exact: /hello", "exact: /hello\n        prefix: /h"),
			err: "spec.http[0].match[0].uri: want exactly one of exact, prefix, regex"},
		{name: "a second rule after one with conditions", entry: gw,
			objs: helloworldGateway + "  - route:\n    - destination:\n        host: helloworld\n",
			err:  "spec.http[1]: the lab plays one HTTP rule, spec.http[0]"},
		{name: "a destination subset no DestinationRule defines", entry: gw, objs: sub("        host: helloworld\n", "        host: helloworld\n        subset: v3\n"),
			err: `VirtualService sample/helloworld in cluster c1: spec.http[0].route[0].destination.subset: subset "v3" is not defined`},
		{name: "two VirtualServices bound", entry: gw,
			objs: helloworldGateway + "---\n" + strings.Replace(helloworldGateway[strings.Index(helloworldGateway, "apiVersion: networking.istio.io/v1\nkind: VirtualService"):], "name: helloworld\n", "name: helloworld-2\n", 1),
			err:  "several VirtualServices are bound to the Gateways selecting gateway istio-ingressgateway: VirtualService sample/helloworld, VirtualService sample/helloworld-2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := Objects{}
			if tc.objs != "" {
				objs = objects(t, map[string]string{"c1": tc.objs})
			}
			r, ok := derived(t, tc.entry, objs, tc.err)
			if !ok {
				return
			}
			if tc.noRoute != "" {
				if !strings.Contains(r.Policy.NoRoute, tc.noRoute) {
					t.Errorf("NoRoute = %q, want it to contain %q", r.Policy.NoRoute, tc.noRoute)
				}
				if !strings.Contains(r.Describe(), "404") {
					t.Errorf("Describe() = %q: does not say the gateway answers 404", r.Describe())
				}
			} else {
				if r.Policy.NoRoute != "" {
					t.Errorf("no route: %s", r.Policy.NoRoute)
				}
				if !reflect.DeepEqual(r.Policy.Match, tc.want) {
					t.Errorf("match = %+v, want %+v", r.Policy.Match, tc.want)
				}
				if r.Policy.Mode != meshsim.ModePerPod {
					t.Errorf("mode %q, want %q (one destination without a subset)", r.Policy.Mode, meshsim.ModePerPod)
				}
			}
			checkIgnored(t, r, tc.ignored)
			if _, err := meshsim.New(r.Policy); err != nil {
				t.Errorf("the simulator refuses the derived policy: %v", err)
			}
		})
	}
}

// TestDeriveIstioSidecarMatch: a sidecar plays the first rule's uri
// conditions too; a rule without conditions makes later rules dead.
func TestDeriveIstioSidecarMatch(t *testing.T) {
	t.Parallel()
	e := Entry{Name: "istio-proxy", Mesh: MeshIstio, Cluster: "c1", Namespace: "default", To: "callme-service", Clusters: []string{"c1"}}
	vs := func(rules string) string {
		return "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: callme}\nspec:\n  hosts: [callme-service]\n  http:\n" + rules
	}
	const route = "    route: [{destination: {host: callme-service}}]\n"
	tests := []struct {
		name, objs, ignored, err string
		want                     *meshsim.Match
	}{
		{name: "a prefix", objs: vs("  - match: [{uri: {prefix: /callme}, ignoreUriCase: true}]\n" + route),
			want: &meshsim.Match{URIs: []meshsim.URIMatch{{Kind: meshsim.URIPrefix, Value: "/callme", IgnoreCase: true}}}},
		{name: "no conditions: later rules never match", objs: vs("  - name: all\n" + route + "  - match: [{uri: {exact: /x}}]\n" + route),
			ignored: "spec.http[1:] (never matched"},
		{name: "a header-only rule is taken to miss; the next is played", objs: vs("  - match: [{headers: {end-user: {exact: jason}}}]\n" + route + "  - match: [{uri: {prefix: /}}]\n" + route),
			want: &meshsim.Match{URIs: []meshsim.URIMatch{{Kind: meshsim.URIPrefix, Value: "/"}}}, ignored: "spec.http[0].match (conditions the lab does not play"},
		{name: "every rule with unplayed conditions only", objs: vs("  - match: [{headers: {end-user: {exact: jason}}}]\n" + route),
			err: "spec.http: every rule has match conditions the lab does not play"},
		{name: "a rule after the played one with conditions", objs: vs("  - match: [{headers: {x: {exact: y}}}]\n" + route + "  - match: [{uri: {exact: /a}}]\n" + route + "  - route: [{destination: {host: callme-service}}]\n"),
			err: "spec.http[2]: the lab plays one HTTP rule, spec.http[1]; this one would route the requests spec.http[1].match misses"},
		{name: "ignoreUriCase with a regex", objs: vs("  - match: [{uri: {regex: /c.*}, ignoreUriCase: true}]\n" + route),
			err: "spec.http[0].match[0].ignoreUriCase: set with a regex uri"},
		{name: "an unknown string match", objs: vs("  - match: [{uri: {suffix: /x}}]\n" + route),
			err: "spec.http[0].match[0].uri.suffix: unknown string match"},
		{name: "a regex over the limit", objs: vs("  - match: [{uri: {regex: \"" + strings.Repeat("a", meshsim.MaxURIRegex+1) + "\"}}]\n" + route),
			err: "spec.http[0].match[0].uri.regex: 1025 bytes: the lab takes at most 1024"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, ok := derived(t, e, objects(t, map[string]string{"c1": tc.objs}), tc.err)
			if !ok {
				return
			}
			if !reflect.DeepEqual(r.Policy.Match, tc.want) {
				t.Errorf("match = %+v, want %+v", r.Policy.Match, tc.want)
			}
			checkIgnored(t, r, tc.ignored)
		})
	}
}

// derived is e's route from objs; with wantErr it checks Derive fails
// with an error containing it, and says there is no route to check.
func derived(t *testing.T, e Entry, objs Objects, wantErr string) (Route, bool) {
	t.Helper()
	r, err := Derive(e, objs)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("Derive = %v, want an error containing %q", err, wantErr)
		}
		return Route{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, true
}

// checkIgnored checks that one of r.Ignored contains want ("": nothing
// to check).
func checkIgnored(t *testing.T, r Route, want string) {
	t.Helper()
	if want != "" && !strings.Contains(strings.Join(r.Ignored, "\n"), want) {
		t.Errorf("ignored = %q, want one naming %q", r.Ignored, want)
	}
}
