package kube_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/kube/portforward"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// The setup errors the CLI maps to exit code 3, against a real API server:
// a missing context, an unreachable API server, RBAC denial (a
// ServiceAccount without any role), a missing namespace. The kubeconfig is
// the lab's merged with one written to the test's temp dir, as KUBECONFIG
// would merge them.
func TestLabClusterErrors(t *testing.T) {
	lab := labtest.Clusters(t, "c1")
	d := newDemo(t, lab, "c1", "demo", 1, "version", "v1", false)
	ctx := context.Background()

	_, err := d.c.Client.CoreV1().ServiceAccounts("demo").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exp := int64(600)
	// CreateToken is no call of the product: the full clientset asks.
	tok, err := kubernetes.NewForConfigOrDie(d.c.REST).CoreV1().ServiceAccounts("demo").CreateToken(ctx, "nobody", &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := tok.Status.Token
	ca := d.c.REST.TLSClientConfig.CAData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(d.c.REST.TLSClientConfig.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "https://" + ln.Addr().String()
	ln.Close() // nothing listens there any more
	extra := filepath.Join(t.TempDir(), "extra-kubeconfig")
	if err := os.WriteFile(extra, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: dead
  cluster: {server: %q, insecure-skip-tls-verify: true}
- name: c1-again
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: nobody
  user: {token: %q}
contexts:
- name: kind-dead
  context: {cluster: dead, user: nobody}
- name: kind-nobody
  context: {cluster: c1-again, user: nobody, namespace: demo}
`, dead, d.c.Server, base64.StdEncoding.EncodeToString(ca), token)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := kube.LoadConfig(kube.Options{Kubeconfig: []string{lab.Kubeconfig, extra}, ProbeTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, err error, reason kube.Reason, want ...string) {
		t.Helper()
		// First, so that no failure message below prints the token.
		if err != nil && strings.Contains(err.Error(), token) {
			t.Fatal("the error message contains the token")
		}
		var ce *kube.ClusterError
		if !errors.As(err, &ce) {
			t.Fatalf("want a *kube.ClusterError, got %T: %v", err, err)
		}
		if ce.Reason != reason {
			t.Fatalf("reason %s, want %s: %v", ce.Reason, reason, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("error lacks %q:\n%v", w, err)
			}
		}
		t.Log(err)
	}

	t.Run("missing context", func(t *testing.T) {
		_, err := cfg.Connect(ctx, kube.ClusterRef{Name: "c2", Context: "kind-c2"})
		check(t, err, kube.ReasonContextNotFound, "cluster c2: context kind-c2 not found in kubeconfig (contexts: kind-c1, kind-dead, kind-nobody)")
	})
	t.Run("unreachable API server", func(t *testing.T) {
		t0 := time.Now()
		_, err := cfg.Connect(ctx, kube.ClusterRef{Name: "c2", Context: "kind-dead"})
		check(t, err, kube.ReasonUnreachable, "cluster c2 (context kind-dead): API server "+dead+" unreachable: ", "connection refused")
		if d := time.Since(t0); d > 3*time.Second {
			t.Fatalf("took %v", d)
		}
	})
	t.Run("forbidden (RBAC)", func(t *testing.T) {
		c, err := cfg.Connect(ctx, kube.ClusterRef{Name: "c1", Context: "kind-nobody"})
		if err != nil {
			t.Fatal(err) // /version is open to every authenticated user
		}
		_, err = kube.Inventory(ctx, []*kube.Cluster{c}, []kube.Workload{{Namespace: "demo", Selector: "app=web"}})
		check(t, err, kube.ReasonForbidden, `cluster c1 (context kind-nobody): forbidden to list pods in namespace demo: `,
			`pods is forbidden: User "system:serviceaccount:demo:nobody" cannot list resource "pods"`)
		_, err = portforward.OpenTunnel(ctx, c, portforward.TunnelSpec{Resource: "svc/web", Port: "web"}) // namespace from the context
		check(t, err, kube.ReasonForbidden, "port-forward to demo/web in cluster c1", "forbidden to get service demo/web", `cannot get resource "services"`)
	})
	t.Run("namespace not found", func(t *testing.T) {
		_, err := kube.Inventory(ctx, []*kube.Cluster{d.c}, []kube.Workload{{Namespace: "nope", Selector: "app=web"}})
		check(t, err, kube.ReasonNotFound, `cluster c1 (context kind-c1): get namespace nope: namespaces "nope" not found`)
	})
}

// Inventory across three clusters with ready and not-ready pods and both
// version labels; then Watch sees scale-up, scale-down and a restart.
func TestLabInventoryAndWatch(t *testing.T) {
	lab := labtest.Clusters(t, "c1", "c2", "c3")
	d1 := newDemo(t, lab, "c1", "demo", 2, "version", "v1", false)
	d2 := newDemo(t, lab, "c2", "demo", 3, "app.kubernetes.io/version", "v2", false)
	d3 := newDemo(t, lab, "c3", "demo", 1, "version", "v3", false)
	// A pod of the workload that cannot be scheduled: Pending, not ready.
	lab.Apply(t, "c3", `apiVersion: v1
kind: Pod
metadata: {name: web-stuck, namespace: demo, labels: {app: stuck, tier: front, version: v3}}
spec:
  nodeSelector: {no-such: node}
  containers: [{name: app, image: web:v3}]
`)
	ctx := context.Background()
	clusters := []*kube.Cluster{d1.c, d2.c, d3.c}
	inv, err := kube.Inventory(ctx, clusters, []kube.Workload{{Namespace: "demo", Selector: "tier=front", Name: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.ReadyPods(); got["c1"] != 2 || got["c2"] != 3 || got["c3"] != 1 || len(got) != 3 {
		t.Fatalf("ready pods = %v", got)
	}
	want := map[string]string{"c1": "v1", "c2": "v2", "c3": "v3"}
	for _, p := range inv.Pods() {
		if p.Version != want[p.Cluster] || p.Workload != "web" || p.Namespace != "demo" {
			t.Errorf("pod %+v", p)
		}
		if c, ok := inv.ClusterOfPod(p.Name); !ok || c != p.Cluster {
			t.Errorf("ClusterOfPod(%s) = %s %v", p.Name, c, ok)
		}
		if p.Name == "web-stuck" {
			if p.Ready || p.Phase != "Pending" || p.Node != "" {
				t.Errorf("stuck pod %+v", p)
			}
		} else if !p.Ready || p.Phase != "Running" || p.Node != "node-1" || p.StartTime == nil || p.Restarts != 0 || len(p.Containers) != 1 {
			t.Errorf("running pod %+v", p)
		}
	}
	if n := len(inv.PodsIn("c3")); n != 2 {
		t.Fatalf("c3 has %d pods, want 2 (one stuck)", n)
	}
	if _, ok := inv.ClusterOfPod("web-unknown-pod"); ok {
		t.Fatal("an unknown pod name was resolved")
	}
	raw, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"version":"v2"`) || !strings.Contains(string(raw), `"context":"kind-c3"`) {
		t.Fatalf("report JSON: %s", raw)
	}

	// Watch.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu     sync.Mutex
		events []kube.Event
		done   = make(chan error, 1)
	)
	go func() {
		done <- inv.Watch(wctx, func(ev kube.Event) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		})
	}()
	count := func(typ kube.EventType, cluster string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, e := range events {
			if e.Type == typ && e.Pod.Cluster == cluster {
				n++
			}
		}
		return n
	}
	// No wait for the informers: pods added before they sync are reported
	// from their initial list, pods gone before it by reconciliation.
	t0 := time.Now()
	lab.Kubectl(t, "c1", "-n", "demo", "scale", "deploy/web", "--replicas=4")
	lab.Kubectl(t, "c2", "-n", "demo", "scale", "deploy/web", "--replicas=1")
	e2etest.Poll(t, 30*time.Second, "scale events", func() error {
		ready := inv.ReadyPods()
		if a, dl := count(kube.PodAdded, "c1"), count(kube.PodDeleted, "c2"); a != 2 || dl != 2 || ready["c1"] != 4 || ready["c2"] != 1 {
			return fmt.Errorf("c1 added %d, c2 deleted %d, ready %v", a, dl, ready)
		}
		return nil
	})
	t.Logf("scale up/down seen in %v", time.Since(t0).Round(time.Millisecond))
	mu.Lock()
	for _, e := range events {
		if e.Type == kube.PodDeleted {
			if c, ok := inv.ClusterOfPod(e.Pod.Name); !ok || c != "c2" || e.Pod.Deleted == nil {
				t.Errorf("deleted pod %s no longer maps to c2 (%s %v)", e.Pod.Name, c, ok)
			}
		}
	}
	mu.Unlock()

	// A restart: kwok's pods never restart on their own; bump the count in
	// the status as a kubelet would.
	pods, err := d3.c.Client.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("c3 web pods: %v %v", err, pods)
	}
	p := pods.Items[0]
	if len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s has no container status", p.Name)
	}
	p.Status.ContainerStatuses[0].RestartCount = 1
	if _, err := d3.c.Client.CoreV1().Pods("demo").UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e2etest.Poll(t, 10*time.Second, "restart event", func() error {
		if count(kube.PodRestarted, "c3") == 0 {
			return errors.New("none yet")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	summary := map[string]int{}
	for _, e := range events {
		summary[string(e.Type)+"@"+e.Pod.Cluster]++
	}
	t.Logf("events: %v", summary)
}

// The metrics path: the pod proxy cannot be used on the lab (kwok's pods
// have no network: the API server would proxy to a pod IP such as 10.0.0.1,
// which is not on this machine and must never be a target), so the parser
// and the client path are exercised on the API server's own /metrics (real
// Prometheus text from kube-apiserver).
func TestLabScrapeAPIServerMetrics(t *testing.T) {
	lab := labtest.Clusters(t, "c1")
	d := newDemo(t, lab, "c1", "demo", 1, "version", "v1", false)
	ctx := context.Background()
	scrape := func() *kube.Metrics {
		t.Helper()
		s, err := kube.ScrapePath(ctx, d.c, "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		return &kube.Metrics{Cluster: "c1", Namespace: "kube-system", Pod: "kube-apiserver", Samples: s}
	}
	match := map[string]string{"verb": "LIST", "resource": "pods", "code": "200"}
	before := scrape()
	if len(before.Samples) < 100 {
		t.Fatalf("only %d samples", len(before.Samples))
	}
	for range 7 {
		if _, err := d.c.Client.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	after := scrape()
	delta := kube.Delta([]*kube.Metrics{before}, []*kube.Metrics{after}, "apiserver_request_total", match)
	if len(delta) != 1 || delta[0].Delta < 7 || delta[0].Reset || delta[0].New {
		t.Fatalf("delta of apiserver_request_total%v = %+v, want >= 7", match, delta)
	}
	// A histogram flattened into _count: a counter-like series by name.
	if after.Sum("apiserver_request_duration_seconds_count", map[string]string{"verb": "LIST", "resource": "pods"}) < 7 {
		t.Fatalf("histogram _count missing; names include %v", after.Names()[:10])
	}
	t.Logf("%d samples; LIST pods grew by %v", len(after.Samples), delta[0].Delta)

	// The pod proxy itself is NOT called here: the API server would connect
	// to the kwok pod's made-up IP (10.0.0.x), an address off this machine.
	// Scrape refuses such pods; its proxy path is tested against a fake API
	// server in unit_test.go (TestScrapeThroughPodProxy).
}
