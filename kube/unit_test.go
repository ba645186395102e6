package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/kube/kclient"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// writeKubeconfig writes a kubeconfig with one context per server URL.
func writeKubeconfig(t *testing.T, path string, contexts map[string]string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\nclusters:\n")
	for name, server := range contexts {
		b.WriteString("- name: " + name + "\n  cluster: {server: '" + server + "', insecure-skip-tls-verify: true}\n")
	}
	b.WriteString("users:\n- name: u\n  user: {token: not-a-secret}\ncontexts:\n")
	for name := range contexts {
		b.WriteString("- name: " + name + "\n  context: {cluster: " + name + ", user: u, namespace: team}\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// closedPort returns a loopback port nobody listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func TestConfigMergesFilesAndNamesErrors(t *testing.T) {
	dir := t.TempDir()
	dead := "https://127.0.0.1:" + strconv.Itoa(closedPort(t))
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeKubeconfig(t, a, map[string]string{"kind-c1": dead})
	writeKubeconfig(t, b, map[string]string{"kind-c2": dead, "kind-c3": dead})

	for name, opts := range map[string]Options{
		"explicit list":         {Kubeconfig: []string{a, b}},
		"explicit joined":       {Kubeconfig: []string{a + string(filepath.ListSeparator) + b}},
		"KUBECONFIG (no flags)": {},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", a+string(filepath.ListSeparator)+b)
			t.Setenv("HOME", dir) // never the real ~/.kube
			cfg, err := LoadConfig(opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(cfg.Contexts(), ","); got != "kind-c1,kind-c2,kind-c3" {
				t.Fatalf("contexts = %s", got)
			}
			if ns := cfg.ContextNamespace("kind-c2"); ns != "team" {
				t.Fatalf("namespace of kind-c2 = %q", ns)
			}
		})
	}

	cfg, err := LoadConfig(Options{Kubeconfig: []string{a, b}, ProbeTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = cfg.Connect(ctx, ClusterRef{Name: "c9", Context: "kind-c9"})
	var ce *ClusterError
	if !errors.As(err, &ce) || ce.Reason != ReasonContextNotFound {
		t.Fatalf("missing context: %v", err)
	}
	if want := "cluster c9: context kind-c9 not found in kubeconfig (contexts: kind-c1, kind-c2, kind-c3)"; err.Error() != want {
		t.Fatalf("missing context message:\n got %s\nwant %s", err, want)
	}

	start := time.Now()
	_, err = cfg.Connect(ctx, ClusterRef{Name: "c2", Context: "kind-c2"})
	if !errors.As(err, &ce) || ce.Reason != ReasonUnreachable || ce.Cluster != "c2" || ce.Context != "kind-c2" {
		t.Fatalf("unreachable: %#v", err)
	}
	if want := "cluster c2 (context kind-c2): API server " + dead + " unreachable: "; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("unreachable message:\n got %s\nwant prefix %s", err, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("unreachable took %v, the probe should be short", d)
	}

	_, err = cfg.ConnectAll(ctx, []ClusterRef{{Name: "c1", Context: "kind-c1"}, {Name: "c9", Context: "kind-c9"}})
	if err == nil || !strings.Contains(err.Error(), "cluster c1 (context kind-c1)") || !strings.Contains(err.Error(), "cluster c9: context kind-c9 not found") {
		t.Fatalf("ConnectAll should report every cluster: %v", err)
	}

	if _, err := LoadConfig(Options{Kubeconfig: []string{filepath.Join(dir, "missing")}}); err == nil {
		t.Fatal("an explicit kubeconfig that does not exist must fail")
	}
}

func TestParseMetricsAndDelta(t *testing.T) {
	text := `# HELP istio_requests_total Total requests.
# TYPE istio_requests_total counter
istio_requests_total{response_code="200",destination_version="v1"} 10
istio_requests_total{response_code="503",destination_version="v1"} 2
# TYPE http_server_requests_seconds summary
http_server_requests_seconds{uri="/ping",quantile="0.5"} 0.01
http_server_requests_seconds_count{uri="/ping"} 7
http_server_requests_seconds_sum{uri="/ping"} 0.3
# TYPE up gauge
up 1
`
	samples, err := ParseMetrics(strings.NewReader(text), expfmt.NewFormat(expfmt.TypeTextPlain))
	if err != nil {
		t.Fatal(err)
	}
	m := &Metrics{Cluster: "c1", Namespace: "ns", Pod: "a", Samples: samples}
	if got := m.Sum("istio_requests_total", nil); got != 12 {
		t.Fatalf("sum = %v", got)
	}
	if got := m.Sum("istio_requests_total", map[string]string{"response_code": "200"}); got != 10 {
		t.Fatalf("sum 200 = %v", got)
	}
	if got := m.Sum("http_server_requests_seconds_count", nil); got != 7 {
		t.Fatalf("summary count = %v (names %v)", got, m.Names())
	}
	after := func(pod string, v string) *Metrics {
		s, err := ParseMetrics(strings.NewReader("istio_requests_total{response_code=\"200\"} "+v+"\n"), expfmt.NewFormat(expfmt.TypeTextPlain))
		if err != nil {
			t.Fatal(err)
		}
		return &Metrics{Cluster: "c1", Namespace: "ns", Pod: pod, Samples: s}
	}
	d := Delta([]*Metrics{m, after("b", "5")}, []*Metrics{after("a", "25"), after("b", "3"), after("c", "4")}, "istio_requests_total", map[string]string{"response_code": "200"})
	want := []PodDelta{
		{Cluster: "c1", Namespace: "ns", Pod: "a", Delta: 15},
		{Cluster: "c1", Namespace: "ns", Pod: "b", Delta: 3, Reset: true},
		{Cluster: "c1", Namespace: "ns", Pod: "c", Delta: 4, New: true},
	}
	if len(d) != len(want) {
		t.Fatalf("delta = %+v", d)
	}
	for i := range want {
		if d[i] != want[i] {
			t.Errorf("delta[%d] = %+v, want %+v", i, d[i], want[i])
		}
	}
	if _, err := ParseMetrics(strings.NewReader("this is { not metrics\n"), expfmt.NewFormat(expfmt.TypeTextPlain)); err == nil {
		t.Fatal("garbage parsed without error")
	}
}

// TestScrapeThroughPodProxy runs Scrape against an httptest server playing
// the API server. A fake is used because the lab cannot exercise the pod
// proxy: kwok's pods have made-up IPs (10.0.0.x) and no network, so a real
// API server would dial an address off this machine. The fake serves the
// pod and node GETs and the pod proxy paths with Prometheus text, and
// fails the test on any other request, a proxy call for a refused pod
// included.
func TestScrapeThroughPodProxy(t *testing.T) {
	pod := func(name, node string) corev1.Pod {
		return corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo"}, Spec: corev1.PodSpec{NodeName: node}}
	}
	node := func(name string, annotations map[string]string) corev1.Node {
		return corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	}
	objects := map[string]any{
		"/api/v1/namespaces/demo/pods/web-1":   pod("web-1", "node-1"),
		"/api/v1/namespaces/demo/pods/sim-1":   pod("sim-1", "kwok-node"),
		"/api/v1/namespaces/demo/pods/pending": pod("pending", ""),
		"/api/v1/nodes/node-1":                 node("node-1", nil),
		"/api/v1/nodes/kwok-node":              node("kwok-node", map[string]string{KwokNodeAnnotation: "fake"}),
	}
	// The proxy paths of web-1 (port number or name; path with or without
	// its leading slash, or defaulted) and the counter each serves.
	proxied := map[string]string{
		"/api/v1/namespaces/demo/pods/web-1:15020/proxy/stats/prometheus":   "3",
		"/api/v1/namespaces/demo/pods/web-1:http-metrics/proxy/metrics":     "5",
		"/api/v1/namespaces/demo/pods/web-1:8080/proxy/actuator/prometheus": "7",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			t.Errorf("%s %s, want GET only", r.Method, r.URL.Path)
			http.Error(w, "method", http.StatusMethodNotAllowed)
			return
		}
		if obj, ok := objects[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "application/json")
			if err := json.NewEncoder(w).Encode(obj); err != nil {
				t.Error(err)
			}
			return
		}
		if v, ok := proxied[r.URL.Path]; ok {
			if !strings.HasPrefix(r.Header.Get("Accept"), "text/plain") {
				t.Errorf("proxy call with Accept %q", r.Header.Get("Accept"))
			}
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			fmt.Fprintf(w, "# TYPE istio_requests_total counter\nistio_requests_total{response_code=\"200\"} %s\nup 1\n", v)
			return
		}
		t.Errorf("unexpected request %s", r.URL.Path)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	client, err := kclient.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Name: "c1", Context: "kind-c1", Server: srv.URL, Client: client}
	ctx := context.Background()

	for _, tc := range []struct {
		port, path string
		want       float64
	}{{"15020", "/stats/prometheus", 3}, {"http-metrics", "", 5}, {"8080", "actuator/prometheus", 7}} {
		m, err := Scrape(ctx, c, "demo", "web-1", tc.port, tc.path)
		if err != nil {
			t.Fatalf("Scrape port %s path %q: %v", tc.port, tc.path, err)
		}
		if m.Cluster != "c1" || m.Namespace != "demo" || m.Pod != "web-1" || m.Sum("istio_requests_total", map[string]string{"response_code": "200"}) != tc.want {
			t.Errorf("Scrape port %s path %q = %+v, want istio_requests_total %v", tc.port, tc.path, m, tc.want)
		}
	}

	for _, tc := range []struct{ pod, want string }{
		{"sim-1", "pod demo/sim-1 in cluster c1 runs on a kwok simulated node kwok-node (annotation kwok.x-k8s.io/node): it has no network the API server's pod proxy can reach; scrape it through a port-forward (metrics.via: portForward)"},
		{"pending", "pod demo/pending in cluster c1 is not scheduled on a node"},
	} {
		_, err := Scrape(ctx, c, "demo", tc.pod, "8080", "/metrics")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Scrape %s: %v, want an error containing %q", tc.pod, err, tc.want)
		}
	}
}

func TestInvEventsAndLookup(t *testing.T) {
	inv := &Inv{clusters: []*Cluster{{Name: "c1"}, {Name: "c2"}}, pods: map[string]*Pod{}}
	p := func(cluster, name, uid string, ready bool, restarts int32) Pod {
		return Pod{Cluster: cluster, Namespace: "ns", Name: name, UID: uid, Phase: "Running", Ready: ready, Restarts: restarts}
	}
	type step struct {
		pod     Pod
		deleted bool
		want    EventType // "" = no event
	}
	for i, s := range []step{
		{p("c1", "a", "1", true, 0), false, PodAdded},
		{p("c1", "a", "1", true, 0), false, ""},
		{p("c1", "a", "1", false, 0), false, PodChanged},
		{p("c1", "a", "1", false, 1), false, PodRestarted},
		{p("c2", "a", "2", true, 0), false, PodAdded},
		{p("c2", "b", "3", true, 0), false, PodAdded},
		{p("c2", "b", "3", true, 0), true, PodDeleted},
		{p("c2", "b", "3", true, 0), true, ""},
		{p("c2", "b", "4", true, 0), false, PodAdded}, // recreated under the same name
	} {
		ev := inv.apply(s.pod, s.deleted)
		got := EventType("")
		if ev != nil {
			got = ev.Type
		}
		if got != s.want {
			t.Fatalf("step %d: event %q, want %q", i, got, s.want)
		}
	}
	if c, ok := inv.ClusterOfPod("b"); !ok || c != "c2" {
		t.Fatalf("ClusterOfPod(b) = %q %v", c, ok)
	}
	if _, ok := inv.ClusterOfPod("a"); ok {
		t.Fatal("a pod name in two clusters must not be guessed")
	}
	if _, ok := inv.ClusterOfPod("zzz"); ok {
		t.Fatal("unknown pod resolved")
	}
	if got := inv.ReadyPods(); got["c1"] != 0 || got["c2"] != 2 {
		t.Fatalf("ready pods = %v", got)
	}
	raw, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	var snap Snapshot
	if err := json.Unmarshal(raw, &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Clusters) != 2 || snap.Clusters[1].Ready != 2 || len(snap.Clusters[1].Pods) != 2 {
		t.Fatalf("snapshot = %s", raw)
	}
}

// newCA returns a self-signed CA for 127.0.0.1, its PEM, and a TLS
// server certificate signed by it; each call is a different authority,
// as a lab cluster created again gets.
func newCA(t *testing.T) (caPEM []byte, serverCert tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "kwok-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// connectTLS serves /version with cert on a loopback TLS server, writes
// trustedPEM to caFile and a kubeconfig naming both files, and connects.
func connectTLS(t *testing.T, dir string, cert tls.Certificate, trustedPEM []byte) error {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"36","gitVersion":"v1.36.1"}`)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	caFile, kubeconfig := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(caFile, trustedPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c1\n  cluster: {server: '" + srv.URL + "', certificate-authority: " + caFile + "}\n" +
		"users:\n- name: u\n  user: {token: not-a-secret}\ncontexts:\n- name: kind-c1\n  context: {cluster: c1, user: u}\n"
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(Options{Kubeconfig: []string{kubeconfig}, ProbeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.Connect(context.Background(), ClusterRef{Name: "c1", Context: "kind-c1"})
	return err
}

// A cluster recreated with a new CA at the same kubeconfig and CA file
// paths (what a lab down + up does) must be trusted by a later Connect in
// the same process. client-go's transport cache keys CA files by path, so
// without reading them into the config the second Connect reuses the first
// CA and fails with "certificate signed by unknown authority".
func TestConnectTrustsARecreatedClusterAtTheSamePaths(t *testing.T) {
	dir := t.TempDir()
	for round := 1; round <= 2; round++ {
		caPEM, cert := newCA(t)
		if err := connectTLS(t, dir, cert, caPEM); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	// A CA file that does not verify the server is named as such, not as
	// an unreachable server.
	otherCA, _ := newCA(t)
	_, cert := newCA(t)
	err := connectTLS(t, dir, cert, otherCA)
	var ce *ClusterError
	if !errors.As(err, &ce) || ce.Reason != ReasonUntrusted || !strings.Contains(err.Error(), "certificate-authority does not verify") {
		t.Fatalf("untrusted server: %v", err)
	}
}

// A pod with a sidecar has two containers, and the API refuses a log
// request that names none: the inventory records the one kubectl would
// read, the default-container annotation (Istio's injection sets it), else
// the first container.
func TestDefaultContainerLikeKubectl(t *testing.T) {
	two := []corev1.Container{{Name: "istio-proxy"}, {Name: "callme"}}
	for _, c := range []struct {
		annotation string
		containers []corev1.Container
		want       string
	}{
		{"callme", two, "callme"},
		{"", two, "istio-proxy"},
		{"gone", two, "istio-proxy"}, // an annotation naming no container is ignored, as kubectl does
		{"", []corev1.Container{{Name: "app"}}, "app"},
		{"", nil, ""},
	} {
		in := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: c.containers}}
		if c.annotation != "" {
			in.Annotations = map[string]string{defaultContainerAnnotation: c.annotation}
		}
		if got := podFromAPI("c1", "w", in).DefaultContainer; got != c.want {
			t.Errorf("annotation %q, containers %v: default container %q, want %q", c.annotation, c.containers, got, c.want)
		}
	}
}
