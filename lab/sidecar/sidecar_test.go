package sidecar

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/lab/apps"
	"github.com/mesh-verify/mesh-verify/lab/crilog"
	"github.com/mesh-verify/mesh-verify/lab/envoylog"
	"github.com/mesh-verify/mesh-verify/lab/internal/testutil"
)

// pod is a real lab app with a sidecar in front of it, logging to a real
// CRI log file.
type pod struct {
	app     *apps.Server
	sc      *Sidecar
	logFile string
}

func startPod(t *testing.T, flavor string, app apps.Spec) *pod {
	t.Helper()
	dir := t.TempDir()
	a, err := apps.Start(context.Background(), app, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	logFile := filepath.Join(dir, "ns_pod_"+Container(flavor)+".log")
	log, err := crilog.Open(logFile)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := New(Spec{Flavor: flavor, Pod: app.Pod, Namespace: "default", Cluster: "c2", Workload: "callme-service-v2",
		App: "callme-service", Service: "callme-service", Version: "v2", Port: 8080, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Start(context.Background(), a.Addr(), "127.0.0.1:0", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sc.Close(); err != nil {
			t.Errorf("close sidecar: %v", err)
		}
		log.Close()
	})
	return &pod{app: a, sc: sc, logFile: logFile}
}

func client(t *testing.T) *http.Client {
	tr := &http.Transport{Proxy: nil, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, url, host string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Host = host
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// accessLines parses every line of the sidecar's log.
func accessLines(t *testing.T, file, format string) []envoylog.Entry {
	t.Helper()
	var out []envoylog.Entry
	for _, l := range strings.Split(strings.TrimSpace(readFile(t, file)), "\n") {
		if l == "" {
			continue
		}
		msg := strings.SplitN(l, " ", 4)[3]
		e, err := envoylog.Parse(format, msg)
		if err != nil {
			t.Fatalf("sidecar line: %v", err)
		}
		out = append(out, e)
	}
	return out
}

func readFile(t *testing.T, f string) string {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// scrape reads the sidecar's metrics with mesh-verify's own parser.
func scrape(t *testing.T, c *http.Client, sc *Sidecar) []kube.Sample {
	t.Helper()
	resp, err := c.Get("http://" + sc.MetricsAddr() + MetricsPath(sc.spec.Flavor))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("metrics answered %d", resp.StatusCode)
	}
	samples, err := kube.ParseMetrics(resp.Body, expfmt.ResponseFormat(resp.Header))
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	return samples
}

func sum(samples []kube.Sample, name string, match map[string]string) float64 {
	m := kube.Metrics{Samples: samples}
	return m.Sum(name, match)
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// An Istio sidecar in front of Istio's echo app (which shows what it
// received): the id a request carries reaches the app unchanged, one is
// made up for a request without, the authority passes as sent (a mirror's
// -shadow too), and the access log and istio_requests_total count every
// request exactly.
func TestIstioInbound(t *testing.T) {
	testutil.NoLeaks(t)
	p := startPod(t, Istio, apps.Spec{Kind: apps.KindEcho, Pod: "echo-v2-abc", Version: "v2"})
	c := client(t)
	base := "http://" + p.sc.Addr()

	resp, body1 := get(t, c, base+"/callme/ping?x=1", "callme-service:8080", map[string]string{"X-Request-Id": "rid-1", "User-Agent": "Java/11.0.11"})
	body := body1
	if resp.StatusCode != 200 || !strings.Contains(body, "\nRequestHeader=X-Request-Id:rid-1\n") || !strings.Contains(body, "\nRequestHeader=X-Forwarded-Proto:http\n") ||
		!strings.Contains(body, "\nHost=callme-service:8080\n") || strings.Contains(body, "X-Forwarded-For") {
		t.Fatalf("the app saw:\n%s", body)
	}
	if resp.Header.Get("X-Envoy-Upstream-Service-Time") == "" {
		t.Errorf("no x-envoy-upstream-service-time in %v", resp.Header)
	}
	_, body = get(t, c, base+"/", "callme-service-shadow:8080", nil)
	made := regexp.MustCompile(`\nRequestHeader=X-Request-Id:(\S+)\n`).FindStringSubmatch(body)
	if made == nil || !uuidV4.MatchString(made[1]) {
		t.Fatalf("a request without an id reached the app with %q; want a made-up UUIDv4:\n%s", made, body)
	}

	lines := accessLines(t, p.logFile, envoylog.Istio)
	if len(lines) != 2 || p.sc.Lines() != 2 {
		t.Fatalf("%d access lines (Lines %d), want 2", len(lines), p.sc.Lines())
	}
	first, second := lines[0], lines[1]
	if first.Method != "GET" || first.Path != "/callme/ping?x=1" || first.Code != 200 || first.Flags != "" || first.Details != envoylog.DetailsViaUpstream ||
		first.RequestID != "rid-1" || first.Authority != "callme-service:8080" || first.UpstreamHost != p.app.Addr() ||
		first.UpstreamCluster != "inbound|8080||" || first.UserAgent != "Java/11.0.11" || first.Route != "default" ||
		first.BytesOut != int64(len(body1)) || first.Upstream < 0 {
		t.Errorf("first line %+v", first)
	}
	if second.RequestID != made[1] || second.Authority != "callme-service-shadow:8080" || second.BytesOut != int64(len(body)) {
		t.Errorf("second line %+v: want the made-up id %s, the -shadow authority and %d bytes", second, made[1], len(body))
	}

	samples := scrape(t, c, p.sc)
	if n := sum(samples, "istio_requests_total", map[string]string{"reporter": "destination", "response_code": "200",
		"destination_workload": "callme-service-v2", "destination_version": "v2", "destination_cluster": "c2",
		"destination_service": "callme-service.default.svc.cluster.local", "source_workload": "unknown"}); n != 2 {
		t.Errorf("istio_requests_total = %v, want 2:\n%+v", n, samples)
	}
}

func TestIstioInboundAppDown(t *testing.T) {
	testutil.NoLeaks(t)
	p := startPod(t, Istio, apps.Spec{Kind: apps.KindCallme, Pod: "callme-1"})
	c := client(t)
	if err := p.app.Close(); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, c, "http://"+p.sc.Addr()+"/callme/ping", "callme-service:8080", nil)
	if resp.StatusCode != 503 || body != envoylog.UpstreamConnectError {
		t.Fatalf("answered %d %q, want Envoy's 503", resp.StatusCode, body)
	}
	lines := accessLines(t, p.logFile, envoylog.Istio)
	if len(lines) != 1 || lines[0].Code != 503 || lines[0].Flags != envoylog.FlagUpstreamConnFailure ||
		lines[0].Details != envoylog.DetailsConnectionFailure || lines[0].Upstream != -1 {
		t.Fatalf("lines %+v, want one 503 UF", lines)
	}
	if n := sum(scrape(t, c, p.sc), "istio_requests_total", map[string]string{"response_code": "503", "response_flags": "UF"}); n != 1 {
		t.Errorf("istio_requests_total{503,UF} = %v, want 1", n)
	}
}

// A Kuma sidecar writes Kuma's format and counts in Envoy's cluster stats
// on kuma-dp's port.
func TestKumaInbound(t *testing.T) {
	testutil.NoLeaks(t)
	p := startPod(t, Kuma, apps.Spec{Kind: apps.KindTestServer, Pod: "test-server-abc"})
	c := client(t)
	const n = 7
	for i := range n {
		get(t, c, "http://"+p.sc.Addr()+"/", "test-server:80", map[string]string{"X-Request-Id": fmt.Sprintf("k-%d", i)})
	}
	lines := accessLines(t, p.logFile, envoylog.Kuma)
	if len(lines) != n {
		t.Fatalf("%d lines, want %d", len(lines), n)
	}
	for i, e := range lines {
		if e.Mesh != "default" || e.RequestID != fmt.Sprintf("k-%d", i) || e.SourceService != "unknown" ||
			e.DestService != "callme-service_default_svc_8080" || e.UpstreamHost != p.app.Addr() || e.Code != 200 {
			t.Errorf("line %d: %+v", i, e)
		}
	}
	samples := scrape(t, c, p.sc)
	for name, match := range map[string]map[string]string{
		"envoy_cluster_upstream_rq_total": {"envoy_cluster_name": "localhost_8080"},
		"envoy_cluster_upstream_rq":       {"envoy_cluster_name": "localhost_8080", "envoy_response_code": "200"},
		"envoy_cluster_upstream_rq_xx":    {"envoy_cluster_name": "localhost_8080", "envoy_response_code_class": "2"},
	} {
		if got := sum(samples, name, match); got != n {
			t.Errorf("%s%v = %v, want %d", name, match, got, n)
		}
	}
}

// Outbound records what the pod's outbound data plane sent: a line in the
// same log and Istio's reporter="source" count.
func TestOutboundIsRecordedInTheSameLogAndMetrics(t *testing.T) {
	testutil.NoLeaks(t)
	p := startPod(t, Istio, apps.Spec{Kind: apps.KindCallme, Pod: "caller-1"})
	start, _ := time.Parse(envoylog.TimeLayout, "2021-07-12T10:15:30.123Z")
	p.sc.Outbound(envoylog.Entry{Start: start, Method: "GET", Path: "/callme/ping", Protocol: "HTTP/1.1", Code: 200,
		Flags: envoylog.FlagNone, Details: envoylog.DetailsViaUpstream, BytesOut: 21, Duration: 3 * time.Millisecond,
		Upstream: 2 * time.Millisecond, UserAgent: "Java/11.0.11", RequestID: "84961386-6d84-429d-98bd-c5aee93b5c88",
		Authority: "callme-service:8080", UpstreamHost: "127.0.0.1:41000", UpstreamLocal: "127.0.0.1:52000",
		DownstreamLocal: "127.0.0.1:43000", DownstreamRemote: "127.0.0.1:44000"},
		Destination{Service: "callme-service", Namespace: "default", Port: 8080, Workload: "callme-service-v1", App: "callme-service", Version: "v1", Cluster: "c1", Subset: "v1"})
	want := `[2021-07-12T10:15:30.123Z] "GET /callme/ping HTTP/1.1" 200 - via_upstream - "-" 0 21 3 2 "-" "Java/11.0.11" "84961386-6d84-429d-98bd-c5aee93b5c88" "callme-service:8080" "127.0.0.1:41000" outbound|8080|v1|callme-service.default.svc.cluster.local 127.0.0.1:52000 127.0.0.1:43000 127.0.0.1:44000 - default`
	if got := strings.SplitN(strings.TrimSpace(readFile(t, p.logFile)), " ", 4)[3]; got != want {
		t.Fatalf("outbound line\n got %s\nwant %s", got, want)
	}
	if n := sum(scrape(t, client(t), p.sc), "istio_requests_total", map[string]string{"reporter": "source", "source_workload": "callme-service-v2",
		"destination_workload": "callme-service-v1", "destination_version": "v1", "response_code": "200"}); n != 1 {
		t.Errorf("reporter=source count %v, want 1", n)
	}
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Flavor: "linkerd", Pod: "p", Port: 8080}, `unknown flavor "linkerd"`},
		{Spec{Flavor: Istio, Pod: "p"}, "app port 0 out of range"},
	} {
		if _, err := New(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pod p") {
			t.Errorf("New(%+v) = %v, want %q naming the pod", tc.spec, err, tc.want)
		}
	}
}

// A Kuma sidecar's outbound line names both services by their
// kuma.io/service tags and counts the call in the destination's cluster.
func TestKumaOutbound(t *testing.T) {
	testutil.NoLeaks(t)
	p := startPod(t, Kuma, apps.Spec{Kind: apps.KindTestServer, Pod: "client-1"})
	start, _ := time.Parse(envoylog.TimeLayout, "2024-01-12T10:00:00.123Z")
	p.sc.Outbound(envoylog.Entry{Start: start, Method: "GET", Path: "/", Protocol: "HTTP/1.1", Code: 200, Flags: envoylog.FlagNone,
		BytesOut: 210, Duration: 2 * time.Millisecond, Upstream: time.Millisecond, UserAgent: "curl/8.5.0", RequestID: "r-1",
		Authority: "test-server:80", UpstreamHost: "127.0.0.1:41000", DownstreamRemote: "127.0.0.1:44000"},
		Destination{Service: "test-server", Namespace: "kuma-demo", Port: 80, Version: "v2", Cluster: "c2"})
	want := `[2024-01-12T10:00:00.123Z] default "GET / HTTP/1.1" 200 - 0 210 2 1 "-" "curl/8.5.0" "-" "r-1" "test-server:80" "callme-service_default_svc_8080" "test-server_kuma-demo_svc_80" "127.0.0.1" "127.0.0.1:41000"`
	if got := strings.SplitN(strings.TrimSpace(readFile(t, p.logFile)), " ", 4)[3]; got != want {
		t.Fatalf("outbound line\n got %s\nwant %s", got, want)
	}
	if n := sum(scrape(t, client(t), p.sc), "envoy_cluster_upstream_rq_total", map[string]string{"envoy_cluster_name": "test-server_kuma-demo_svc_80"}); n != 1 {
		t.Errorf("outbound cluster count %v, want 1", n)
	}
}
