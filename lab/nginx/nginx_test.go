package nginx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/meshsim"
)

// backend is a real HTTP server playing one pod; it counts what it
// served and remembers the Host and request id of every request.
type backend struct {
	meshsim.Backend
	mu    sync.Mutex
	hosts map[string]int
	ids   map[string]bool
}

func (b *backend) served() (n int, hosts map[string]int, ids map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	hosts = map[string]int{}
	for h, c := range b.hosts {
		hosts[h] = c
		n += c
	}
	ids = map[string]bool{}
	for id := range b.ids {
		ids[id] = true
	}
	return n, hosts, ids
}

func startBackend(t *testing.T, cluster, pod, version string) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{Backend: meshsim.Backend{Cluster: cluster, Pod: pod, Version: version, Addr: ln.Addr().String(), Ready: true},
		hosts: map[string]int{}, ids: map[string]bool{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.hosts[r.Host]++
		b.ids[r.Header.Get("X-Request-Id")] = true
		b.mu.Unlock()
		fmt.Fprintf(w, "I'm callme-service %s (%s/%s)\n", version, cluster, pod)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return b
}

func nginxBin(t *testing.T) string {
	t.Helper()
	bin, err := Find()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err) // .ci/run installs nginx-light
		}
		t.Skip(err)
	}
	return bin
}

func startPlane(t *testing.T, p meshsim.Policy, bs ...*backend) *Plane {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pl, err := Start(ctx, nginxBin(t), t.TempDir(), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Stop(5 * time.Second) })
	if err := pl.SetBackends(ctx, backends(bs...)); err != nil {
		t.Fatal(err)
	}
	return pl
}

func backends(bs ...*backend) []meshsim.Backend {
	out := make([]meshsim.Backend, len(bs))
	for i, b := range bs {
		out[i] = b.Backend
	}
	return out
}

// send makes n sequential requests with ids prefix-0..n-1 and returns the
// answers by status code.
func send(t *testing.T, pl *Plane, prefix string, n int) map[int]int {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	codes := map[int]int{}
	for i := range n {
		req, _ := http.NewRequest(http.MethodGet, "http://"+pl.Addr()+"/callme/ping", nil)
		req.Host = "callme-service:8080"
		req.Header.Set("X-Request-Id", fmt.Sprintf("%s-%d", prefix, i))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	return codes
}

func count(b *backend) int { n, _, _ := b.served(); return n }

// Equal per cluster over pods 1 (c2) and 2 (c3) is a weighted upstream
// 2:1:1; nginx's smooth weighted round robin is deterministic, so the
// counts are exact.
func TestPerClusterIsAWeightedUpstream(t *testing.T) {
	c2 := startBackend(t, "c2", "callme-a", "v1")
	c3a := startBackend(t, "c3", "callme-b", "v1")
	c3b := startBackend(t, "c3", "callme-c", "v1")
	pl := startPlane(t, meshsim.Policy{Mode: meshsim.ModePerCluster}, c2, c3a, c3b)
	if codes := send(t, pl, "pc", 400); codes[200] != 400 {
		t.Fatalf("answers %v", codes)
	}
	if got := [3]int{count(c2), count(c3a), count(c3b)}; got != [3]int{200, 100, 100} {
		t.Fatalf("served c2, c3, c3 = %v, want [200 100 100]", got)
	}
	conf, _ := os.ReadFile(pl.confPath())
	if !strings.Contains(string(conf), c2.Addr+" weight=2 max_fails=0;") || !strings.Contains(string(conf), c3a.Addr+" weight=1 max_fails=0;") {
		t.Fatalf("config does not weight the upstream 2:1:1:\n%s", conf)
	}
}

// Weighted by cluster is split_clients on nginx's random request id: a
// binomial share, checked at 5 standard deviations.
func TestWeightedIsSplitClients(t *testing.T) {
	c1 := startBackend(t, "c1", "primary", "v1")
	c2 := startBackend(t, "c2", "canary", "v2")
	pl := startPlane(t, meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByCluster, Weights: map[string]float64{"c1": 90, "c2": 10}}, c1, c2)
	const n = 2000
	if codes := send(t, pl, "w", n); codes[200] != n {
		t.Fatalf("answers %v", codes)
	}
	share := float64(count(c1)) / n
	if sd := 0.0067; share < 0.9-5*sd || share > 0.9+5*sd {
		t.Fatalf("c1 share %.3f, want 0.9 ± %.3f", share, 5*sd)
	}
	// nginx's own record agrees with what the pods served (it writes a
	// line once the answer is sent, so the last one may lag).
	byUpstream := accessLogUpstreams(t, pl)
	for deadline := time.Now().Add(5 * time.Second); byUpstream[c1.Addr]+byUpstream[c2.Addr] < n && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		byUpstream = accessLogUpstreams(t, pl)
	}
	if byUpstream[c1.Addr] != count(c1) || byUpstream[c2.Addr] != count(c2) {
		t.Errorf("access log upstreams %v; the pods served c1=%d c2=%d", byUpstream, count(c1), count(c2))
	}
}

// SetPolicy is a control plane's push: a weight moved in the mesh's
// objects reaches the running nginx (render, reload), with the backends it
// has; a route nginx cannot play is refused and the last one kept.
func TestSetPolicyReconfigures(t *testing.T) {
	c1 := startBackend(t, "c1", "primary", "v1")
	c2 := startBackend(t, "c2", "canary", "v2")
	weights := func(w1, w2 float64) meshsim.Policy {
		return meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByCluster, Weights: map[string]float64{"c1": w1, "c2": w2}}
	}
	pl := startPlane(t, weights(100, 0), c1, c2)
	if codes := send(t, pl, "before", 50); codes[200] != 50 || count(c1) != 50 || count(c2) != 0 {
		t.Fatalf("before the push: answers %v, served c1=%d c2=%d; want all 50 by c1", codes, count(c1), count(c2))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pl.SetPolicy(ctx, weights(0, 100)); err != nil {
		t.Fatal(err)
	}
	if codes := send(t, pl, "after", 50); codes[200] != 50 || count(c1) != 50 || count(c2) != 50 {
		t.Fatalf("after the push: answers %v, served c1=%d c2=%d; want the 50 new ones by c2", codes, count(c1), count(c2))
	}
	if err := pl.SetPolicy(ctx, meshsim.Policy{Mode: meshsim.ModeBalanced}); err == nil || !strings.Contains(err.Error(), "mode balanced") {
		t.Fatalf("SetPolicy(balanced) = %v; want it refused", err)
	}
	if codes := send(t, pl, "kept", 20); codes[200] != 20 || count(c2) != 70 {
		t.Fatalf("after a refused policy: answers %v, served c2=%d; want the last route (all to c2) kept", codes, count(c2))
	}
}

// Set is a route change that also changes the backends (a cluster newly
// reached): the policy and the backends in one configuration, one reload.
func TestSetIsOneReload(t *testing.T) {
	c1 := startBackend(t, "c1", "primary", "v1")
	c2 := startBackend(t, "c2", "canary", "v2")
	weights := func(w1, w2 float64) meshsim.Policy {
		return meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByCluster, Weights: map[string]float64{"c1": w1, "c2": w2}}
	}
	pl := startPlane(t, weights(100, 0), c1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pl.mu.Lock()
	gen := pl.gen
	pl.mu.Unlock()
	if err := pl.Set(ctx, weights(0, 100), backends(c1, c2)); err != nil {
		t.Fatal(err)
	}
	pl.mu.Lock()
	reloads := pl.gen - gen
	pl.mu.Unlock()
	if reloads != 1 {
		t.Errorf("Set reloaded nginx %d times, want once", reloads)
	}
	if codes := send(t, pl, "after", 30); codes[200] != 30 || count(c2) != 30 {
		t.Fatalf("after Set: answers %v, served c2=%d; want all 30 by the newly reached c2", codes, count(c2))
	}
	if err := pl.Set(ctx, meshsim.Policy{Mode: meshsim.ModeBalanced}, backends(c1)); err == nil || !strings.Contains(err.Error(), "mode balanced") {
		t.Fatalf("Set(balanced) = %v; want it refused", err)
	}
	if codes := send(t, pl, "kept", 10); codes[200] != 10 || count(c2) != 40 {
		t.Fatalf("after a refused Set: answers %v, served c2=%d; want the last policy and backends kept", codes, count(c2))
	}
}

// accessLogUpstreams counts the lines of nginx's access log per upstream
// address ("$time_iso8601 $lab_request_id $upstream_addr $status").
func accessLogUpstreams(t *testing.T, pl *Plane) map[string]int {
	t.Helper()
	b, err := os.ReadFile(pl.AccessLog())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); len(f) == 4 {
			out[f[2]]++
		}
	}
	return out
}

// Mirror 50% to v2: every primary goes to v1; about half are copied to
// v2 with Envoy's shadow host and the primary's request id.
func TestMirrorCopiesWithTheShadowHost(t *testing.T) {
	v1 := startBackend(t, "c1", "callme-v1", "v1")
	v2 := startBackend(t, "c2", "callme-v2", "v2")
	pl := startPlane(t, meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByVersion, Weights: map[string]float64{"v1": 100},
		Mirror: &meshsim.Mirror{Version: "v2", Percent: 50}}, v1, v2)
	const n = 2000
	if codes := send(t, pl, "m", n); codes[200] != n {
		t.Fatalf("answers %v", codes)
	}
	// Copies finish after their primary's answer.
	var mirrored int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		prev := mirrored
		mirrored = count(v2)
		if (mirrored == prev && mirrored > 0) || time.Now().After(deadline) {
			break
		}
	}
	served, _, primaries := v1.served()
	if served != n {
		t.Fatalf("v1 served %d primaries, want all %d", served, n)
	}
	_, hosts, copies := v2.served()
	if hosts["callme-service-shadow:8080"] != mirrored || len(hosts) != 1 {
		t.Fatalf("mirror hosts %v, want only callme-service-shadow:8080", hosts)
	}
	for id := range copies {
		if !primaries[id] {
			t.Fatalf("copy with request id %q that no primary carried", id)
		}
	}
	if share, sd := float64(mirrored)/n, 0.0112; share < 0.5-5*sd || share > 0.5+5*sd {
		t.Fatalf("mirrored %d of %d (%.3f), want 0.5 ± %.3f", mirrored, n, share, 5*sd)
	}
}

// A reload follows the backends: an unready pod gets nothing, failover
// takes the next cluster, no ready pod at all is Envoy's 503.
func TestReloadFollowsTheBackends(t *testing.T) {
	a := startBackend(t, "c1", "a", "v1")
	b := startBackend(t, "c2", "b", "v1")
	pl := startPlane(t, meshsim.Policy{Mode: meshsim.ModeFailover, Order: []string{"c1", "c2"}}, a, b)
	ctx := context.Background()
	send(t, pl, "f1", 10)
	if count(a) != 10 || count(b) != 0 {
		t.Fatalf("failover with c1 ready: served %d/%d, want 10/0", count(a), count(b))
	}
	down := a.Backend
	down.Ready = false
	if err := pl.SetBackends(ctx, []meshsim.Backend{down, b.Backend}); err != nil {
		t.Fatal(err)
	}
	send(t, pl, "f2", 10)
	if count(a) != 10 || count(b) != 10 {
		t.Fatalf("failover with c1 unready: served %d/%d, want 10/10", count(a), count(b))
	}
	if err := pl.SetBackends(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if codes := send(t, pl, "f3", 5); codes[503] != 5 {
		t.Fatalf("no backends: answers %v, want 503s", codes)
	}
}

func TestStopLeavesNoProcess(t *testing.T) {
	ctx := context.Background()
	pl, err := Start(ctx, nginxBin(t), t.TempDir(), meshsim.Policy{Mode: meshsim.ModePerPod})
	if err != nil {
		t.Fatal(err)
	}
	pid := pl.PID()
	pl.Stop(5 * time.Second)
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process group %d after Stop: %v, want no process left", pid, err)
	}
}

func TestSupports(t *testing.T) {
	for _, tc := range []struct {
		p    meshsim.Policy
		want string
	}{
		{meshsim.Policy{Mode: meshsim.ModeBalanced}, "mode balanced needs open connections + link cost"},
		{meshsim.Policy{Mode: meshsim.ModePerPod, PerConnection: true}, "perConnection: nginx picks an upstream per request"},
		{meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: "pod", Weights: map[string]float64{"a": 1}}, `WeightBy is "pod"`},
		{meshsim.Policy{Mode: meshsim.ModeFailover}, "Order"},
		{meshsim.Policy{Mode: meshsim.ModePerCluster}, ""},
	} {
		err := Supports(tc.p)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Supports(%+v) = %v, want %q", tc.p, err, tc.want)
		}
	}
}

// split_clients takes shares to 0.01% that must add up to at most 100%:
// cumulative rounding, the last group "*", an empty group answered 503.
func TestRenderSplitShares(t *testing.T) {
	bs := []meshsim.Backend{
		{Cluster: "c1", Pod: "a", Addr: "127.0.0.1:1001", Ready: true},
		{Cluster: "c2", Pod: "b", Addr: "127.0.0.1:1002", Ready: true},
		{Cluster: "c3", Pod: "c", Addr: "127.0.0.1:1003", Ready: false},
	}
	conf, err := Render(meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByCluster, Weights: map[string]float64{"c1": 1, "c2": 1, "c3": 1}},
		bs, Conf{Dir: "/tmp/x", Listen: "127.0.0.1:9", Generation: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := "  split_clients \"${request_id}g\" $lab_group {\n    33.33% g0;\n    33.34% g1;\n    * none;\n  }\n"
	if !strings.Contains(conf, want) {
		t.Fatalf("split over three equal groups:\n%s\nwant it to contain:\n%s", conf, want)
	}
	if !strings.Contains(conf, `if ($lab_group = none) { return 503 "no healthy upstream"; }`) {
		t.Fatalf("a group without ready pods must answer 503:\n%s", conf)
	}
}

// A pod that fails a request fails that request: nginx must neither retry
// it on another upstream nor take the pod out of rotation, or the split it
// makes is not the one the policy says (the simulator answers the failure).
func TestNoRetryNoPassiveHealthCheck(t *testing.T) {
	up := startBackend(t, "c1", "up", "v1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := meshsim.Backend{Cluster: "c2", Pod: "dead", Version: "v1", Addr: ln.Addr().String(), Ready: true}
	ln.Close() // nobody listens there any more: connections are refused
	pl := startPlane(t, meshsim.Policy{Mode: meshsim.ModePerPod}, up)
	if err := pl.SetBackends(context.Background(), []meshsim.Backend{up.Backend, dead}); err != nil {
		t.Fatal(err)
	}
	codes := send(t, pl, "dead", 20)
	if codes[502] != 10 || codes[200] != 10 || count(up) != 10 {
		t.Fatalf("round robin over a live and a refusing pod: answers %v, live pod served %d; want 10 × 200 and 10 × 502", codes, count(up))
	}
}

// Every mode and edge renders a configuration nginx accepts (`nginx -t`),
// in a directory whose name needs quoting.
func TestRenderedConfigsPassNginxT(t *testing.T) {
	bin := nginxBin(t)
	dir := filepath.Join(t.TempDir(), `a dir "quoted"`)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bs := []meshsim.Backend{
		{Cluster: "c1", Pod: "a", Version: "v1", Addr: "127.0.0.1:1001", Ready: true},
		{Cluster: "c2", Pod: "b", Version: "v2", Addr: "127.0.0.1:1002", Ready: true},
		{Cluster: "c2", Pod: "c", Version: "v2", Addr: "127.0.0.1:1003", Ready: false},
	}
	w := func(m map[string]float64) map[string]float64 { return m }
	for name, tc := range map[string]struct {
		p   meshsim.Policy
		bs  []meshsim.Backend
		has string
	}{
		"per-pod":                    {meshsim.Policy{Mode: meshsim.ModePerPod}, bs, "upstream pods"},
		"per-cluster":                {meshsim.Policy{Mode: meshsim.ModePerCluster}, bs, "weight=1 max_fails=0"},
		"failover, none ready":       {meshsim.Policy{Mode: meshsim.ModeFailover, Order: []string{"c3"}}, bs, "return 503"},
		"weighted, a zero weight":    {meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByVersion, Weights: w(map[string]float64{"v1": 1, "v2": 0})}, bs, "* g0;"},
		"weighted, tiny share":       {meshsim.Policy{Mode: meshsim.ModeWeighted, WeightBy: meshsim.ByCluster, Weights: w(map[string]float64{"c1": 99999, "c2": 1})}, bs, "* g1;"},
		"mirror 100%":                {meshsim.Policy{Mode: meshsim.ModePerPod, Mirror: &meshsim.Mirror{Version: "v2", Percent: 100}}, bs, "100.00% copy;"},
		"mirror rounding to nothing": {meshsim.Policy{Mode: meshsim.ModePerPod, Mirror: &meshsim.Mirror{Version: "v2", Percent: 0.004}}, bs, "upstream pods"},
		"mirror set without pods":    {meshsim.Policy{Mode: meshsim.ModePerPod, Mirror: &meshsim.Mirror{Cluster: "c9", Percent: 50}}, bs, "return 204"},
		"no backends":                {meshsim.Policy{Mode: meshsim.ModePerCluster}, nil, "return 503"},
	} {
		t.Run(name, func(t *testing.T) {
			conf, err := Render(tc.p, tc.bs, Conf{Dir: dir, Listen: "127.0.0.1:1", Generation: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(conf, tc.has) {
				t.Errorf("config lacks %q:\n%s", tc.has, conf)
			}
			if strings.Contains(name, "nothing") && strings.Contains(conf, "mirror ") {
				t.Errorf("a share that rounds to 0.00%% must not mirror:\n%s", conf)
			}
			f := filepath.Join(dir, "nginx.conf")
			if err := os.WriteFile(f, []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "-t", "-q", "-p", dir, "-c", f).CombinedOutput(); err != nil {
				t.Fatalf("nginx -t: %v: %s\n%s", err, out, conf)
			}
		})
	}
}
