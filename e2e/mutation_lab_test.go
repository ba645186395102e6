package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
)

// routeTimeout is how soon after a kubectl patch the lab's data plane must
// route by the patched object ("within seconds").
const routeTimeout = 5 * time.Second

// TestMutationsFlipVerdicts changes a mesh object of a running lab with
// kubectl patch, as a user changing the mesh's configuration does, and
// checks that the catalog scenario of the seed judges the new routing:
// the verdict flips the way the change implies. The lab's data plane
// routes by the object the daemon watches, so the scenario, unchanged,
// PASSes before and FAILs after.
func TestMutationsFlipVerdicts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, topology, scenario string
		// cluster and patch: kubectl patch arguments.
		cluster string
		patch   []string
		// policy is a substring of the entry's policy in the lab status
		// once the daemon applied the change.
		policy string
		// bad, if set, then patches the object into one the mesh refuses:
		// the status must name the field (badErr) and the entry keep
		// routing by policy.
		bad    []string
		badErr string
	}{
		{"mirrorPercentage 50 -> 10", "istio-mirror", "istio-mirror", "c1",
			[]string{"virtualservice", "callme-service-route", "--type", "json", "-p", `[{"op":"replace","path":"/spec/http/0/mirrorPercentage/value","value":10}]`},
			"mirror 10% to version v2",
			[]string{"virtualservice", "callme-service-route", "--type", "json", "-p", `[{"op":"replace","path":"/spec/http/0/route/0/destination/subset","value":"v9"}]`},
			`spec.http[0].route[0].destination.subset: subset "v9" is not defined by any DestinationRule`},
		// Kuma's route weights, 90/10 by zone, made 50/50.
		{"TrafficRoute weights 90/10 -> 50/50", "kuma-canary", "kuma-canary", "c1",
			[]string{"trafficroute", "test-server", "--type", "json", "-p",
				`[{"op":"replace","path":"/spec/conf/split/0/weight","value":50},{"op":"replace","path":"/spec/conf/split/1/weight","value":50}]`},
			"weights by cluster c1=50,c2=50", nil, ""},
		// c3's link made dearer than six concurrent connections: the
		// router keeps every connection on c2, no even split any more.
		{"skupper link cost of c3 1 -> 10", "skupper-1", "skupper-1", "c3",
			[]string{"secret", "link1", "-n", "interconnect", "-p", `{"metadata":{"annotations":{"skupper.io/cost":"10"}}}`},
			"costs c2=1,c3=10", nil, ""},
		// Skupper v2: c3's Connector no longer carries the routing key of
		// c1's Listener, so c3 is not exposed to the router any more:
		// every connection goes to c2, none of scenario 4's split.
		{"skupper v2 Connector of c3 off the Listener's routing key", "skupper-4-v2", "skupper-4", "c3",
			[]string{"connector", "sample-spring-kotlin-microservice", "-n", "interconnect", "--type", "merge", "-p", `{"spec":{"routingKey":"elsewhere"}}`},
			"costs c2=4 per-connection", nil, ""},
		// The workers' cluster (x-wing's) prefers its own rebel-base pods: no 50/50.
		{"cilium affinity none -> local", "cilium-rebel-base", "cilium-rebel-base", "c1",
			[]string{"service", "rebel-base", "-p", `{"metadata":{"annotations":{"service.cilium.io/affinity":"local"}}}`},
			"failover order c1>c2", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := mv.Lab(t, e2etest.LabSpec{Topology: c.topology})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			f := filepath.Join("..", "scenarios", "catalog", c.scenario+".yaml")
			if from := catalogWorkersFrom[c.scenario]; from != "" {
				applyRBAC(t, l, f, []string{from})
			}
			run := func(want assert.Verdict) {
				t.Helper()
				r := runBinary(t, ctx, "run", f, "--kubeconfig", l.Kubeconfig)
				if r.Report() == nil {
					t.Fatalf("no report (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
				}
				if got := r.Report().Verdict; got != want {
					t.Fatalf("verdict %s, want %s\n%s", got, want, r.Stdout)
				}
			}
			run(assert.Pass)
			patched := time.Now()
			e2etest.Kubectl(t, l, c.cluster, append([]string{"patch"}, c.patch...)...)
			took := waitPolicy(t, l, c.policy, patched)
			t.Logf("%s: the data plane routes by the patched object %v after the patch", c.name, took.Round(time.Millisecond))
			run(assert.Fail)
			if c.bad == nil {
				return
			}
			e2etest.Kubectl(t, l, c.cluster, append([]string{"patch"}, c.bad...)...)
			waitRouteError(t, l, c.badErr, c.policy, time.Now())
			// The API server serves the mesh's real CRD: kubectl refuses an
			// unknown field by its name, as on a cluster with the mesh.
			out, err := e2etest.KubectlErr(t, l, []byte(unknownFieldVS), c.cluster, "apply", "-f", "-")
			if err == nil || !strings.Contains(out, `unknown field "spec.http[0].retriez"`) {
				t.Errorf("kubectl apply of a VirtualService with an unknown field: %v\n%s", err, out)
			}
		})
	}
}

// unknownFieldVS misspells a VirtualService field.
const unknownFieldVS = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: misspelt}
spec:
  hosts: [callme-service]
  http:
    - route: [{destination: {host: callme-service}}]
      retriez: {attempts: 3}
`

// waitPolicy waits until an entry pod's policy in the lab status contains
// want, at most routeTimeout after since, and returns how long it took.
func waitPolicy(t *testing.T, l *lab.Lab, want string, since time.Time) time.Duration {
	t.Helper()
	for {
		st, err := daemon.ReadStatus(l.Dir)
		if err == nil {
			for _, p := range st.Pods {
				if strings.Contains(p.Policy, want) {
					return time.Since(since)
				}
			}
			for _, w := range st.Workers {
				if strings.Contains(w.Policy, want) {
					return time.Since(since)
				}
			}
		}
		if time.Since(since) > routeTimeout {
			var got []string
			if st != nil {
				for _, p := range st.Pods {
					if p.Policy != "" {
						got = append(got, p.Name+": "+p.Policy)
					}
				}
				for _, w := range st.Workers {
					got = append(got, "workers entry "+w.Entry+": "+w.Policy)
				}
			}
			t.Fatalf("no entry routes by %q %v after the patch (policies: %q; status error %v)", want, routeTimeout, got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRouteError waits until an entry pod's status reports a refused
// route containing want while its policy still contains policy.
func waitRouteError(t *testing.T, l *lab.Lab, want, policy string, since time.Time) {
	t.Helper()
	for {
		st, err := daemon.ReadStatus(l.Dir)
		if err == nil {
			for _, p := range st.Pods {
				if strings.Contains(p.RouteError, want) {
					if !strings.Contains(p.Policy, policy) {
						t.Fatalf("route refused (%s), but the policy changed to %q", p.RouteError, p.Policy)
					}
					return
				}
			}
		}
		if time.Since(since) > routeTimeout {
			t.Fatalf("no entry reports a refused route containing %q %v after the patch (status error %v)", want, routeTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLabUpRefusesBadManifests: `lab up` of a topology directory whose
// manifests the mesh would refuse fails before it starts anything, naming
// the file, the object and the field, as kubectl or istioctl would; what
// the mesh accepts (weights not adding up to 100: relative since Istio
// 1.15) is not refused.
func TestLabUpRefusesBadManifests(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		edits []string
		want  []string // substrings of the error
	}{
		{"an unknown kind", []string{"kind: VirtualService", "kind: VirtualSvc"},
			[]string{"c1/virtualservice.yaml:3: VirtualSvc callme-service-route: kind VirtualSvc (apiVersion networking.istio.io/v1beta1) is not a kind the lab serves"}},
		{"a route to an undefined subset", []string{"          subset: v1", "          subset: v3"},
			[]string{`VirtualService default/callme-service-route in cluster c1: spec.http[0].route[0].destination.subset: subset "v3" is not defined by any DestinationRule`,
				"c1/virtualservice.yaml:3)"}},
		{"a negative weight", []string{"weight: 100", "weight: -100"},
			[]string{"spec.http[0].route[0].weight: -100: want a whole number >= 0", "c1/virtualservice.yaml:3)"}},
		{"several destinations, none weighted", []string{"        weight: 100\n", "      - destination:\n          host: callme-service\n          subset: v2\n"},
			[]string{"spec.http[0].route: 2 destinations and none has a weight: total destination weight = 0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			topo := editedTopology(t, "istio-mirror", c.edits)
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r := runBinary(t, ctx, "lab", "up", "--topology", topo, "--dir", dir)
			for _, w := range c.want {
				if r.Code == 0 || !strings.Contains(r.Stderr, w) {
					t.Fatalf("lab up: exit %d, want a failure saying %q\nstdout:\n%s\nstderr:\n%s", r.Code, w, r.Stdout, r.Stderr)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "kwok")); err == nil {
				t.Errorf("lab up started clusters before refusing the manifests")
			}
		})
	}
}
