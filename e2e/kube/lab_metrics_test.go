package kube_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/kube/portforward"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// metricsServer is a real HTTP server playing a sidecar's metrics port:
// istio_requests_total grows by one per call to bump.
type metricsServer struct {
	addr  string
	count atomic.Int64
}

func startMetrics(t *testing.T) *metricsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &metricsServer{addr: ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats/prometheus", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		fmt.Fprintf(w, "# TYPE istio_requests_total counter\nistio_requests_total{reporter=\"destination\",response_code=\"200\"} %d\n", m.count.Load())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return m
}

// A pod's metrics scraped through a port-forward, through a lab cluster's
// real API server and kwok's kubelet: the way the lab's sidecars are
// reached (metrics.via: portForward), and a way that needs no route from
// the API server to the pod network on a real cluster either.
func TestLabScrapeThroughPortForward(t *testing.T) {
	lab := labtest.Clusters(t, "c1")
	d := newDemo(t, lab, "c1", "demo", 1, "version", "v1", false)
	pod := d.waitPods(t, 1)[0].Name
	m := startMetrics(t)
	_, port, _ := net.SplitHostPort(m.addr)
	lab.Apply(t, "c1", fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: PortForward
metadata: {name: %s, namespace: demo}
spec:
  forwards:
  - ports: [15090]
    target: {port: %s, address: 127.0.0.1}
`, pod, port))
	ctx := context.Background()
	var before *kube.Metrics
	e2etest.Poll(t, 30*time.Second, "kwok forwarding port 15090", func() error {
		var err error
		before, err = portforward.ScrapeVia(ctx, d.c, kube.ViaPortForward, "demo", pod, "15090", "/stats/prometheus")
		return err
	})
	m.count.Add(13)
	after, err := portforward.ScrapeVia(ctx, d.c, kube.ViaPortForward, "demo", pod, "15090", "stats/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	delta := kube.Delta([]*kube.Metrics{before}, []*kube.Metrics{after}, "istio_requests_total", map[string]string{"reporter": "destination"})
	if len(delta) != 1 || delta[0].Delta != 13 || delta[0].Pod != pod || delta[0].Cluster != "c1" {
		t.Fatalf("delta = %+v, want 13 for pod %s in c1", delta, pod)
	}

	for _, tc := range []struct{ port, path, want string }{
		{"15090", "/nope", "status 404"},
		{"9999", "/metrics", `port-forward`},
		{"nosuchport", "/metrics", `no container port named "nosuchport"`},
	} {
		_, err := portforward.ScrapeVia(ctx, d.c, kube.ViaPortForward, "demo", pod, tc.port, tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "demo/"+pod) {
			t.Errorf("scrape port %s path %s: %v, want an error naming the pod and containing %q", tc.port, tc.path, err, tc.want)
		}
	}
	if _, err := portforward.ScrapeVia(ctx, d.c, "ssh", "demo", pod, "15090", "/"); err == nil || !strings.Contains(err.Error(), `unknown way "ssh"`) {
		t.Errorf("ScrapeVia(ssh) = %v", err)
	}
}

// The API server's pod proxy refuses a pod whose IP is a loopback
// address (kube-apiserver v1.36 pkg/registry/core/pod/strategy.go
// ResourceLocation: the IP must be global unicast), so giving kwok's pods
// 127.x addresses (a node podCIDR) cannot make the pod proxy reach the
// lab's loopback servers. This test is that verification, against the
// real API server.
func TestLabPodProxyRefusesLoopbackPodIPs(t *testing.T) {
	lab := labtest.Clusters(t, "c1")
	c := lab.Connect(t, "c1")
	lab.Apply(t, "c1", `apiVersion: v1
kind: Node
metadata:
  name: node-lo
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok}
spec: {podCIDR: 127.1.0.0/24, podCIDRs: [127.1.0.0/24]}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
`)
	e2etest.Poll(t, 30*time.Second, "the default ServiceAccount", func() error {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{})
		return err
	})
	lab.Apply(t, "c1", `apiVersion: v1
kind: Pod
metadata: {name: lo, namespace: default}
spec:
  nodeName: node-lo
  containers: [{name: app, image: app, ports: [{name: http-envoy-prom, containerPort: 15090}]}]
`)
	var ip string
	e2etest.Poll(t, 30*time.Second, "a pod IP from the node's podCIDR", func() error {
		p, err := c.Client.CoreV1().Pods("default").Get(context.Background(), "lo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ip = p.Status.PodIP; p.Status.Phase != corev1.PodRunning || !strings.HasPrefix(ip, "127.1.0.") {
			return fmt.Errorf("phase %s, IP %q", p.Status.Phase, ip)
		}
		return nil
	})
	_, err := kube.ScrapePath(context.Background(), c, "/api/v1/namespaces/default/pods/lo:15090/proxy/stats/prometheus")
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "BadRequest 400: address not allowed") {
		t.Fatalf("pod proxy to pod IP %s: %v, want 400 \"address not allowed\"", ip, err)
	}
	_, err = portforward.ScrapeVia(context.Background(), c, kube.ViaProxy, "default", "lo", "15090", "/stats/prometheus")
	if err == nil || !strings.Contains(err.Error(), "metrics.via: portForward") {
		t.Errorf("Scrape of a kwok pod: %v, want the advice to use a port-forward", err)
	}
	t.Logf("pod IP %s: the pod proxy answers %v", ip, err)
}
