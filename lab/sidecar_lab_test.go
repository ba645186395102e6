package lab_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/lab/envoylog"
)

// The Istio mirroring tutorial in the lab, read with kubectl as a user
// would on a real mesh: callme's own log has one line per request and no
// request id; the caller's istio-proxy logs one outbound line per call
// with an id its sidecar made up (the caller forwards nothing, so the
// client's id is nowhere); callme v1's istio-proxy logs the same ids; v2's
// logs the mirror copies with the -shadow authority and the primaries'
// ids — as many as the data plane says it mirrored.
func TestIstioSidecarsOfTheMirrorTutorial(t *testing.T) {
	tl := newTestLab(t)
	l := tl.up("istio-mirror")
	for _, p := range l.Status.Pods {
		if p.Role == daemon.RoleApp && (p.SidecarContainer != "istio-proxy" || p.SidecarMetrics == "") {
			t.Fatalf("pod %s: sidecar %q (metrics %q), want istio-proxy", p.Name, p.SidecarContainer, p.SidecarMetrics)
		}
	}
	caller := tl.portForward("--context", "kind-c1", "port-forward", "svc/caller-service", ":8080")
	const n = 20
	for i := range n {
		if body := get(t, caller+"/caller/ping", fmt.Sprintf("client-id-%d", i)); body != "I'm caller-service v1. Calling... I'm callme-service v1" {
			t.Fatalf("caller answered %q", body)
		}
	}
	logs := func(context, deploy string, container ...string) string {
		args := []string{"--context", context, "logs", "deploy/" + deploy}
		if len(container) > 0 {
			args = append(args, "-c", container[0])
		}
		return tl.kubectl(args...)
	}
	access := func(text string) []envoylog.Entry {
		var out []envoylog.Entry
		for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
			e, err := envoylog.Parse(envoylog.Istio, line)
			if err != nil {
				t.Fatalf("istio-proxy line: %v", err)
			}
			out = append(out, e)
		}
		return out
	}

	// The apps' own logs: their lines only, no request id.
	v1App := logs("kind-c1", "callme-service-v1")
	if got := strings.Count(v1App, "p.p.s.c.controller.CallmeController      : Ping: name=callme-service, version=v1\n"); got != n {
		t.Errorf("callme v1 logged %d Ping lines for %d requests", got, n)
	}
	if strings.Contains(v1App+logs("kind-c1", "caller-service"), "client-id-") || strings.Contains(v1App, "[20") {
		t.Errorf("an app log holds a request id or an access line:\n%s", v1App)
	}

	out := access(logs("kind-c1", "caller-service", "istio-proxy"))
	in1 := access(logs("kind-c1", "callme-service-v1", "istio-proxy"))
	in2 := access(logs("kind-c2", "callme-service-v2", "istio-proxy"))
	if len(out) != n || len(in1) != n {
		t.Fatalf("%d outbound lines in the caller's istio-proxy, %d inbound in v1's, want %d each", len(out), len(in1), n)
	}
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	var ids []string
	for i, e := range out {
		if !uuid.MatchString(e.RequestID) || e.Authority != "callme-service:8080" || e.Code != 200 || e.UserAgent != "Java/11.0.11" ||
			e.UpstreamCluster != "outbound|8080|v1|callme-service.default.svc.cluster.local" {
			t.Errorf("outbound line %d: %+v", i, e)
		}
		ids = append(ids, e.RequestID)
		if in1[i].RequestID != e.RequestID || in1[i].Authority != "callme-service:8080" || in1[i].UpstreamCluster != "inbound|8080||" {
			t.Errorf("v1's inbound line %d %+v, want the caller's call %s", i, in1[i], e.RequestID)
		}
	}
	for _, e := range in2 {
		if e.Authority != "callme-service-shadow:8080" || !slices.Contains(ids, e.RequestID) {
			t.Errorf("v2's line %+v: want a mirror copy (-shadow) of one of the caller's calls", e)
		}
	}
	var mirrored int64 = -1
	waitFor(t, "the status to count the copies", 10*time.Second, func() bool {
		r, err := lab.Status(context.Background(), lab.Options{Dir: tl.dir})
		if err != nil || r.Status == nil {
			return false
		}
		for _, p := range r.Status.Pods {
			if p.Routed != nil && p.Routed.Mirrored["c2"] == int64(len(in2)) {
				mirrored = p.Routed.Mirrored["c2"]
				return true
			}
		}
		return false
	})
	if mirrored == 0 {
		t.Errorf("no copy was mirrored to v2 in %d requests at 50%%", n)
	}
	t.Logf("%d calls, %d mirrored copies logged by v2's istio-proxy, %d by the data plane", n, len(in2), mirrored)
}
