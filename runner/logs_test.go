package runner

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/podlogs"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// logScenario is a scenario observing one workload's logs with the given
// logs block, in clusters c1 and c2.
func logScenario(t *testing.T, workload, selector, logs string) *scenarios.Scenario {
	t.Helper()
	src := fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: logs}
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
target: {url: "http://127.0.0.1:1/hello"}
attack: {rate: 10/s, duration: 1s}
attribution: {rules: [{body: "(?P<pod>\\S+)"}]}
observe:
  - name: %s
    namespace: sample
    selector: %s
    logs:
%s
expect:
  - successRate: {atLeast: 99%%}
`, workload, selector, logs)
	sc, err := scenarios.Parse("logs.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// replay runs lines through a log source as the followed pod's log
// would give them, without a cluster: the inventory is the given pods'
// (kube.NewInventory), and the lines carry the runtime's timestamps
// one per 10 ms from start.
func replay(t *testing.T, sc *scenarios.Scenario, inv *kube.Inv, from kube.Pod, start time.Time, lines []string) (*logSource, tally.Snapshot, *logEvidence) {
	t.Helper()
	kp := &kubePath{sc: sc, inv: inv, clusters: map[string]*kube.Cluster{}}
	ls, err := kp.newLogSource("20260101T000000Z-abcdef", start)
	if err != nil {
		t.Fatal(err)
	}
	w := &sc.Observe[0]
	target := logTarget(from, w)
	ls.owner[targetKey(target)] = w.Name
	for i, text := range lines {
		ls.take(podlogs.Line{Target: target, Time: start.Add(time.Duration(i) * 10 * time.Millisecond), Text: text})
	}
	ls.window.To = start.Add(10 * time.Second)
	snap, le := ls.evidence(start, time.Second, nil, int64(len(lines)), 0)
	return ls, snap, le
}

func readLines(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func clusterCounts(s tally.Snapshot) map[string]int64 {
	out := map[string]int64{}
	c := s.Dimensions["cluster"]
	for i, b := range c.Buckets {
		out[b] = c.N[i]
	}
	return out
}

// On a multi-network Istio mesh the caller's outbound sidecar names the
// remote network's east-west gateway (gatewayIP:15443) for a request
// served there: it counts for the cluster behind the gateway, never for
// the caller's. The second line names a pod of the caller's own network,
// whose IP a pod of the remote network has too (pod CIDRs may overlap
// across networks): it is the local pod's.
func TestOutboundLogThroughEastWestGateway(t *testing.T) {
	t.Parallel()
	lines := readLines(t, "testdata/istio-multinetwork.log")
	sleep := kube.Pod{Cluster: "c1", Namespace: "sample", Name: "sleep-754684654f-n6bzf", Workload: "sleep", IP: "10.10.0.89",
		IPs: []string{"10.10.0.89"}, Network: "network1", DefaultContainer: "sleep"}
	pods := []kube.Pod{sleep,
		{Cluster: "c1", Namespace: "sample", Name: "helloworld-v1-86f77cd7bd-cpxhv", Workload: "helloworld", IP: "10.10.0.90", Network: "network1", Version: "v1"},
		{Cluster: "c2", Namespace: "sample", Name: "helloworld-v2-758dd55874-6x4t8", Workload: "helloworld", IP: "10.10.0.90", Network: "network2", Version: "v2"},
	}
	gws := []kube.Gateway{
		{Cluster: "c1", Namespace: "istio-system", Name: "istio-eastwestgateway", Network: "network1", Addresses: []string{"192.168.1.246"}, Ports: []int32{15443}},
		{Cluster: "c2", Namespace: "istio-system", Name: "istio-eastwestgateway", Network: "network2", Addresses: []string{"192.23.120.32"}, Ports: []int32{15443}},
	}
	sc := logScenario(t, "sleep", "app=sleep", "      preset: istio-proxy-outbound\n      background: 0s")
	for _, c := range []struct {
		name     string
		gateways []kube.Gateway
		want     map[string]int64
		leftOut  int64
		warning  string
	}{
		{"gateways known", gws, map[string]int64{"c1": 1, "c2": 1}, 0, "1 log lines name a network gateway"},
		// Without the gateways (RBAC denied listing them) the line is left
		// out and said so, not given to c1.
		{"gateways unknown", nil, map[string]int64{"c1": 1}, 1, "1 log lines were left out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inv := kube.NewInventory([]string{"c1", "c2"}, pods, c.gateways)
			ls, snap, _ := replay(t, sc, inv, sleep, time.Now(), lines)
			if got := clusterCounts(snap); !mapsEqual(got, c.want) {
				t.Fatalf("counts by cluster %v, want %v", got, c.want)
			}
			if ls.leftOut["sleep"] != c.leftOut {
				t.Fatalf("left out %d, want %d", ls.leftOut["sleep"], c.leftOut)
			}
			_, _, warnings := ls.ruleReports(2)
			if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, c.warning) }) {
				t.Fatalf("warnings %q, want one with %q", warnings, c.warning)
			}
		})
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Retries logged per attempt: the callee's inbound sidecar lines carry the
// caller sidecar's x-request-id on every attempt (Envoy retries the
// request unchanged), so the split counts each request once, for the pod
// that answered, and the reconciliation reports the retries. Lines with
// no id at all (nginx's format) count per attempt, and the report says so.
func TestRetriedRequestsCountOnce(t *testing.T) {
	t.Parallel()
	// The istio.io access-log task's inbound line (docs/real-apps.md),
	// with the status, the pod address and the id varied.
	inbound := func(status, id, ip string) string {
		return fmt.Sprintf(`[2020-11-25T21:26:18.409Z] "GET /status/418 HTTP/1.1" %s - via_upstream - "-" 0 135 3 1 "-" "curl/7.73.0-DEV" "%s" "httpbin:8000" "127.0.0.1:80" inbound|8000|| 127.0.0.1:41854 %s:80 10.44.1.23:37652 outbound_.8000_._.httpbin.foo.svc.cluster.local default`, status, id, ip)
	}
	a := kube.Pod{Cluster: "c1", Namespace: "sample", Name: "httpbin-a", Workload: "httpbin", IP: "10.44.1.27", DefaultContainer: "httpbin"}
	b := kube.Pod{Cluster: "c2", Namespace: "sample", Name: "httpbin-b", Workload: "httpbin", IP: "10.45.1.27", DefaultContainer: "httpbin"}
	inv := kube.NewInventory([]string{"c1", "c2"}, []kube.Pod{a, b}, nil)
	sc := logScenario(t, "httpbin", "app=httpbin", "      preset: istio-proxy\n      background: 0s")
	sc.Attack.SuccessCodes = scenarios.StatusCodes{{Lo: 200, Hi: 499}}
	kp := &kubePath{sc: sc, inv: inv, clusters: map[string]*kube.Cluster{}}
	start := time.Now()
	ls, err := kp.newLogSource("20260101T000000Z-abcdef", start)
	if err != nil {
		t.Fatal(err)
	}
	at := func(p kube.Pod, i int, status, id string) {
		tg := logTarget(p, &sc.Observe[0])
		ls.owner[targetKey(tg)] = "httpbin"
		ls.take(podlogs.Line{Target: tg, Time: start.Add(time.Duration(i) * 50 * time.Millisecond), Text: inbound(status, id, p.IP)})
	}
	// 10 requests: 0-5 answered in c1 at once; 6-9 failed first in c1
	// (503) and were retried to c2, which answered.
	for i := range 10 {
		id := fmt.Sprintf("84961386-6d84-929d-98bd-c5aee93b5c%02d", i)
		if i < 6 {
			at(a, i, "418", id)
			continue
		}
		at(a, i, "503", id)
		at(b, i+1, "418", id)
	}
	ls.window.To = start.Add(10 * time.Second)
	snap, le := ls.evidence(start, time.Second, nil, 10, 0)
	if got := clusterCounts(snap); !mapsEqual(got, map[string]int64{"c1": 6, "c2": 4}) {
		t.Fatalf("counts by cluster %v, want c1 6, c2 4", got)
	}
	if f := snap.Failures["cluster"]; f["c1"] != 0 {
		t.Fatalf("a failed attempt that was retried counted as c1's failure: %v", f)
	}
	r := le.recon
	if r.Status != reports.ReconcileOK || r.Counted != 10 || r.Retried != 4 || r.Attempts != 4 || r.CountsAttempts {
		t.Fatalf("reconciliation %+v", r)
	}
	var out strings.Builder
	if err := reports.Terminal(&out, &reports.Report{Reconciliation: []reports.Reconciliation{*r}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "4 requests retried (4 further attempt lines, each request counted once)") {
		t.Fatalf("terminal report:\n%s", out.String())
	}

	// The same lines without an id: every attempt counts, and says so.
	ls2, err := kp.newLogSource("20260101T000000Z-abcdef", start)
	if err != nil {
		t.Fatal(err)
	}
	tg := logTarget(a, &sc.Observe[0])
	ls2.owner[targetKey(tg)] = "httpbin"
	for i := range 3 {
		ls2.take(podlogs.Line{Target: tg, Time: start.Add(time.Duration(i) * 50 * time.Millisecond), Text: inbound("418", "-", a.IP)})
	}
	ls2.window.To = start.Add(10 * time.Second)
	_, le2 := ls2.evidence(start, time.Second, nil, 3, 0)
	if !le2.recon.CountsAttempts {
		t.Fatalf("id-less lines: %+v", le2.recon)
	}
}

// A mesh that logs one side of the traffic only (Kuma's legacy TrafficLog
// and a MeshAccessLog with only to: log outbound; Istio's Telemetry
// match.mode one side) leaves a sidecar preset of the other side with an
// empty count: that is a configuration error naming what to change, not
// an INCONCLUSIVE run. The lines are podlogs/testdata's (Kuma's default
// format, istio.io's access-log task).
func TestLogDirectionOfTheMesh(t *testing.T) {
	t.Parallel()
	kuma := readLines(t, "../podlogs/testdata/kuma-sidecar.log")
	istio := readLines(t, "../podlogs/testdata/istio-proxy.log")
	for _, c := range []struct {
		preset string
		line   string
		want   []string // in the message
	}{
		{"kuma-sidecar", kuma[1], []string{"counts inbound access-log lines", "5 outbound ones", "MeshAccessLog", "spec.from", "TrafficLog", "kuma-sidecar-outbound"}},
		{"kuma-sidecar-outbound", kuma[0], []string{"counts outbound", "5 inbound ones", "add a spec.to entry"}},
		{"istio-proxy", istio[1], []string{"counts inbound", "Telemetry", "match.mode CLIENT", "istio-proxy-outbound"}},
		{"istio-proxy-outbound", istio[0], []string{"counts outbound", "match.mode SERVER"}},
	} {
		t.Run(c.preset, func(t *testing.T) {
			t.Parallel()
			pod := kube.Pod{Cluster: "c1", Namespace: "sample", Name: "app-0", Workload: "app", IP: "10.244.1.7", DefaultContainer: "app"}
			inv := kube.NewInventory([]string{"c1", "c2"}, []kube.Pod{pod}, nil)
			sc := logScenario(t, "app", "app=x", "      preset: "+c.preset+"\n      background: 0s")
			lines := make([]string, 5)
			for i := range lines {
				lines[i] = c.line
			}
			ls, _, _ := replay(t, sc, inv, pod, time.Now(), lines)
			_, errs, _ := ls.ruleReports(5)
			if len(errs) != 1 || errs[0].Subject != "observe app: logs.preset "+c.preset {
				t.Fatalf("configuration errors %+v", errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs[0].Message, w) {
					t.Errorf("message %q lacks %q", errs[0].Message, w)
				}
			}
		})
	}
	// Lines of the preset's own side: no such error.
	pod := kube.Pod{Cluster: "c1", Namespace: "sample", Name: "app-0", Workload: "app", IP: "10.244.1.7", DefaultContainer: "app"}
	sc := logScenario(t, "app", "app=x", "      preset: kuma-sidecar\n      background: 0s")
	ls, _, _ := replay(t, sc, kube.NewInventory([]string{"c1", "c2"}, []kube.Pod{pod}, nil), pod, time.Now(), []string{kuma[0], kuma[1], kuma[1], kuma[1]})
	if _, errs, w := ls.ruleReports(20); len(errs) != 0 || slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "MeshAccessLog") }) {
		t.Fatalf("both sides logged: %+v %q", errs, w)
	}
	// No access line at all (a server whose mesh logs outbound only): a
	// warning saying why the count may be empty.
	ls, _, _ = replay(t, sc, kube.NewInventory([]string{"c1", "c2"}, []kube.Pod{pod}, nil), pod, time.Now(), []string{istio[5]})
	if _, _, w := ls.ruleReports(20); len(w) != 1 || !strings.Contains(w[0], "MeshAccessLog with only spec.to log outbound") {
		t.Fatalf("silent sidecars: %q", w)
	}
}

// Istio 1.28 and later mirror without the "-shadow" authority: a copy is
// then told by the mirror target's pods when the scenario declares the
// mirror, and by its request id answered twice when it does not. The
// lines are podlogs/testdata/istio-proxy.log's primary and copy, the
// copy's authority without the suffix as 1.28 sends it.
func TestMirrorCopiesWithoutShadowSuffix(t *testing.T) {
	t.Parallel()
	istio := readLines(t, "../podlogs/testdata/istio-proxy.log")
	primary, copied := istio[2], strings.Replace(istio[3], "callme-service-shadow:8080", "callme-service:8080", 1)
	v1 := kube.Pod{Cluster: "c1", Namespace: "sample", Name: "callme-v1-0", IP: "10.244.0.15", Version: "v1", DefaultContainer: "callme"}
	v2 := kube.Pod{Cluster: "c2", Namespace: "sample", Name: "callme-v2-0", IP: "10.245.0.9", Version: "v2", DefaultContainer: "callme"}

	// Undeclared: one workload has both pods.
	v1.Workload, v2.Workload = "callme", "callme"
	inv := kube.NewInventory([]string{"c1", "c2"}, []kube.Pod{v1, v2}, nil)
	sc := logScenario(t, "callme", "app=callme", "      preset: istio-proxy\n      background: 0s")
	kp := &kubePath{sc: sc, inv: inv, clusters: map[string]*kube.Cluster{}}
	start := time.Now()
	ls, err := kp.newLogSource("20260101T000000Z-abcdef", start)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range []struct {
		pod  kube.Pod
		text string
	}{{v1, primary}, {v2, copied}} {
		tg := logTarget(l.pod, &sc.Observe[0])
		ls.owner[targetKey(tg)] = "callme"
		ls.take(podlogs.Line{Target: tg, Time: start.Add(time.Duration(i) * time.Millisecond), Text: l.text})
	}
	ls.window.To = start.Add(10 * time.Second)
	snap, _ := ls.evidence(start, time.Second, nil, 1, 0)
	if got := clusterCounts(snap); !mapsEqual(got, map[string]int64{"c1": 1}) {
		t.Fatalf("counts by cluster %v, want the request once, for c1", got)
	}
	if _, _, w := ls.ruleReports(1); !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "1 requests were answered by two pods") }) {
		t.Fatalf("warnings %q", w)
	}

	// Declared: the target's lines are copies, -shadow or not, and join
	// the primaries by the data plane's id.
	sc2, err := scenarios.Parse("mirror.yaml", []byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: mirror}
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
target: {url: "http://127.0.0.1:1/caller/ping"}
attack: {rate: 10/s, duration: 1s}
attribution: {preset: tutorial}
observe:
  - {name: callme-v1, namespace: sample, selector: "version=v1", clusters: [c1], logs: {preset: istio-proxy, background: 0s}}
  - {name: callme-v2, namespace: sample, selector: "version=v2", clusters: [c2], logs: {preset: istio-proxy, background: 0s}}
expect:
  - mirror: {to: callme-v2, percent: 100%, margin: 5%}
`))
	if err != nil {
		t.Fatal(err)
	}
	v1.Workload, v2.Workload = "callme-v1", "callme-v2"
	type logged struct {
		pod  kube.Pod
		w    int
		text string
	}
	// Either line may be read first: the two pods' streams are apart.
	for _, order := range [][]logged{{{v1, 0, primary}, {v2, 1, copied}}, {{v2, 1, copied}, {v1, 0, primary}}} {
		kp = &kubePath{sc: sc2, inv: kube.NewInventory([]string{"c1", "c2"}, []kube.Pod{v1, v2}, nil), clusters: map[string]*kube.Cluster{}}
		if ls, err = kp.newLogSource("20260101T000000Z-abcdef", start); err != nil {
			t.Fatal(err)
		}
		for i, l := range order {
			tg := logTarget(l.pod, &sc2.Observe[l.w])
			ls.owner[targetKey(tg)] = sc2.Observe[l.w].Name
			ls.take(podlogs.Line{Target: tg, Time: start.Add(time.Duration(i) * time.Millisecond), Text: l.text})
		}
		ls.window.To = start.Add(10 * time.Second)
		snap, le := ls.evidence(start, time.Second, nil, 1, 0)
		if got := clusterCounts(snap); !mapsEqual(got, map[string]int64{"c1": 1}) {
			t.Fatalf("declared mirror, %s first: counts by cluster %v, want c1 1", order[0].pod.Name, got)
		}
		if le.totals.DataPlaneBoth != 1 || le.totals.UnmarkedCopies != 1 || le.recon.Copies != 1 {
			t.Fatalf("declared mirror, %s first: join %+v, copies %v", order[0].pod.Name, le.totals, le.recon.Copies)
		}
	}
}

// An ingress gateway that makes up a new x-request-id (Istio 1.25 and
// later for every request from outside the mesh) leaves the backends'
// lines without one of the run's ids: they are counted in the window,
// and the report says why the join by id did not happen. Lines with the
// run's ids say nothing of the kind.
func TestEdgeRegeneratedRequestIDs(t *testing.T) {
	t.Parallel()
	istio := readLines(t, "../podlogs/testdata/istio-proxy.log")
	pod := kube.Pod{Cluster: "c1", Namespace: "sample", Name: "callme-0", Workload: "callme", IP: "10.244.0.15", DefaultContainer: "callme"}
	sc := logScenario(t, "callme", "app=callme", "      preset: istio-proxy\n      background: 0s")
	const run = "20260101T000000Z-abcdef"
	for _, c := range []struct {
		name string
		id   func(i int) string
		want bool
	}{
		{"gateway's ids", func(i int) string { return fmt.Sprintf("84961386-6d84-929d-98bd-c5aee93b5c%02d", i) }, true},
		{"the run's ids", func(i int) string { return fmt.Sprintf("%s-%d", run, i) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var lines []string
			for i := range 5 {
				lines = append(lines, strings.Replace(istio[2], "0f5c3e2a-7b1d-4c9e-8a6f-1d2e3f4a5b6c", c.id(i), 1))
			}
			ls, snap, _ := replay(t, sc, kube.NewInventory([]string{"c1", "c2"}, []kube.Pod{pod}, nil), pod, time.Now(), lines)
			if got := clusterCounts(snap); got["c1"] != 5 {
				t.Fatalf("counts %v, want 5 for c1 either way", got)
			}
			_, _, w := ls.ruleReports(5)
			has := slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "carry none of this run's") })
			if has != c.want {
				t.Fatalf("warnings %q, want the regenerated-id one: %v", w, c.want)
			}
		})
	}
}
