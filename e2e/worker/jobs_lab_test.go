package worker_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/mesh-verify/mesh-verify/fleet"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
	"github.com/mesh-verify/mesh-verify/worker"
)

// The whole path a worker pod takes, on the lab: an Indexed Job of
// mesh-verify's image whose pods the lab daemon runs as processes of the
// built binary (lab/README.md, "mesh-verify's Job pods"), with the
// Job controller's JOB_COMPLETION_INDEX, the downward API's pod name and
// namespace, the pod's kubeconfig, and the gateway Service reached by its
// in-cluster name through the daemon's connect-to list. The records are
// read from the pods' logs through the API server, as the coordinator
// will, and merged.
func TestLabWorkerJob(t *testing.T) {
	l := labtest.DaemonLab(t, buildBinary(t))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg, err := kube.LoadConfig(kube.Options{Kubeconfig: []string{l.Kubeconfig}})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cfg.Connect(ctx, kube.ClusterRef{Name: "c1", Context: l.Context("c1")})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := kube.Inventory(ctx, []*kube.Cluster{cl}, []kube.Workload{{Namespace: "default", Selector: "app=echo", Name: "echo"}})
	if err != nil {
		t.Fatal(err)
	}
	pods := inv.Pods()
	if len(pods) == 0 {
		t.Fatal("no echo pod in the lab")
	}

	const run = "run-job"
	sc := `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: job}
clusters: [{name: c1, context: kind-c1}]
target: {portForward: {cluster: c1, resource: svc/gateway, port: "8080"}}
attack: {rate: 20/s, duration: 3s, workers: 2}
attribution: {preset: istio-echo}
expect:
  - successRate: {atLeast: 99%}
`
	parsed, err := scenarios.Parse("job.yaml", []byte(sc))
	if err != nil {
		t.Fatal(err)
	}
	target, err := parsed.InClusterURL()
	if err != nil {
		t.Fatal(err)
	}
	data, err := worker.RunData([]byte(sc), pods, worker.RunConfig{RunID: run, Workers: 2, Target: target, Interval: "1s"})
	if err != nil {
		t.Fatal(err)
	}
	api := cl.Client
	// The pods run as the workers' ServiceAccount, which `mesh-verify
	// rbac` creates; the API server refuses pods of a missing one.
	if _, err := api.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: parsed.Attack.ServiceAccount}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Job and ConfigMap as the coordinator creates them (kube/workers.go).
	wr, err := cl.CreateWorkers(ctx, kube.WorkerSpec{
		RunID: run, Namespace: "default", Workers: 2, Image: parsed.Attack.WorkerImage("test"), ServiceAccount: parsed.Attack.ServiceAccount,
		Scenario: []byte(data[worker.KeyScenario]), Inventory: []byte(data[worker.KeyInventory]), Run: []byte(data[worker.KeyRun]),
		Deadline: 5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	name := wr.Name
	if target != "http://gateway.default.svc.cluster.local:8080/" {
		t.Fatalf("in-cluster URL %s", target)
	}

	// Follow each pod's log once it runs; records go to one channel.
	type got struct {
		rec fleet.Record
		err error
	}
	records := make(chan got, 1000)
	following := map[string]bool{}
	for ready := 0; ready < 2; {
		list, err := api.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "mesh-verify.io/run=" + run})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			if following[p.Name] || p.Status.Phase != corev1.PodRunning {
				continue
			}
			following[p.Name] = true
			// Running comes from kwok's stages; the log is readable once the
			// lab daemon has started the worker and applied the pod's kwok
			// Logs object, a moment later (kwok answers "no logs found"
			// until then), as a real kubelet's log may lag the phase.
			var stream io.ReadCloser
			var lastErr error
			// The stream outlives the poll: it is opened with the test's
			// context, not the poll's, which ends when the poll returns.
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				stream, lastErr = api.CoreV1().Pods("default").GetLogs(p.Name, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
				return lastErr == nil, nil
			})
			if err != nil {
				t.Fatalf("logs of %s: %v (%v)", p.Name, lastErr, err)
			}
			go func() {
				defer stream.Close()
				dec := fleet.NewDecoder(stream)
				for {
					rec, err := dec.Next()
					if err != nil {
						if !errors.Is(err, io.EOF) && ctx.Err() == nil {
							records <- got{err: err}
						}
						return
					}
					records <- got{rec: rec}
				}
			}()
		}
		select {
		case g := <-records:
			if g.err != nil {
				t.Fatal(g.err)
			}
			if g.rec.Kind != fleet.KindReady {
				t.Fatalf("first record %+v, want ready", g.rec)
			}
			ready++
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("the workers did not get ready: following %v", following)
		}
	}
	startAt := time.Now().Add(1500 * time.Millisecond).UTC()
	if err := wr.Start(ctx, startAt); err != nil {
		t.Fatal(err)
	}
	m := fleet.NewMerger(startAt)
	workers := map[int]string{}
	for finals := 0; finals < 2; {
		select {
		case g := <-records:
			if g.err != nil {
				t.Fatal(g.err)
			}
			if g.rec.Kind == fleet.KindError {
				t.Fatalf("worker %d: %s", g.rec.Worker, g.rec.Error)
			}
			if _, err := m.Add(g.rec); err != nil {
				t.Fatal(err)
			}
			workers[g.rec.Worker] = g.rec.Pod
			if g.rec.Kind == fleet.KindFinal {
				finals++
			}
		case <-ctx.Done():
			t.Fatalf("no final records from both workers: %+v", m.Workers())
		}
	}
	if len(workers) != 2 || !strings.HasPrefix(workers[0], name+"-0-") || !strings.HasPrefix(workers[1], name+"-1-") {
		t.Errorf("workers %v: want indices 0 and 1 with their pods' names", workers)
	}
	snap := m.Snapshot()
	var successes int64
	oc := snap.Dimensions["outcome"]
	for i, b := range oc.Buckets {
		if b == "success" {
			successes = oc.N[i]
		}
	}
	if snap.Total < 58 || snap.Total > 62 || successes != snap.Total {
		t.Errorf("%d requests, %d answered: want 60 (20/s for 3s), all answered; errors %v", snap.Total, successes, snap.Errors)
	}
	names := map[string]bool{}
	for _, p := range pods {
		names[p.Name] = true
	}
	var served int64
	pd := snap.Dimensions["pod"]
	for i, b := range pd.Buckets {
		if b = tally.PodName(b, snap.PodClusters[b]); !names[b] {
			t.Errorf("pod %q is none of the echo pods %v", b, slices.Sorted(maps.Keys(names)))
		}
		served += pd.N[i]
	}
	if served != snap.Total {
		t.Errorf("the echo pods served %d of %d requests", served, snap.Total)
	}
	// Both pods exit 0, so the Job succeeds.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		job, err := api.BatchV1().Jobs(wr.Namespace).Get(ctx, wr.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := kube.JobStatus(job)
		if st.Complete && st.Succeeded == 2 {
			break
		}
		if st.Failed > 0 || st.Done && !st.Complete || time.Now().After(deadline) {
			t.Fatalf("job status %+v", st)
		}
	}
}
