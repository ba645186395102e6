// Package runner_test holds runner's tests against the lab's real API
// servers (the lab is a module of its own: lab/go.mod).
package runner_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
	"github.com/mesh-verify/mesh-verify/measure"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

const helloworldYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: helloworld-%[1]s, namespace: default}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: helloworld, version: %[1]s}}
  template:
    metadata: {labels: {app: helloworld, version: %[1]s}}
    spec:
      containers: [{name: helloworld, image: helloworld:%[1]s}]
`

// runningPods waits for n running pods of app=helloworld in a cluster.
func runningPods(t *testing.T, c *kube.Cluster, n int) []string {
	t.Helper()
	var names []string
	deadline := time.Now().Add(90 * time.Second)
	for {
		list, err := c.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=helloworld"})
		names = names[:0]
		if err == nil {
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					names = append(names, p.Name)
				}
			}
		}
		if len(names) == n {
			return names
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d running helloworld pods in %s after 90s (%v)", len(names), c.Name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Istio's helloworld names its pod, never its cluster: the inventory of
// the observed pods, listed through the lab's real API servers, says
// which cluster each is in; a pod it does not know stays unattributed,
// with a warning. The answers come from a real HTTP server standing in for
// the mesh (kwok pods run no app).
func TestPodToClusterThroughTheInventory(t *testing.T) {
	lab := labtest.Clusters(t, "c1", "c2")
	pods := map[string]string{}
	for i, cl := range []string{"c1", "c2"} {
		lab.Apply(t, cl, labtest.Node("node-1"))
		c := lab.Connect(t, cl)
		deadline := time.Now().Add(60 * time.Second)
		for {
			// The default ServiceAccount comes about 2 s after the API server.
			if _, err := c.Client.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{}); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no default ServiceAccount")
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Two pods in c1, one in c2: kwok gives pod IPs from the same
		// range in every cluster, so one address is shared, one is not.
		version := fmt.Sprintf("v%d", i+1)
		lab.Apply(t, cl, fmt.Sprintf(helloworldYAML, version, 2-i))
		pods[cl] = runningPods(t, c, 2-i)[0]
	}
	// Three answers in four from a c1 pod, one from c2's, every 50th from
	// a pod of no observed workload.
	ts := server(t, func(n int64, w http.ResponseWriter) {
		pod, version := pods["c1"], "v1"
		switch {
		case n%50 == 0:
			pod, version = "helloworld-v3-5d8f6c7b9-zzzzz", "v3"
		case n%4 == 0:
			pod, version = pods["c2"], "v2"
		}
		fmt.Fprintf(w, "Hello version: %s, instance: %s\n", version, pod)
	})
	sc := parse(t, fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: helloworld}
clusters: [{name: c1, context: %s}, {name: c2, context: %s}]
target: {url: %q}
attack: {rate: 400/s, requests: 400}
attribution: {preset: istio-helloworld}
statistics: {margin: 10%%}
observe:
  - {name: helloworld, selector: app=helloworld}
expect:
  - split: {weights: {c1: 75, c2: 25}}
`, lab.Context("c1"), lab.Context("c2"), ts.URL))
	rep, err := runner.Run(context.Background(), sc, runner.Options{Kubeconfig: []string{lab.Kubeconfig}})
	if rep == nil {
		t.Fatalf("no report: %v", err)
	}
	byCluster := map[string]int64{}
	var unattributed int64
	for _, d := range rep.Dimensions {
		if d.Name == "cluster" && d.Source == "body" {
			unattributed = d.Unattributed
			for _, b := range d.Buckets {
				byCluster[b.Name] = b.Count
			}
		}
	}
	// What the server answered, request by request.
	var c1, c2, unknown int64
	for n := int64(1); n <= 400; n++ {
		switch {
		case n%50 == 0:
			unknown++
		case n%4 == 0:
			c2++
		default:
			c1++
		}
	}
	if byCluster["c1"] != c1 || byCluster["c2"] != c2 || unattributed != unknown {
		t.Errorf("clusters %v, unattributed %d; want c1 %d, c2 %d, %d unattributed", byCluster, unattributed, c1, c2, unknown)
	}
	// The same inventory maps an access log's upstream address to its pod,
	// by the rule every run applies (measure.PodIndex, OnlyPod: an address
	// of several pods names none); runner TestPodByAddress has the local
	// run's lookup over the live inventory.
	var clusters []*kube.Cluster
	for _, cl := range []string{"c1", "c2"} {
		clusters = append(clusters, lab.Connect(t, cl))
	}
	inv, err := kube.Inventory(context.Background(), clusters, []kube.Workload{{Namespace: "default", Selector: "app=helloworld", Name: "helloworld"}})
	if err != nil {
		t.Fatal(err)
	}
	index := measure.NewPodIndex(inv.Pods())
	shared, unique := 0, 0
	for _, p := range inv.Pods() {
		n := 0
		for _, o := range inv.Pods() {
			if o.IP == p.IP {
				n++
			}
		}
		got, ok := index.ByAddress(p.IP + ":8080")
		switch {
		case p.IP == "":
			t.Errorf("pod %s has no IP", p.Name)
		case n > 1:
			// Pod IPs repeat across clusters: the address names no pod.
			shared++
			if ok {
				t.Errorf("address %s of %d pods resolved to %+v", p.IP, n, got)
			}
		default:
			unique++
			if !ok || got.Cluster != p.Cluster || got.Pod != p.Name || got.Version != p.Version {
				t.Errorf("address %s of %s resolved to %+v, %v", p.IP, p.Key(), got, ok)
			}
		}
	}
	if shared == 0 || unique == 0 {
		t.Errorf("%d pods with a shared address, %d with their own: the test cannot tell both", shared, unique)
	}
	if _, ok := index.ByAddress("192.0.2.1:80"); ok {
		t.Error("an address no pod has resolved")
	}
	warned := false
	for _, w := range rep.Warnings {
		warned = warned || strings.Contains(w, "helloworld-v3-5d8f6c7b9-zzzzz") && strings.Contains(w, "not in the inventory")
	}
	if !warned || rep.ExitCode != exitcode.Pass || rep.Expectation[0].Verdict != assert.Pass {
		t.Errorf("warnings %q, exit %d, %s: %s", rep.Warnings, rep.ExitCode, rep.Expectation[0].Verdict, rep.Expectation[0].Reason)
	}
}

// server answers every request with answer(n) for the n-th request, on a
// real HTTP server on loopback.
func server(t *testing.T, answer func(n int64, w http.ResponseWriter)) *httptest.Server {
	var n atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answer(n.Add(1), w) }))
	t.Cleanup(ts.Close)
	return ts
}

func parse(t *testing.T, src string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}
