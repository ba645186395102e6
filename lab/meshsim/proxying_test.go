package meshsim

import (
	"context"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/envoylog"
	"github.com/mesh-verify/mesh-verify/lab/internal/testutil"
)

// accessLog collects what a simulator's Proxying.AccessLog receives.
type accessLog struct {
	mu  sync.Mutex
	got []Access
}

func (l *accessLog) add(a Access) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, a)
}

func (l *accessLog) all() []Access {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Access(nil), l.got...)
}

// serveWith serves a Sim with px until the test ends.
func serveWith(t *testing.T, p Policy, bs []Backend, px Proxying) (*Sim, string) {
	t.Helper()
	sim, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	sim.SetBackends(bs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.ServeWith(ctx, ln, px) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeWith: %v", err)
		}
	})
	return sim, ln.Addr().String()
}

func call(t *testing.T, c *http.Client, addr, host, rid string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/callme/ping?a=1", nil)
	req.Host = host
	req.Header.Set("User-Agent", "Java/11.0.11")
	if rid != "" {
		req.Header.Set("X-Request-Id", rid)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// As Envoy, the simulator logs one record per primary request (not per
// mirror copy) naming the pod it went to, keeps a given x-request-id and
// makes one up otherwise, and the copy carries the primary's id.
func TestEnvoyProxyingLogsPrimaries(t *testing.T) {
	testutil.NoLeaks(t)
	v1, v2 := startPod(t, "c1", "callme-v1", "v1"), startPod(t, "c2", "callme-v2", "v2")
	log := &accessLog{}
	_, addr := serveWith(t, Policy{Mode: ModeWeighted, WeightBy: ByVersion, Weights: map[string]float64{"v1": 100},
		Mirror: &Mirror{Version: "v2", Percent: 100}}, backends(v1, v2), Proxying{Envoy: true, AccessLog: log.add})
	c := client(t)
	resp := call(t, c, addr, "callme-service:8080", "")
	if resp.Header.Get("X-Envoy-Upstream-Service-Time") == "" {
		t.Errorf("no x-envoy-upstream-service-time: %v", resp.Header)
	}
	call(t, c, addr, "callme-service:8080", "given-2")
	deadline := time.Now().Add(5 * time.Second)
	for len(v2.requestIDs()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := log.all()
	if len(got) != 2 {
		t.Fatalf("%d access records for 2 requests and 2 mirror copies, want 2 (primaries only): %+v", len(got), got)
	}
	made := got[0].Entry.RequestID
	if !uuidV4.MatchString(made) || got[1].Entry.RequestID != "given-2" {
		t.Errorf("request ids %q, %q: want a made-up UUIDv4, then the given one", made, got[1].Entry.RequestID)
	}
	if ids := v1.requestIDs(); len(ids) != 2 || ids[0] != made || ids[1] != "given-2" {
		t.Errorf("v1 saw ids %q", ids)
	}
	// Copies are sent in the background: their order is not the primaries'.
	if ids := v2.requestIDs(); len(ids) != 2 || !slices.Contains(ids, made) || !slices.Contains(ids, "given-2") {
		t.Errorf("the mirror copies carried ids %q, want the primaries'", ids)
	}
	for _, a := range got {
		e := a.Entry
		if a.Backend.Pod != "callme-v1" || e.UpstreamHost != v1.Addr || e.Code != 200 || e.Flags != envoylog.FlagNone ||
			e.Details != envoylog.DetailsViaUpstream || e.Method != "GET" || e.Path != "/callme/ping?a=1" ||
			e.Authority != "callme-service:8080" || e.UserAgent != "Java/11.0.11" || e.BytesOut != int64(len("c1 callme-v1 v1")) ||
			e.Upstream < 0 || e.UpstreamLocal == "" || e.DownstreamLocal != addr || e.DownstreamRemote == "" {
			t.Errorf("record %+v", a)
		}
	}
}

// Skupper's router and Cilium's load balancer are no Envoy: no header is
// added, and there is no access log.
func TestNonEnvoyProxyingAddsNoHeader(t *testing.T) {
	testutil.NoLeaks(t)
	p := startPod(t, "c2", "a", "v1")
	_, addr := serveWith(t, Policy{Mode: ModePerPod}, backends(p), Proxying{})
	resp := call(t, client(t), addr, "x:8080", "")
	if ids := p.requestIDs(); len(ids) != 1 || ids[0] != "" {
		t.Errorf("the backend saw x-request-id %q, want none", ids)
	}
	if v := resp.Header.Get("X-Envoy-Upstream-Service-Time"); v != "" {
		t.Errorf("x-envoy-upstream-service-time %q from a non-Envoy data plane", v)
	}
}

// Failures are recorded with Envoy's flags: no healthy upstream (UH), and
// an upstream that refused (UF).
func TestAccessLogOfFailures(t *testing.T) {
	testutil.NoLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	cases := []struct {
		name              string
		bs                []Backend
		flags, details    string
		wantUpstreamHost  string
		wantBackendPodSet bool
	}{
		{"no healthy upstream", nil, envoylog.FlagNoHealthyUpstream, envoylog.DetailsNoHealthyUpstream, "", false},
		{"connection refused", []Backend{{Cluster: "c1", Pod: "gone", Version: "v1", Addr: dead, Ready: true}},
			envoylog.FlagUpstreamConnFailure, envoylog.DetailsConnectionFailure, dead, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log := &accessLog{}
			_, addr := serveWith(t, Policy{Mode: ModePerPod}, tc.bs, Proxying{Envoy: true, AccessLog: log.add})
			if resp := call(t, client(t), addr, "x:8080", "r1"); resp.StatusCode != 503 {
				t.Fatalf("answered %d, want 503", resp.StatusCode)
			}
			got := log.all()
			if len(got) != 1 {
				t.Fatalf("%d records, want 1", len(got))
			}
			e := got[0].Entry
			if e.Code != 503 || e.Flags != tc.flags || e.Details != tc.details || e.UpstreamHost != tc.wantUpstreamHost ||
				e.Upstream != -1 || e.RequestID != "r1" || (got[0].Backend.Pod != "") != tc.wantBackendPodSet {
				t.Errorf("record %+v", got[0])
			}
		})
	}
}

// TestEdgeRegeneratesRequestID: an edge Envoy (Istio's ingress gateway
// since 1.25) replaces the client's x-request-id with a UUIDv4 of its own,
// which its log and the backend share; an inner Envoy keeps it.
func TestEdgeRegeneratesRequestID(t *testing.T) {
	t.Parallel()
	for _, edge := range []bool{false, true} {
		v1 := startPod(t, "c1", "callme-v1", "v1")
		log := &accessLog{}
		_, addr := serveWith(t, Policy{Mode: ModePerPod}, backends(v1), Proxying{Envoy: true, Edge: edge, AccessLog: log.add})
		call(t, client(t), addr, "callme-service:8080", "client-1")
		got := log.all()
		ids := v1.requestIDs()
		if len(got) != 1 || len(ids) != 1 || got[0].Entry.RequestID != ids[0] {
			t.Fatalf("edge %v: log %+v, backend ids %q: want one request, one id", edge, got, ids)
		}
		if kept := ids[0] == "client-1"; kept == edge || (edge && !uuidV4.MatchString(ids[0])) {
			t.Errorf("edge %v: the backend got id %q", edge, ids[0])
		}
	}
}
