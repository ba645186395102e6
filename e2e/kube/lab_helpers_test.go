package kube_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/kube/portforward"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// backend is the real HTTP server behind one simulated pod: kwok's
// PortForward sends the pod's port 8080 to it. It answers "pod=NAME".
type backend struct {
	name string
	addr string // fixed 127.0.0.1:PORT, kept across restarts
	hits atomic.Int64

	mu  sync.Mutex
	srv *http.Server
}

func startBackend(t testing.TB, name string) *backend {
	t.Helper()
	b := &backend{name: name}
	ln, err := listenAboveEphemeral()
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	b.serve(ln)
	t.Cleanup(b.stop)
	return b
}

// listenAboveEphemeral listens on a loopback port above Linux's
// ephemeral range (ip_local_port_range, 32768-60999 by default) and above
// kwokctl's ports (counted down from 32767): a backend that restart
// frees and binds again must not lose its port meanwhile to another
// process's bind(:0) or to a lab cluster being created.
func listenAboveEphemeral() (net.Listener, error) {
	var err error
	for range 200 {
		port := 61000 + rand.IntN(4000)
		var ln net.Listener
		if ln, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			return ln, nil
		}
	}
	return nil, fmt.Errorf("no free loopback port in 61000-64999: %w", err)
}

func (b *backend) port() string { _, p, _ := net.SplitHostPort(b.addr); return p }

func (b *backend) serve(ln net.Listener) {
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			b.hits.Add(1)
			fmt.Fprintf(w, "pod=%s\n", b.name)
		}),
	}
	b.mu.Lock()
	b.srv = srv
	b.mu.Unlock()
	go srv.Serve(ln)
}

// stop closes the listener and every connection: the pod's app is gone.
func (b *backend) stop() {
	b.mu.Lock()
	srv := b.srv
	b.srv = nil
	b.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// restart listens on the same address again.
func (b *backend) restart(t testing.TB) {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", b.addr); err == nil {
			b.serve(ln)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("restart backend %s on %s: %v", b.name, b.addr, err)
}

// demo is a namespace with Deployment "web" (container port "http" 8080,
// label version) and Service "web" (port "web" 80 → targetPort "http") in
// one lab cluster, each pod forwarded by kwok to its own backend.
type demo struct {
	lab      *labtest.Lab
	cluster  string
	ns       string
	c        *kube.Cluster
	mu       sync.Mutex
	backends map[string]*backend // by pod name
}

const webYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, tier: front, %[3]s: %[4]s}}
    spec:
      containers: [{name: app, image: web:%[4]s, ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: %[1]s}
spec:
  selector: {app: web}
  ports: [{name: web, port: 80, targetPort: http}]
`

// newDemo sets up the namespace, the node, the workload and (when forward)
// one backend + PortForward per pod; versionLabel is "version" or
// "app.kubernetes.io/version".
func newDemo(t testing.TB, lab *labtest.Lab, cluster, ns string, replicas int, versionLabel, version string, forward bool) *demo {
	t.Helper()
	d := &demo{lab: lab, cluster: cluster, ns: ns, c: lab.Connect(t, cluster), backends: map[string]*backend{}}
	lab.Apply(t, cluster, labtest.Node("node-1"))
	lab.Apply(t, cluster, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n")
	// kube-controller-manager creates the default ServiceAccount about 2 s
	// after the namespace; pods are refused until then (tools/lab/NOTES.md).
	e2etest.Poll(t, 30*time.Second, "default ServiceAccount in "+ns, func() error {
		_, err := d.c.Client.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{})
		return err
	})
	lab.Apply(t, cluster, fmt.Sprintf(webYAML, ns, replicas, versionLabel, version))
	pods := d.waitPods(t, replicas)
	for _, p := range pods {
		if forward {
			d.forward(t, p.Name)
		}
	}
	return d
}

// forward starts a backend for pod and the kwok PortForward to it, then
// waits until kwok's controller serves it.
func (d *demo) forward(t testing.TB, pod string) *backend {
	t.Helper()
	b := startBackend(t, pod)
	d.mu.Lock()
	d.backends[pod] = b
	d.mu.Unlock()
	d.lab.Apply(t, d.cluster, fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: PortForward
metadata: {name: %s, namespace: %s}
spec:
  forwards:
  - ports: [8080]
    target: {port: %s, address: 127.0.0.1}
`, pod, d.ns, b.port()))
	// kwok-controller learns of the object through a watch: poll.
	tun, err := portforward.OpenTunnel(context.Background(), d.c, portforward.TunnelSpec{Namespace: d.ns, Resource: "pod/" + pod, Port: "http"})
	if err != nil {
		t.Fatal(err)
	}
	defer tun.Close()
	client := &http.Client{Transport: &http.Transport{DialContext: tun.DialContext}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	e2etest.Poll(t, 30*time.Second, "kwok forwarding pod "+pod, func() error {
		body, err := get(client, "http://web/")
		if err == nil && body != "pod="+pod {
			err = fmt.Errorf("answer %q", body)
		}
		return err
	})
	return b
}

func (d *demo) backend(pod string) *backend {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.backends[pod]
}

// waitPods waits until the web Deployment has exactly n running, ready
// pods that are not being deleted, and returns them.
func (d *demo) waitPods(t testing.TB, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	e2etest.Poll(t, 60*time.Second, fmt.Sprintf("%d ready web pods in %s", n, d.cluster), func() error {
		list, err := d.c.Client.CoreV1().Pods(d.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && ready(&p) {
				pods = append(pods, p)
			}
		}
		if len(pods) != n {
			return fmt.Errorf("%d ready of %d", len(pods), len(list.Items))
		}
		return nil
	})
	return pods
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return strings.TrimSpace(string(body)), nil
}
