package runner_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/kube/kclient"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
	"github.com/mesh-verify/mesh-verify/runner"
)

// faultyAPI sits between --wait-ready and a lab's real kube-apiserver and
// spoils pod lists on demand. A proxy is the stand-in here because a real
// API server cannot be told to answer 503 a given number of times, or to
// accept a request and never answer it.
type faultyAPI struct {
	fail  atomic.Int64 // pod lists still to answer with this code (count)
	code  atomic.Int64
	hang  atomic.Bool
	lists atomic.Int64
}

func (f *faultyAPI) serve(t *testing.T, c *kube.Cluster) *kube.Cluster {
	t.Helper()
	up, err := url.Parse(c.REST.Host)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rest.TransportFor(c.REST)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(up)
	proxy.Transport = tr
	done := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/pods") {
			f.lists.Add(1)
			if f.hang.Load() {
				select {
				case <-r.Context().Done():
				case <-done:
				}
				return
			}
			if f.fail.Add(-1) >= 0 {
				code := int(f.code.Load())
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(code)
				reason, msg := "ServiceUnavailable", "injected: the server is restarting"
				if code == http.StatusForbidden {
					reason, msg = "Forbidden", `pods is forbidden: User \"ci\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\"`
				}
				fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"%s","reason":%q,"code":%d}`, msg, reason, code)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(done); ts.Close() })
	client, err := kclient.NewForConfig(&rest.Config{Host: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	return &kube.Cluster{Name: c.Name, Context: c.Context, Server: ts.URL, REST: &rest.Config{Host: ts.URL}, Client: client}
}

// --wait-ready polls a real API server through faults: a busy or restarting
// one is asked again until the deadline, one that never answers cannot
// hold the gate past it, and a denial ends the wait at once.
func TestWaitReadyThroughAPIFaults(t *testing.T) {
	lab := labtest.Clusters(t, "c1")
	lab.Apply(t, "c1", labtest.Node("node-1"))
	cfg, err := kube.LoadConfig(kube.Options{Kubeconfig: []string{lab.Kubeconfig}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.Connect(context.Background(), kube.ClusterRef{Name: "c1", Context: lab.Context("c1")})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := c.Client.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no default ServiceAccount")
		}
	}
	lab.Apply(t, "c1", fmt.Sprintf(helloworldYAML, "v1", 1))
	runningPods(t, c, 1)
	sc := parse(t, fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: ready}
clusters: [{name: c1, context: %s}]
target: {url: "http://127.0.0.1:9/"}
attack: {rate: 10/s, requests: 10}
attribution: {preset: istio-helloworld}
observe:
  - {name: helloworld, selector: app=helloworld}
expect:
  - split: {weights: {c1: 100}}
`, lab.Context("c1")))

	wait := func(f *faultyAPI, within time.Duration) (time.Duration, error) {
		t.Helper()
		clusters := map[string]*kube.Cluster{"c1": f.serve(t, c)}
		got := make(chan error, 1)
		start := time.Now()
		go func() { got <- runner.WaitReady(context.Background(), sc, clusters, within, nil) }()
		select {
		case err := <-got:
			return time.Since(start), err
		case <-time.After(within + 20*time.Second):
			t.Fatalf("--wait-ready %s still waiting after %s", within, time.Since(start))
			return 0, nil
		}
	}

	t.Run("503s are retried until the pods are seen ready", func(t *testing.T) {
		f := &faultyAPI{}
		f.code.Store(503)
		f.fail.Store(3)
		_, err := wait(f, 30*time.Second)
		if err != nil {
			t.Fatalf("wait-ready: %v", err)
		}
		if n := f.lists.Load(); n < 4 {
			t.Errorf("%d pod lists, want the 3 refused ones and one more", n)
		}
	})
	t.Run("a server that never answers is bounded by the wait", func(t *testing.T) {
		f := &faultyAPI{}
		f.hang.Store(true)
		took, err := wait(f, time.Second)
		if err == nil || !strings.Contains(err.Error(), "did not answer") {
			t.Fatalf("wait-ready: %v, want an error saying the API server did not answer", err)
		}
		if took > time.Second+runner.ReadyPollMin+2*time.Second {
			t.Errorf("took %s for a 1s wait", took)
		}
	})
	t.Run("a denial is not waited out", func(t *testing.T) {
		f := &faultyAPI{}
		f.code.Store(403)
		f.fail.Store(1 << 30)
		took, err := wait(f, 30*time.Second)
		if !apierrors.IsForbidden(err) {
			t.Fatalf("wait-ready: %v, want the denial", err)
		}
		if took > 5*time.Second || f.lists.Load() != 1 {
			t.Errorf("took %s and %d lists: a denial was retried", took, f.lists.Load())
		}
	})
}
