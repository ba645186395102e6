package meshsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/internal/testutil"
)

// pod is a real backend HTTP server on loopback that says who it is and
// remembers the Host and X-Request-Id of every request.
type pod struct {
	Backend
	srv   *http.Server
	hits  atomic.Int64
	mu    sync.Mutex
	hosts map[string]int
	rids  []string
	block chan struct{} // when non-nil, requests wait for it to close
	code  int
}

func startPod(t *testing.T, cluster, name, version string) *pod {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pod{Backend: Backend{Cluster: cluster, Pod: name, Version: version, Addr: ln.Addr().String(), Ready: true},
		hosts: map[string]int{}, code: http.StatusOK}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = p.srv.Serve(ln) }()
	t.Cleanup(func() {
		p.mu.Lock()
		if p.block != nil {
			select {
			case <-p.block:
			default:
				close(p.block)
			}
		}
		p.mu.Unlock()
		_ = p.srv.Close()
		<-done
	})
	return p
}

func (p *pod) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.hosts[r.Host]++
	p.rids = append(p.rids, r.Header.Get("X-Request-Id"))
	block, code := p.block, p.code
	p.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}
	p.hits.Add(1)
	w.WriteHeader(code)
	fmt.Fprintf(w, "%s %s %s", p.Cluster, p.Pod, p.Version)
}

func (p *pod) hostCounts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.hosts)
}

func (p *pod) requestIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.rids)
}

func backends(pods ...*pod) []Backend {
	var out []Backend
	for _, p := range pods {
		out = append(out, p.Backend)
	}
	return out
}

// startSim serves a Sim on a loopback port until the test ends, and checks
// Serve returns nil then.
func startSim(t *testing.T, p Policy, bs []Backend) (*Sim, string) {
	t.Helper()
	sim, err := New(p)
	if err != nil {
		t.Fatalf("New(%+v): %v", p, err)
	}
	sim.SetBackends(bs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(8 * time.Second):
			t.Errorf("Serve did not return after cancel")
		}
	})
	return sim, ln.Addr().String()
}

func client(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// send makes n GETs and counts the answering pods by their body
// "cluster pod version"; non-200 answers are counted under "<code> body".
func send(t *testing.T, c *http.Client, addr string, n int, hdr func(i int) http.Header) map[string]int {
	t.Helper()
	got := map[string]int{}
	for i := range n {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/callme/ping", nil)
		if hdr != nil {
			for k, v := range hdr(i) {
				req.Header[k] = v
			}
			if h := req.Header.Get("Host"); h != "" {
				req.Host = h
			}
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		key := string(b)
		if resp.StatusCode != http.StatusOK {
			key = fmt.Sprintf("%d %s", resp.StatusCode, b)
		}
		got[key]++
	}
	return got
}

// rawConn is one client connection driven by hand.
type rawConn struct{ *testutil.RawConn }

func dial(t *testing.T, addr string) rawConn {
	t.Helper()
	return rawConn{testutil.Dial(t, addr, 8*time.Second)}
}

// get sends one keep-alive request on the connection and returns the
// status and body.
func (rc rawConn) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, body, err := rc.Do(http.MethodGet, path, "callme-service:8080")
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func clusterOf(body string) string { return strings.Fields(body + " ?")[0] }

// zBound is how many standard deviations a binomial count may stray from
// its mean: a two-sided normal tail of 6.8e-6 (erfc(4.5/√2)), computed by
// hand. The seeds are fixed, so a test cannot flake; the bound says a
// wrong policy (a swapped weight, a missed mirror) fails by a wide margin.
const zBound = 4.5

// binomialOK reports whether k successes of n are consistent with
// probability p, and the interval it allowed.
func binomialOK(k, n int64, p float64) (bool, string) {
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	lo, hi := mean-zBound*sd, mean+zBound*sd
	return float64(k) >= lo && float64(k) <= hi, fmt.Sprintf("%.1f..%.1f (n=%d, p=%.4f)", lo, hi, n, p)
}

// TestSplitIsBinomial sends many requests one at a time and checks, for
// every pod and for the simulator's 503s, that the pod's own count (and
// the simulator's Stats, which must agree) is a binomial draw with the
// share the policy gives it.
func TestSplitIsBinomial(t *testing.T) {
	const n = 2000
	cases := []struct {
		name   string
		policy Policy
		pods   [][3]string // cluster, pod, version
		ready  map[string]bool
		want   map[string]float64 // "cluster pod version" or "503" → share
	}{
		{
			name:   "per-cluster with pods 1/2: a half per cluster, a quarter per pod in the 2-pod cluster",
			policy: Policy{Mode: ModePerCluster, Seed: 1},
			pods:   [][3]string{{"c2", "a", "v1"}, {"c3", "b", "v1"}, {"c3", "c", "v1"}},
			want:   map[string]float64{"c2 a v1": 0.5, "c3 b v1": 0.25, "c3 c v1": 0.25},
		},
		{
			name:   "per-pod (Cilium global service): a third each",
			policy: Policy{Mode: ModePerPod, Seed: 2},
			pods:   [][3]string{{"c2", "a", "v1"}, {"c3", "b", "v1"}, {"c3", "c", "v1"}},
			want:   map[string]float64{"c2 a v1": 1.0 / 3, "c3 b v1": 1.0 / 3, "c3 c v1": 1.0 / 3},
		},
		{
			name:   "per-cluster skips unready pods and clusters",
			policy: Policy{Mode: ModePerCluster, Seed: 3},
			pods:   [][3]string{{"c1", "x", "v1"}, {"c2", "a", "v1"}, {"c3", "b", "v1"}, {"c3", "c", "v1"}},
			ready:  map[string]bool{"x": false, "c": false},
			want:   map[string]float64{"c2 a v1": 0.5, "c3 b v1": 0.5},
		},
		{
			name:   "weighted 90/10 by version across zones",
			policy: Policy{Mode: ModeWeighted, WeightBy: ByVersion, Weights: map[string]float64{"v1": 90, "v2": 10}, Seed: 4},
			pods:   [][3]string{{"zone-1", "a", "v1"}, {"zone-1", "b", "v1"}, {"zone-2", "c", "v2"}},
			want:   map[string]float64{"zone-1 a v1": 0.45, "zone-1 b v1": 0.45, "zone-2 c v2": 0.1},
		},
		{
			name:   "weighted by cluster, a group without ready pods answers 503 like Envoy",
			policy: Policy{Mode: ModeWeighted, WeightBy: ByCluster, Weights: map[string]float64{"c1": 3, "c2": 1}, Seed: 5},
			pods:   [][3]string{{"c1", "a", "v1"}, {"c2", "b", "v1"}},
			ready:  map[string]bool{"b": false},
			want:   map[string]float64{"c1 a v1": 0.75, "503": 0.25},
		},
		{
			name:   "failover: first ready cluster in Order takes everything, pods at random",
			policy: Policy{Mode: ModeFailover, Order: []string{"c2", "c1"}, Seed: 6},
			pods:   [][3]string{{"c1", "a", "v1"}, {"c2", "b", "v1"}, {"c2", "c", "v1"}},
			want:   map[string]float64{"c2 b v1": 0.5, "c2 c v1": 0.5},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testutil.NoLeaks(t)
			var pods []*pod
			for _, p := range tc.pods {
				pd := startPod(t, p[0], p[1], p[2])
				if r, ok := tc.ready[p[1]]; ok {
					pd.Ready = r
				}
				pods = append(pods, pd)
			}
			sim, addr := startSim(t, tc.policy, backends(pods...))
			got := send(t, client(t), addr, n, nil)
			st := sim.Stats()
			// The pods' own counts are the ground truth; Stats must agree.
			for _, p := range pods {
				key := p.Cluster + " " + p.Pod + " " + p.Version
				if st.ByPod[podKey(p.Backend)] != p.hits.Load() || int64(got[key]) != p.hits.Load() {
					t.Errorf("pod %s served %d, Stats.ByPod says %d, the client saw %d", key, p.hits.Load(), st.ByPod[podKey(p.Backend)], got[key])
				}
			}
			if st.Requests != n {
				t.Errorf("Stats.Requests=%d, want %d", st.Requests, n)
			}
			counts := map[string]int64{"503": st.NoUpstream}
			for _, p := range pods {
				counts[p.Cluster+" "+p.Pod+" "+p.Version] = p.hits.Load()
			}
			for key, k := range counts {
				share := tc.want[key]
				if share == 0 {
					if k != 0 {
						t.Errorf("%s got %d requests, want none", key, k)
					}
					continue
				}
				if ok, bound := binomialOK(k, n, share); !ok {
					t.Errorf("%s got %d of %d requests, want %s", key, k, n, bound)
				}
			}
		})
	}
}

// TestBalancedWorkedExamples holds C connections open at once, so every
// connection is routed while the earlier ones are still open, then sends
// requests on each: Skupper's greedy argmin(open + cost) per connection.
func TestBalancedWorkedExamples(t *testing.T) {
	cases := []struct {
		name     string
		local    string
		costs    map[string]float64
		pods     [][2]string // cluster, pod
		conns    int
		wantSeq  string         // cluster of each connection, in dial order
		wantPods map[string]int // connections per cluster/pod
	}{
		{
			// Open+cost per connection: L0 R1 → L; L1 R1 tie → local; L2 R1 → R; …
			name:     "local and one remote at cost 1, 10 connections",
			local:    "c1",
			costs:    map[string]float64{"c2": 1},
			pods:     [][2]string{{"c1", "a"}, {"c2", "b"}},
			conns:    10,
			wantSeq:  "c1 c1 c2 c1 c2 c1 c2 c1 c2 c1",
			wantPods: map[string]int{"c1/a": 6, "c2/b": 4},
		},
		{
			// Router in c1 without app pods; c2 at 4, c3 at 2 with two pods:
			// 4/2 → c3; 4/3 → c3; 4/4 tie → lower cost c3; 4/5 → c2; 5/5 → c3.
			name:     "remotes at cost 4 and 2, two pods at cost 2, 5 connections",
			local:    "c1",
			costs:    map[string]float64{"c2": 4, "c3": 2},
			pods:     [][2]string{{"c2", "a"}, {"c3", "b"}, {"c3", "c"}},
			conns:    5,
			wantSeq:  "c3 c3 c3 c2 c3",
			wantPods: map[string]int{"c2/a": 1, "c3/b": 2, "c3/c": 2},
		},
		{
			name:     "cheaper cluster scaled to zero is excluded",
			local:    "c1",
			costs:    map[string]float64{"c2": 4, "c3": 2},
			pods:     [][2]string{{"c2", "a"}},
			conns:    5,
			wantSeq:  "c2 c2 c2 c2 c2",
			wantPods: map[string]int{"c2/a": 5},
		},
		{
			// Equal costs, no local pods: alternates, ties broken by name.
			name:     "two remotes at cost 1, 5 connections",
			local:    "c1",
			pods:     [][2]string{{"c2", "a"}, {"c3", "b"}},
			conns:    5,
			wantSeq:  "c2 c3 c2 c3 c2",
			wantPods: map[string]int{"c2/a": 3, "c3/b": 2},
		},
	}
	const perConn = 3
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testutil.NoLeaks(t)
			var pods []*pod
			for _, p := range tc.pods {
				pods = append(pods, startPod(t, p[0], p[1], "v1"))
			}
			sim, addr := startSim(t, Policy{Mode: ModeBalanced, Local: tc.local, Costs: tc.costs}, backends(pods...))
			conns := make([]rawConn, tc.conns)
			for i := range conns {
				conns[i] = dial(t, addr)
			}
			var seq []string
			gotPods := map[string]int{}
			for i, rc := range conns {
				var first string
				for j := range perConn {
					code, body := rc.get(t, "/persons/1")
					if code != http.StatusOK {
						t.Fatalf("connection %d request %d: %d %q", i, j, code, body)
					}
					if j == 0 {
						first = body
						seq = append(seq, clusterOf(body))
						f := strings.Fields(body)
						gotPods[f[0]+"/"+f[1]]++
					} else if body != first {
						t.Fatalf("connection %d moved from %q to %q", i, first, body)
					}
				}
			}
			if got := strings.Join(seq, " "); got != tc.wantSeq {
				t.Errorf("connections went to %s, want %s", got, tc.wantSeq)
			}
			if !maps.Equal(gotPods, tc.wantPods) {
				t.Errorf("connections per pod %v, want %v", gotPods, tc.wantPods)
			}
			st := sim.Stats()
			if st.Connections != int64(tc.conns) || st.OpenConnections != int64(tc.conns) {
				t.Errorf("Stats connections=%d open=%d, want %d", st.Connections, st.OpenConnections, tc.conns)
			}
			wantByCluster := map[string]int64{}
			for _, c := range strings.Fields(tc.wantSeq) {
				wantByCluster[c] += perConn
			}
			if !maps.Equal(st.ByCluster, wantByCluster) {
				t.Errorf("Stats.ByCluster %v, want %v (%d requests per connection)", st.ByCluster, wantByCluster, perConn)
			}
			// Closing the connections releases their open counts.
			for _, rc := range conns {
				rc.Close()
			}
			waitFor(t, "open connections released", func() bool {
				st := sim.Stats()
				return st.OpenConnections == 0 && len(st.OpenByCluster) == 0
			})
		})
	}
}

// TestBalancedCountsOnlyOpenConnections: after every connection closed,
// a new one sees zero open everywhere and goes to the local cluster.
func TestBalancedCountsOnlyOpenConnections(t *testing.T) {
	testutil.NoLeaks(t)
	local, remote := startPod(t, "c1", "a", "v1"), startPod(t, "c2", "b", "v1")
	sim, addr := startSim(t, Policy{Mode: ModeBalanced, Local: "c1", Costs: map[string]float64{"c2": 1}}, backends(local, remote))
	for i := range 5 {
		rc := dial(t, addr)
		if _, body := rc.get(t, "/"); clusterOf(body) != "c1" {
			t.Fatalf("sequential connection %d went to %q, want the local c1 (nothing else open)", i, body)
		}
		rc.Close()
		waitFor(t, "connection closed", func() bool { return sim.Stats().OpenConnections == 0 })
	}
}

func TestPerConnectionStickiness(t *testing.T) {
	cases := []struct {
		name          string
		perConnection bool
		wantClusters  int // distinct clusters seen on one connection
	}{
		{"per connection: one connection stays on one cluster", true, 1},
		{"per request: one connection is spread", false, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testutil.NoLeaks(t)
			a, b := startPod(t, "c1", "a", "v1"), startPod(t, "c2", "b", "v1")
			_, addr := startSim(t, Policy{Mode: ModePerCluster, PerConnection: tc.perConnection, Seed: 7}, backends(a, b))
			seen := map[string]int{}
			rc := dial(t, addr)
			for range 20 {
				_, body := rc.get(t, "/")
				seen[clusterOf(body)]++
			}
			if len(seen) != tc.wantClusters {
				t.Fatalf("one connection reached %v, want %d cluster(s)", seen, tc.wantClusters)
			}
			if tc.perConnection {
				// New connections pick at random, each with an even chance
				// of either cluster.
				const conns = 400
				c1 := 0
				for range conns {
					rc := dial(t, addr)
					_, body := rc.get(t, "/")
					if clusterOf(body) == "c1" {
						c1++
					}
					rc.Close()
				}
				if ok, bound := binomialOK(int64(c1), conns, 0.5); !ok {
					t.Errorf("%d of %d new connections went to c1, want %s", c1, conns, bound)
				}
			}
		})
	}
}

func TestFailoverWhenClusterBecomesUnready(t *testing.T) {
	cases := []struct {
		name          string
		perConnection bool
	}{
		{"per request", false},
		{"per connection re-pins a connection whose pods went away", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testutil.NoLeaks(t)
			a1, a2, b := startPod(t, "c1", "a1", "v1"), startPod(t, "c1", "a2", "v1"), startPod(t, "c2", "b", "v1")
			sim, addr := startSim(t, Policy{Mode: ModeFailover, Order: []string{"c1", "c2"}, PerConnection: tc.perConnection},
				backends(a1, a2, b))
			rc := dial(t, addr)
			phase := func(name string, want map[string]int) {
				t.Helper()
				got := map[string]int{}
				for range 10 {
					code, body := rc.get(t, "/")
					if code != http.StatusOK {
						body = fmt.Sprintf("%d %s", code, body)
					}
					got[clusterOf(body)]++
				}
				if !maps.Equal(got, want) {
					t.Fatalf("%s: clusters %v, want %v", name, got, want)
				}
			}
			phase("all ready", map[string]int{"c1": 10})
			down := backends(a1, a2, b)
			down[0].Ready, down[1].Ready = false, false
			sim.SetBackends(down)
			phase("c1 not ready", map[string]int{"c2": 10})
			if st := sim.Stats(); st.OpenByCluster["c1"] != 0 {
				t.Errorf("OpenByCluster after failover = %v, want nothing pinned to c1", st.OpenByCluster)
			}
			sim.SetBackends(nil)
			phase("nothing ready", map[string]int{"503": 10})
			if st := sim.Stats(); st.NoUpstream != 10 {
				t.Errorf("Stats.NoUpstream=%d, want 10", st.NoUpstream)
			}
			sim.SetBackends(backends(a1, a2, b))
			phase("c1 back", map[string]int{"c1": 10})
		})
	}
}

// TestMirror is the Istio tutorial: v1 in c1 takes all the traffic, each
// request is copied with probability 50% to v2 in c2 with a "-shadow"
// Host, and the copy's failure never reaches the client. The mirror pod's
// own count of shadow requests is the ground truth: Stats must equal it,
// and it must be a binomial draw of the requests sent.
func TestMirror(t *testing.T) {
	testutil.NoLeaks(t)
	v1, v2 := startPod(t, "c1", "callme-v1", "v1"), startPod(t, "c2", "callme-v2", "v2")
	v2.code = http.StatusInternalServerError // discarded anyway
	sim, addr := startSim(t, Policy{Mode: ModePerCluster, Mirror: &Mirror{Version: "v2", Percent: 50}, Seed: 8}, backends(v1, v2))
	const n = 1000
	got := send(t, client(t), addr, n, func(i int) http.Header {
		return http.Header{"Host": {"callme-service:8080"}, "X-Request-Id": {fmt.Sprintf("r-%d", i)}}
	})
	if want := map[string]int{"c1 callme-v1 v1": n}; !maps.Equal(got, want) {
		t.Fatalf("primary answers %v, want %v", got, want)
	}
	waitFor(t, "mirror copies delivered", func() bool {
		st := sim.Stats()
		return st.Mirror.InFlight == 0 && st.Mirror.Sent+st.Mirror.Failed+st.Mirror.Dropped == st.Mirror.Selected
	})
	st := sim.Stats()
	copies := int64(v2.hostCounts()["callme-service-shadow:8080"])
	if st.Mirror.Selected != copies || st.Mirror.Sent != copies || st.Mirror.Dropped != 0 || st.Mirror.Failed != 0 {
		t.Errorf("mirror stats %+v, but the mirror pod got %d copies", st.Mirror, copies)
	}
	if ok, bound := binomialOK(copies, n, 0.5); !ok {
		t.Errorf("%d of %d requests mirrored, want %s", copies, n, bound)
	}
	if st.ByVersion["v2"] != 0 || st.ByVersion["v1"] != n {
		t.Errorf("primary ByVersion %v: the mirror set must get no primary traffic", st.ByVersion)
	}
	if h := v2.hostCounts(); len(h) != 1 {
		t.Errorf("mirror backend saw hosts %v, want only callme-service-shadow:8080", h)
	}
	if h := v1.hostCounts(); !maps.Equal(h, map[string]int{"callme-service:8080": n}) {
		t.Errorf("primary saw hosts %v, want the client's Host kept", h)
	}
	// Every copy carries the id of a request the primary served.
	primary := map[string]bool{}
	for _, id := range v1.requestIDs() {
		primary[id] = true
	}
	for _, id := range v2.requestIDs() {
		if !primary[id] {
			t.Errorf("mirror copy with request id %q unknown to the primary", id)
		}
	}
}

// decisions routes n requests one at a time through a fresh Sim with
// policy p over backends bs and returns, per request, the pod chosen and
// whether it was mirrored: the simulator's own decisions, as its Stats
// count them.
func decisions(t *testing.T, p Policy, bs []Backend, n int) []string {
	t.Helper()
	sim, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	sim.SetBackends(bs)
	out := make([]string, n)
	for i := range out {
		b, id, ok := sim.route(nil)
		sim.mu.Lock()
		before := sim.st.Mirror.Selected
		sim.mirrorLocked(id)
		mirrored := sim.st.Mirror.Selected > before // selected, whether or not a mirror pod is ready
		sim.mu.Unlock()
		out[i] = fmt.Sprintf("%s/%v/%v", b.Pod, ok, mirrored)
	}
	if st := sim.Stats(); st.Requests != int64(n) {
		t.Fatalf("Stats.Requests=%d after %d decisions", st.Requests, n)
	}
	return out
}

// The same seed replays the same decisions; another seed makes others.
func TestSeedReplaysDecisions(t *testing.T) {
	bs := []Backend{
		{Cluster: "c1", Pod: "a", Version: "v1", Addr: "127.0.0.1:1", Ready: true},
		{Cluster: "c1", Pod: "b", Version: "v1", Addr: "127.0.0.1:2", Ready: true},
		{Cluster: "c2", Pod: "c", Version: "v2", Addr: "127.0.0.1:3", Ready: true},
		{Cluster: "c3", Pod: "d", Version: "v3", Addr: "127.0.0.1:4", Ready: true},
	}
	policies := map[string]Policy{
		"weighted + mirror": {Mode: ModeWeighted, WeightBy: ByVersion, Weights: map[string]float64{"v1": 70, "v3": 30},
			Mirror: &Mirror{Version: "v2", Percent: 50}},
		"per-pod":     {Mode: ModePerPod},
		"per-cluster": {Mode: ModePerCluster},
		"failover":    {Mode: ModeFailover, Order: []string{"c1", "c3"}},
	}
	for name, p := range policies {
		t.Run(name, func(t *testing.T) {
			p.Seed = 42
			first := decisions(t, p, bs, 200)
			if again := decisions(t, p, bs, 200); !slices.Equal(first, again) {
				t.Errorf("seed 42 replayed differently:\n%v\n%v", first, again)
			}
			p.Seed = 43
			if other := decisions(t, p, bs, 200); slices.Equal(first, other) {
				t.Errorf("seeds 42 and 43 made the same 200 decisions: %v", first)
			}
		})
	}
}

// TestChoicesAreRandomNotDeterministic: over many seeds the mirrored
// counts scatter as a binomial does. Error diffusion or round robin (the
// simulator's old deterministic choices) would give the same count every
// time, far below the bound; a biased or correlated source would exceed
// the upper one. sum((k-np)²/np(1-p)) over 40 seeds is χ² with 40
// degrees of freedom: 12.57..90.08 holds with probability 1-2e-5
// (quantiles computed by hand from the regularised gamma function).
func TestChoicesAreRandomNotDeterministic(t *testing.T) {
	const seeds, n, p = 40, 1000, 0.5
	bs := []Backend{
		{Cluster: "c1", Pod: "a", Version: "v1", Addr: "127.0.0.1:1", Ready: true},
		{Cluster: "c2", Pod: "b", Version: "v2", Addr: "127.0.0.1:2", Ready: true},
	}
	var chi2Mirror, chi2Weight float64
	for seed := range uint64(seeds) {
		var mirrored, toA int
		for _, d := range decisions(t, Policy{Mode: ModeWeighted, WeightBy: ByVersion, Weights: map[string]float64{"v1": 50, "v2": 50},
			Mirror: &Mirror{Cluster: "c3", Percent: 100 * p}, Seed: 1000 + seed}, bs, n) {
			if strings.HasSuffix(d, "/true") {
				mirrored++
			}
			if strings.HasPrefix(d, "a/") {
				toA++
			}
		}
		v := n * p * (1 - p)
		chi2Mirror += (float64(mirrored) - n*p) * (float64(mirrored) - n*p) / v
		chi2Weight += (float64(toA) - n*p) * (float64(toA) - n*p) / v
	}
	for what, x := range map[string]float64{"mirror decisions": chi2Mirror, "weighted picks": chi2Weight} {
		if x < 12.57 || x > 90.08 {
			t.Errorf("%s: dispersion χ²=%.1f over %d seeds, want 12.57..90.08 (binomial)", what, x, seeds)
		}
	}
}

// TestMirrorSaturationDrops: a mirror that never answers cannot hold up the
// primary, and copies beyond MaxInFlight are dropped and counted.
func TestMirrorSaturationDrops(t *testing.T) {
	testutil.NoLeaks(t)
	v1, v2 := startPod(t, "c1", "a", "v1"), startPod(t, "c2", "b", "v2")
	release := make(chan struct{})
	v2.block = release
	sim, addr := startSim(t, Policy{Mode: ModePerPod, Mirror: &Mirror{Cluster: "c2", Percent: 100, MaxInFlight: 2}}, backends(v1, v2))
	t0 := time.Now()
	got := send(t, client(t), addr, 10, nil)
	if got["c1 a v1"] != 10 {
		t.Fatalf("primary answers %v, want 10 from c1", got)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("primaries took %v behind a stuck mirror", d)
	}
	st := sim.Stats()
	if st.Mirror.Selected != 10 || st.Mirror.InFlight != 2 || st.Mirror.Dropped != 8 {
		t.Errorf("mirror stats %+v, want 10 selected, 2 in flight, 8 dropped", st.Mirror)
	}
	v2.mu.Lock()
	close(release)
	v2.mu.Unlock()
	waitFor(t, "blocked copies finish", func() bool { return sim.Stats().Mirror.Sent == 2 })
}

func TestUpstreamFailures(t *testing.T) {
	cases := []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"closed port", func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			return addr
		}},
		{"non-loopback address is refused before dialing", func(*testing.T) string { return "192.0.2.1:80" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testutil.NoLeaks(t)
			sim, addr := startSim(t, Policy{Mode: ModePerPod},
				[]Backend{{Cluster: "c1", Pod: "a", Version: "v1", Addr: tc.addr(t), Ready: true}})
			got := send(t, client(t), addr, 2, nil)
			if want := map[string]int{"503 " + upstreamConnError: 2}; !maps.Equal(got, want) {
				t.Fatalf("answers %v, want %v", got, want)
			}
			if st := sim.Stats(); st.UpstreamErrors != 2 {
				t.Errorf("Stats.UpstreamErrors=%d, want 2", st.UpstreamErrors)
			}
		})
	}
}

func TestRequestIDAndHost(t *testing.T) {
	testutil.NoLeaks(t)
	p := startPod(t, "c1", "a", "v1")
	_, addr := startSim(t, Policy{Mode: ModePerPod}, backends(p))
	c := client(t)
	send(t, c, addr, 1, func(int) http.Header {
		return http.Header{"X-Request-Id": {"given-1"}, "Host": {"callme-service:8080"}}
	})
	send(t, c, addr, 1, nil)
	ids := p.requestIDs()
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if len(ids) != 2 || ids[0] != "given-1" || !uuid.MatchString(ids[1]) {
		t.Errorf("backend saw request ids %q, want the given one kept and a UUIDv4 made up", ids)
	}
	if h := p.hostCounts(); h["callme-service:8080"] != 1 || h[addr] != 1 {
		t.Errorf("backend saw hosts %v, want the client's Host headers kept", h)
	}
}

func TestShadowHost(t *testing.T) {
	cases := []struct{ in, want string }{
		{"callme-service:8080", "callme-service-shadow:8080"},
		{"callme-service", "callme-service-shadow"},
		{"127.0.0.1:8080", "127.0.0.1-shadow:8080"},
		{"[::1]:8080", "[::1]-shadow:8080"},
		{"[::1]", "[::1]-shadow"},
	}
	for _, tc := range cases {
		if got := shadowHost(tc.in); got != tc.want {
			t.Errorf("shadowHost(%q) = %q, want %q (Envoy's shadowAppendedHost)", tc.in, got, tc.want)
		}
	}
}

func TestNewRejects(t *testing.T) {
	cases := []struct {
		name string
		p    Policy
		want string
	}{
		{"unknown mode", Policy{Mode: "random"}, "unknown mode"},
		{"weighted without WeightBy", Policy{Mode: ModeWeighted, Weights: map[string]float64{"v1": 1}}, "WeightBy"},
		{"weighted zero sum", Policy{Mode: ModeWeighted, WeightBy: ByVersion, Weights: map[string]float64{"v1": 0}}, "positive sum"},
		{"negative weight", Policy{Mode: ModeWeighted, WeightBy: ByVersion, Weights: map[string]float64{"v1": -1, "v2": 2}}, ">= 0"},
		{"failover without order", Policy{Mode: ModeFailover}, "Order must list"},
		{"failover repeated cluster", Policy{Mode: ModeFailover, Order: []string{"c1", "c1"}}, "repeated"},
		{"negative cost", Policy{Mode: ModeBalanced, Costs: map[string]float64{"c2": -1}}, "link cost"},
		{"costs outside balanced", Policy{Mode: ModePerCluster, Costs: map[string]float64{"c2": 1}}, "Costs only apply"},
		{"weights outside weighted", Policy{Mode: ModePerPod, Weights: map[string]float64{"v1": 1}}, "only apply"},
		{"mirror without a set", Policy{Mode: ModePerPod, Mirror: &Mirror{Percent: 10}}, "Version or a Cluster"},
		{"mirror over 100%", Policy{Mode: ModePerPod, Mirror: &Mirror{Version: "v2", Percent: 101}}, "0..100"},
		{"fractional weight", Policy{Mode: ModeWeighted, WeightBy: ByVersion, Weights: map[string]float64{"v1": 0.5, "v2": 2}}, "whole number"},
		{"weights beyond uint32", Policy{Mode: ModeWeighted, WeightBy: ByVersion, Weights: map[string]float64{"v1": 1 << 31, "v2": 1 << 31}}, "at most 4294967295"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New(%+v) error %v, want one containing %q", tc.p, err, tc.want)
			}
		})
	}
}

// fakeListener reports a non-loopback address without binding anything.
type fakeListener struct{ closed chan struct{} }

func (f fakeListener) Accept() (net.Conn, error) { <-f.closed; return nil, net.ErrClosed }
func (f fakeListener) Close() error              { return nil }
func (f fakeListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 80} }

func TestServeRejectsNonLoopbackListener(t *testing.T) {
	testutil.NoLeaks(t)
	sim, err := New(Policy{Mode: ModePerPod})
	if err != nil {
		t.Fatal(err)
	}
	err = sim.Serve(context.Background(), fakeListener{closed: make(chan struct{})})
	if err == nil || !strings.Contains(err.Error(), "not on loopback") {
		t.Errorf("Serve error %v, want a loopback refusal", err)
	}
}

func TestServeStopsOnCancelWithOpenConnections(t *testing.T) {
	testutil.NoLeaks(t)
	p := startPod(t, "c1", "a", "v1")
	sim, err := New(Policy{Mode: ModePerPod, PerConnection: true})
	if err != nil {
		t.Fatal(err)
	}
	sim.SetBackends(backends(p))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Serve(ctx, ln) }()
	rc := dial(t, ln.Addr().String())
	rc.get(t, "/") // an idle keep-alive connection stays open
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(shutdownGrace + 2*time.Second):
		t.Fatal("Serve did not return")
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("listener still accepts after Serve returned")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestSetPolicyWhileServing changes a serving simulator's weights and
// mirror the way the lab's daemon does on a VirtualService patch: new
// requests follow the new policy at once, a keep-alive connection of a
// per-connection policy keeps its pod, and a policy New refuses is
// refused with the old one kept.
func TestSetPolicyWhileServing(t *testing.T) {
	testutil.NoLeaks(t)
	v1, v2 := startPod(t, "c1", "callme-v1", "v1"), startPod(t, "c2", "callme-v2", "v2")
	sim, addr := startSim(t, Policy{Mode: ModeWeighted, WeightBy: ByVersion, Weights: map[string]float64{"v1": 1}, Seed: 3}, backends(v1, v2))
	c := client(t)
	if got := send(t, c, addr, 50, nil); !maps.Equal(got, map[string]int{"c1 callme-v1 v1": 50}) {
		t.Fatalf("before: %v, want everything to v1", got)
	}
	if err := sim.SetPolicy(Policy{Mode: ModeWeighted, WeightBy: ByVersion, Weights: map[string]float64{"v1": 0, "v2": 5}}); err != nil {
		t.Fatal(err)
	}
	if got := send(t, c, addr, 50, nil); !maps.Equal(got, map[string]int{"c2 callme-v2 v2": 50}) {
		t.Fatalf("after the weights changed: %v, want everything to v2", got)
	}
	// A mirror added later copies from then on.
	if err := sim.SetPolicy(Policy{Mode: ModeWeighted, WeightBy: ByVersion, Weights: map[string]float64{"v1": 1}, Mirror: &Mirror{Version: "v2", Percent: 100}}); err != nil {
		t.Fatal(err)
	}
	send(t, c, addr, 20, func(int) http.Header { return http.Header{"Host": {"callme-service:8080"}} })
	waitFor(t, "20 mirror copies", func() bool { return sim.Stats().Mirror.Sent == 20 })
	if err := sim.SetPolicy(Policy{Mode: ModeWeighted, WeightBy: ByVersion, Weights: map[string]float64{"v1": -1}}); err == nil {
		t.Fatal("SetPolicy took a negative weight")
	}
	if got := send(t, c, addr, 10, nil); !maps.Equal(got, map[string]int{"c1 callme-v1 v1": 10}) {
		t.Errorf("after a refused policy: %v, want the previous one (v1)", got)
	}
	// Per connection: a pinned connection stays where it is.
	if err := sim.SetPolicy(Policy{Mode: ModeFailover, Order: []string{"c1", "c2"}, PerConnection: true}); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, addr)
	if _, body := rc.get(t, "/"); clusterOf(body) != "c1" {
		t.Fatalf("failover c1 first answered from %q", body)
	}
	if err := sim.SetPolicy(Policy{Mode: ModeFailover, Order: []string{"c2", "c1"}, PerConnection: true}); err != nil {
		t.Fatal(err)
	}
	if _, body := rc.get(t, "/"); clusterOf(body) != "c1" {
		t.Errorf("the open connection moved to %q; a per-connection choice stays", body)
	}
	if _, body := dial(t, addr).get(t, "/"); clusterOf(body) != "c2" {
		t.Errorf("a new connection went to %q, want c2 first now", body)
	}
}

// A weighted group is told by the policy's WeightBy: a backend found
// through Flagger's primary Service is in the primary's group whatever its
// version or cluster.
func TestInGroup(t *testing.T) {
	t.Parallel()
	b := Backend{Cluster: "c2", Pod: "p", Version: "v1", Service: "callme-service-primary"}
	for _, c := range []struct {
		by, g string
		want  bool
	}{
		{ByCluster, "c2", true}, {ByCluster, "c1", false},
		{ByVersion, "v1", true}, {ByVersion, "v2", false},
		{ByService, "callme-service-primary", true}, {ByService, "callme-service-canary", false},
		{"zone", "c2", false},
	} {
		if got := InGroup(b, c.by, c.g); got != c.want {
			t.Errorf("InGroup(%+v, %q, %q) = %v, want %v", b, c.by, c.g, got, c.want)
		}
	}
	if _, err := New(Policy{Mode: ModeWeighted, WeightBy: ByService, Weights: map[string]float64{"a": 1}}); err != nil {
		t.Errorf("a policy by service is refused: %v", err)
	}
}
