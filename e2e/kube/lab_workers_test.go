package kube_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/internal/certtest"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/kube/access"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

const (
	workersNS       = "load"
	coordinatorUser = "system:serviceaccount:" + workersNS + ":" + access.DefaultServiceAccount
	workerUser      = "system:serviceaccount:" + workersNS + ":" + kube.DefaultWorkerServiceAccount
)

// connectAs connects to a lab cluster as user, impersonated by the lab's
// admin: the API server authorizes every call as that user's.
func connectAs(t *testing.T, lab *labtest.Lab, cluster, user string) *kube.Cluster {
	t.Helper()
	cfg, err := kube.LoadConfig(kube.Options{Kubeconfig: []string{lab.Kubeconfig}, Impersonate: user})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.Connect(context.Background(), kube.ClusterRef{Name: cluster, Context: lab.Context(cluster)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// can asks the API server's authorizer (a SubjectAccessReview, what
// kubectl auth can-i --as asks) whether user may verb resource in the
// workers' namespace.
func can(t *testing.T, admin *kube.Cluster, user, verb, group, resource string) bool {
	t.Helper()
	res, sub, _ := strings.Cut(resource, "/")
	r, err := kubernetes.NewForConfigOrDie(admin.REST).AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:serviceaccounts", "system:authenticated"},
			ResourceAttributes: &authzv1.ResourceAttributes{Namespace: workersNS, Verb: verb, Group: group, Resource: res, Subresource: sub}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

// newRunID is a run id of runner.NewRunID's form.
func newRunID(t *testing.T, suffix string) string {
	t.Helper()
	return time.Now().UTC().Format("20060102T150405Z") + "-" + suffix
}

func workerSpec(runID string, n int, deadline time.Duration) kube.WorkerSpec {
	return kube.WorkerSpec{
		RunID: runID, Namespace: workersNS, Workers: n, Image: "ghcr.io/mesh-verify/mesh-verify:test",
		Scenario:  []byte("apiVersion: mesh-verify.io/v1alpha1\nkind: Scenario\nmetadata: {name: w}\n"),
		Inventory: []byte(`[{"cluster":"c1","namespace":"demo","pod":"web-1","version":"v1"}]`),
		Run:       []byte(`{"runId":"` + runID + `","workers":` + fmt.Sprint(n) + `,"target":"http://web.demo.svc.cluster.local:80/","interval":"2s"}`),
		Deadline:  deadline,
	}
}

// TestLabWorkers runs the worker Job's life on a real kube-apiserver with
// the real Job controller and garbage collector of kube-controller-manager,
// as mesh-verify's ServiceAccount bound by exactly what Manifest generates
// for a distributed run (impersonated), so a call the manifest lacks fails
// here. kwok may move the pods to any phase on its own: nothing here
// depends on it.
func TestLabWorkers(t *testing.T) {
	lab := labtest.Clusters(t, "c1")
	admin := lab.Connect(t, "c1")
	ctx := context.Background()
	lab.Apply(t, "c1", labtest.Node("node-1"))
	lab.Apply(t, "c1", "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+workersNS+"}\n")

	// The manifest `mesh-verify rbac` prints for workers in load, applied
	// server-side.
	var manifest bytes.Buffer
	objs := access.Manifest(access.ManifestOptions{Namespace: workersNS, Needs: access.WorkerNeeds("c1", workersNS, 3)})
	if err := access.WriteManifest(&manifest, "workers", objs); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	out, err := lab.Lab.Kubectl(actx, "c1", manifest.Bytes(), "apply", "--server-side", "-f", "-")
	cancel()
	if err != nil {
		t.Fatalf("apply the generated manifest: %v: %s", err, out)
	}
	// RBAC reaches the authorizer through an informer.
	e2etest.Poll(t, 30*time.Second, "the generated bindings to take effect", func() error {
		if !can(t, admin, coordinatorUser, "create", "batch", "jobs") || !can(t, admin, workerUser, "watch", "", "configmaps") {
			return errors.New("not yet")
		}
		return nil
	})
	coord := connectAs(t, lab, "c1", coordinatorUser)

	t.Run("RBAC grants exactly the workers' calls", func(t *testing.T) {
		for _, tc := range []struct {
			user, verb, group, resource string
			want                        bool
		}{
			{coordinatorUser, "create", "batch", "jobs", true},
			{coordinatorUser, "get", "batch", "jobs", false},
			{coordinatorUser, "list", "batch", "jobs", true},
			{coordinatorUser, "watch", "batch", "jobs", false},
			{coordinatorUser, "patch", "batch", "jobs", true},
			{coordinatorUser, "delete", "batch", "jobs", true},
			{coordinatorUser, "create", "", "configmaps", true},
			{coordinatorUser, "get", "", "configmaps", false},
			{coordinatorUser, "list", "", "configmaps", true},
			{coordinatorUser, "watch", "", "configmaps", false},
			{coordinatorUser, "get", "", "serviceaccounts", true},
			{coordinatorUser, "patch", "", "configmaps", true},
			{coordinatorUser, "delete", "", "configmaps", true},
			{coordinatorUser, "list", "", "pods", true},
			{coordinatorUser, "watch", "", "pods", true},
			{coordinatorUser, "get", "", "pods/log", true},
			{coordinatorUser, "delete", "", "pods", false},
			{coordinatorUser, "create", "", "pods", false},
			{coordinatorUser, "update", "batch", "jobs", false},
			{coordinatorUser, "update", "batch", "jobs/status", false},
			{coordinatorUser, "get", "", "secrets", false},
			{coordinatorUser, "create", "", "secrets", true},
			{coordinatorUser, "list", "", "secrets", false},
			{coordinatorUser, "watch", "", "secrets", false},
			{coordinatorUser, "update", "", "secrets", false},
			{coordinatorUser, "create", "", "serviceaccounts", false},
			{workerUser, "get", "", "configmaps", true},
			{workerUser, "list", "", "configmaps", false},
			{workerUser, "watch", "", "configmaps", true},
			{workerUser, "patch", "", "configmaps", false},
			{workerUser, "create", "", "configmaps", false},
			{workerUser, "list", "", "pods", false},
			{workerUser, "get", "", "secrets", true},
			{workerUser, "list", "", "secrets", false},
			{workerUser, "watch", "", "secrets", false},
			{workerUser, "create", "", "secrets", false},
			{workerUser, "create", "batch", "jobs", false},
		} {
			if got := can(t, admin, tc.user, tc.verb, tc.group, tc.resource); got != tc.want {
				t.Errorf("%s may %s %s.%s in %s: %v, want %v", tc.user, tc.verb, tc.resource, tc.group, workersNS, got, tc.want)
			}
		}
	})

	t.Run("create, start, stop, pods, delete", func(t *testing.T) {
		runID := newRunID(t, "a1b2c3")
		spec := workerSpec(runID, 3, 90*time.Second)
		before := time.Now()
		w, err := coord.CreateWorkers(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Delete(context.Background()) })
		if w.Name != kube.WorkerName(runID) || w.Namespace != workersNS || w.Workers != 3 || w.JobUID == "" {
			t.Fatalf("WorkerRun %+v", w)
		}
		labels := map[string]string{"app.kubernetes.io/name": "mesh-verify", "app.kubernetes.io/component": "worker", "mesh-verify.io/run": runID}

		// Read back through the API, as the admin.
		job, err := admin.Client.BatchV1().Jobs(workersNS).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkJob(t, job, w.Name, labels, spec)
		expires, err := time.Parse(time.RFC3339, job.Annotations["mesh-verify.io/expires-at"])
		if err != nil || expires.Before(before.Add(spec.Deadline+kube.WorkerExpiryMargin)) || expires.After(time.Now().Add(spec.Deadline+kube.WorkerExpiryMargin+2*time.Second)) {
			t.Errorf("Job's expires-at %q (%v): want creation + deadline + margin", job.Annotations["mesh-verify.io/expires-at"], err)
		}
		cm, err := admin.Client.CoreV1().ConfigMaps(workersNS).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(cm.Labels, labels) || cm.Annotations["mesh-verify.io/expires-at"] != job.Annotations["mesh-verify.io/expires-at"] {
			t.Errorf("ConfigMap labels %v annotations %v", cm.Labels, cm.Annotations)
		}
		want := map[string]string{"inventory.json": string(spec.Inventory), "run.json": string(spec.Run)}
		if !maps.Equal(cm.Data, want) {
			t.Errorf("ConfigMap data %v, want %v", cm.Data, want)
		}
		if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != job.UID || cm.OwnerReferences[0].Kind != "Job" || cm.OwnerReferences[0].APIVersion != "batch/v1" {
			t.Errorf("ConfigMap owner references %+v: want the Job %s", cm.OwnerReferences, job.UID)
		}
		checkSecret(t, admin, job, labels, map[string]string{"scenario.yaml": string(spec.Scenario)})

		// The Job controller creates one pod per index, each with the
		// index in its env.
		var pods []corev1.Pod
		e2etest.Poll(t, 60*time.Second, "3 worker pods", func() error {
			list, err := admin.Client.CoreV1().Pods(workersNS).List(ctx, metav1.ListOptions{LabelSelector: "mesh-verify.io/run=" + runID})
			if err != nil {
				return err
			}
			pods = list.Items
			if len(pods) != 3 {
				return fmt.Errorf("%d pods", len(pods))
			}
			return nil
		})
		var indexes []string
		for _, p := range pods {
			indexes = append(indexes, p.Annotations["batch.kubernetes.io/job-completion-index"])
			for k, v := range labels {
				if p.Labels[k] != v {
					t.Errorf("pod %s: label %s=%q, want %q", p.Name, k, p.Labels[k], v)
				}
			}
			if p.Spec.ServiceAccountName != kube.DefaultWorkerServiceAccount {
				t.Errorf("pod %s runs as %q", p.Name, p.Spec.ServiceAccountName)
			}
			env := map[string]string{}
			for _, e := range p.Spec.Containers[0].Env {
				if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
					env[e.Name] = e.ValueFrom.FieldRef.FieldPath
				}
			}
			// The Job controller reads the index from the pod's label
			// (Kubernetes 1.28 on) or annotation.
			if ix := env["JOB_COMPLETION_INDEX"]; ix == "metadata.labels['batch.kubernetes.io/job-completion-index']" {
				env["JOB_COMPLETION_INDEX"] = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
			}
			wantEnv := map[string]string{"JOB_COMPLETION_INDEX": "metadata.annotations['batch.kubernetes.io/job-completion-index']",
				"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
			if !maps.Equal(env, wantEnv) {
				t.Errorf("pod %s: env from fields %v, want %v", p.Name, env, wantEnv)
			}
		}
		slices.Sort(indexes)
		if !slices.Equal(indexes, []string{"0", "1", "2"}) {
			t.Errorf("completion indexes %v, want 0, 1, 2", indexes)
		}
		e2etest.Poll(t, 30*time.Second, "the Job's status to count 3 pods", func() error {
			st, err := statusOf(ctx, admin, w)
			if err == nil && (st.Suspended || st.Active+st.Succeeded+st.Failed != 3) {
				err = fmt.Errorf("status %+v", st)
			}
			return err
		})
		wp, err := w.Pods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(wp) != 3 || wp[0].Index != 0 || wp[1].Index != 1 || wp[2].Index != 2 {
			t.Errorf("Pods: %+v, want indexes 0, 1, 2", wp)
		}
		for _, p := range wp {
			t.Logf("worker %d: pod %s phase %s state %q reason %q exit %d", p.Index, p.Name, p.Phase, p.State, p.Reason, p.ExitCode)
		}

		// The start and stop signals, read back; a worker (impersonated)
		// reads and watches its ConfigMap with its own ServiceAccount.
		worker := connectAs(t, lab, "c1", workerUser)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		seen, err := worker.Client.CoreV1().ConfigMaps(workersNS).Get(wctx, w.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the worker reads its ConfigMap: %v", err)
		}
		watcher, err := worker.Client.CoreV1().ConfigMaps(workersNS).Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=" + w.Name, ResourceVersion: seen.ResourceVersion})
		if err != nil {
			t.Fatalf("the worker watches its ConfigMap: %v", err)
		}
		defer watcher.Stop()
		at := time.Now().Add(1500 * time.Millisecond).Round(time.Nanosecond)
		if err := w.Start(ctx, at); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-watcher.ResultChan():
			got, ok := ev.Object.(*corev1.ConfigMap)
			if ev.Type != watch.Modified || !ok {
				t.Fatalf("the worker's watch saw %s %T", ev.Type, ev.Object)
			}
			start, err := time.Parse(time.RFC3339Nano, got.Annotations[kube.AnnotationStartAt])
			if err != nil || !start.Equal(at) {
				t.Errorf("start-at %q (%v), want %s", got.Annotations[kube.AnnotationStartAt], err, at.UTC().Format(time.RFC3339Nano))
			}
		case <-wctx.Done():
			t.Fatal("the worker's watch saw no start signal")
		}
		if err := w.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		cm, err = admin.Client.CoreV1().ConfigMaps(workersNS).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Annotations[kube.AnnotationStop] != "true" || cm.Annotations[kube.AnnotationStartAt] != at.UTC().Format(time.RFC3339Nano) {
			t.Errorf("annotations after Stop: %v", cm.Annotations)
		}

		// Delete: the Job goes, the garbage collector takes its pods and
		// the ConfigMap.
		if err := w.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		e2etest.Poll(t, 90*time.Second, "the Job, its pods and its ConfigMap to be gone", func() error {
			return gone(ctx, admin, w.Name, runID)
		})
		if err := w.Delete(ctx); err != nil {
			t.Errorf("deleting again: %v", err)
		}
	})

	// A scenario's attack.headers values and target.tls.ca travel in the
	// immutable Secret only: no ConfigMap event, from the creation to the
	// deletion, carries either; and a CA file holding a private key never
	// reaches the cluster at all.
	t.Run("secrets never in a ConfigMap", func(t *testing.T) {
		const token = "Bearer s3cr3t-token-9f8e7d"
		cert, key := certtest.Pair(t)
		list, err := admin.Client.CoreV1().ConfigMaps(workersNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		events, err := admin.Client.CoreV1().ConfigMaps(workersNS).Watch(wctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer events.Stop()

		keyed := workerSpec(newRunID(t, "cafe00"), 1, time.Minute)
		keyed.CA = append(slices.Clone(cert), key...)
		if _, err := coord.CreateWorkers(ctx, keyed); err == nil || !strings.Contains(err.Error(), "holds a private key") || strings.Contains(err.Error(), certtest.KeyLine(key)) {
			t.Fatalf("CreateWorkers with a key in the CA: %v; want a refusal that does not echo the key", err)
		}
		if _, err := admin.Client.BatchV1().Jobs(workersNS).Get(ctx, kube.WorkerName(keyed.RunID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the refused run's Job: %v, want not found", err)
		}

		spec := workerSpec(newRunID(t, "5ec4e7"), 1, time.Minute)
		spec.Scenario = append(slices.Clone(spec.Scenario), []byte("attack: {headers: {Authorization: ["+token+"]}}\n")...)
		spec.CA = cert
		w, job := createWorkers(t, coord, admin, spec)
		checkSecret(t, admin, job, map[string]string{"app.kubernetes.io/name": "mesh-verify", "app.kubernetes.io/component": "worker", "mesh-verify.io/run": spec.RunID},
			map[string]string{"scenario.yaml": string(spec.Scenario), "ca.pem": string(cert)})
		if err := w.Start(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := w.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		// Every event up to the ConfigMap's deletion by the garbage
		// collector.
		seen := 0
		for done := false; !done; {
			select {
			case ev, ok := <-events.ResultChan():
				if !ok {
					t.Fatalf("the watch ended after %d events of %s", seen, w.Name)
				}
				cm, isCM := ev.Object.(*corev1.ConfigMap)
				if !isCM {
					t.Fatalf("watch event %s %T", ev.Type, ev.Object)
				}
				raw, err := json.Marshal(cm)
				if err != nil {
					t.Fatal(err)
				}
				secrets := []string{token, "s3cr3t", "PRIVATE KEY", certtest.KeyLine(key)}
				if cm.Labels[kube.LabelName] == kube.LabelNameValue {
					// kube-root-ca.crt, in every namespace, holds certificates.
					secrets = append(secrets, "CERTIFICATE", "scenario.yaml", "ca.pem")
				}
				for _, secret := range secrets {
					if bytes.Contains(raw, []byte(secret)) {
						t.Errorf("ConfigMap %s, watch event %s, holds %q", cm.Name, ev.Type, secret)
					}
				}
				if cm.Name == w.Name {
					seen++
					done = ev.Type == watch.Deleted
				}
			case <-wctx.Done():
				t.Fatalf("no deletion of ConfigMap %s after %d events", w.Name, seen)
			}
		}
		if seen < 3 { // created, annotated, deleted
			t.Errorf("%d watch events of ConfigMap %s, want at least 3", seen, w.Name)
		}
		e2etest.Poll(t, 90*time.Second, "the Secret to go with its Job", func() error { return gone(ctx, admin, w.Name, spec.RunID) })
	})

	t.Run("the pod watch sees a worker die", func(t *testing.T) {
		w, err := coord.CreateWorkers(ctx, workerSpec(newRunID(t, "d1ed00"), 2, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Delete(context.Background()) })
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		snaps := make(chan []kube.WorkerPod, 1000)
		done := make(chan error, 1)
		go func() {
			done <- w.WatchPods(wctx, func(p []kube.WorkerPod) {
				select {
				case snaps <- slices.Clone(p):
				default: // the test stopped reading
				}
			})
		}()
		// next waits for a snapshot that satisfies ok.
		next := func(what string, ok func([]kube.WorkerPod) bool) []kube.WorkerPod {
			t.Helper()
			timeout := time.After(60 * time.Second)
			for {
				select {
				case p := <-snaps:
					if ok(p) {
						return p
					}
				case err := <-done:
					t.Fatalf("WatchPods ended while waiting for %s: %v", what, err)
				case <-timeout:
					t.Fatalf("the watch saw no %s", what)
				}
			}
		}
		pods := next("2 pods", func(p []kube.WorkerPod) bool { return len(p) == 2 && p[0].Index == 0 && p[1].Index == 1 })
		victim := pods[1].Name
		zero := int64(0)
		if err := admin.Client.CoreV1().Pods(workersNS).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		next("pod "+victim+" deleted", func(p []kube.WorkerPod) bool {
			return !slices.ContainsFunc(p, func(wp kube.WorkerPod) bool { return wp.Name == victim && !wp.Deleting })
		})
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("WatchPods after cancel: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("WatchPods did not return after its context ended")
		}
	})

	// The real kube-scheduler marks a pod no node can take Unschedulable;
	// the lab's kwok nodes pull no image, so an image that cannot be
	// pulled is written into the pod's status as the kubelet would
	// (waiting, ErrImagePull). Both reach WatchPods within seconds.
	t.Run("the pod watch sees pods that will not start", func(t *testing.T) {
		spec := workerSpec(newRunID(t, "5c4ed0"), 2, time.Minute)
		spec.Pod.NodeSelector = map[string]string{"mesh-verify.io/test": "no-such-node"}
		w, _ := createWorkers(t, coord, admin, spec)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		snaps := make(chan []kube.WorkerPod, 1000)
		go func() {
			_ = w.WatchPods(wctx, func(p []kube.WorkerPod) {
				select {
				case snaps <- slices.Clone(p):
				default:
				}
			})
		}()
		// within waits for a snapshot in which the pod of index 0 fails
		// to start for want, at most 30 s.
		within := func(want string) kube.WorkerPod {
			t.Helper()
			timeout := time.After(30 * time.Second)
			for {
				select {
				case ps := <-snaps:
					for _, p := range ps {
						if p.Index == 0 && p.StartFailure() == want {
							return p
						}
					}
				case <-timeout:
					t.Fatalf("no pod seen failing to start with %s within 30s", want)
				}
			}
		}
		start := time.Now()
		p := within("Unschedulable")
		t.Logf("Unschedulable seen after %s: %s", time.Since(start).Round(time.Millisecond), p.Message)
		if !p.Unschedulable || p.Reason != "Unschedulable" || p.Message == "" {
			t.Errorf("pod %+v: want the scheduler's reason and message", p)
		}
		msg := `Failed to pull image "` + spec.Image + `": not found`
		patch := `{"status":{"containerStatuses":[{"name":"worker","image":"` + spec.Image + `","imageID":"","ready":false,"restartCount":0,` +
			`"state":{"waiting":{"reason":"ErrImagePull","message":` + fmt.Sprintf("%q", msg) + `}}}]}}`
		if _, err := admin.Client.CoreV1().Pods(workersNS).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		p = within("ErrImagePull")
		t.Logf("ErrImagePull seen after %s", time.Since(start).Round(time.Millisecond))
		if p.Message != msg {
			t.Errorf("message %q, want %q", p.Message, msg)
		}
	})

	t.Run("sweep removes expired runs only", func(t *testing.T) {
		old, err := coord.CreateWorkers(ctx, workerSpec(newRunID(t, "0ld0ld"), 1, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		live, err := coord.CreateWorkers(ctx, workerSpec(newRunID(t, "11fe11"), 1, 2*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = old.Delete(context.Background()); _ = live.Delete(context.Background()) })
		// The same run id again: refused, and the first run's Job is kept.
		if _, err := coord.CreateWorkers(ctx, workerSpec(live.RunID, 1, time.Hour)); err == nil || !strings.Contains(err.Error(), "run id "+live.RunID+" was used before") {
			t.Errorf("a second run with run id %s: %v", live.RunID, err)
		}
		// The 1 s deadline ends the old run's Job (unless kwok completed its
		// pod first); Status says so while the pod is still terminating.
		e2etest.Poll(t, 30*time.Second, "the 1 s run's Job to end", func() error {
			st, err := statusOf(ctx, admin, old)
			if err == nil && (!st.Done || (!st.Complete && st.Reason != "DeadlineExceeded")) {
				err = fmt.Errorf("status %+v", st)
			}
			return err
		})
		// A labelled ConfigMap without expires-at is not known to be dead.
		unknown := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mv-unknown", Namespace: workersNS,
			Labels: map[string]string{"app.kubernetes.io/name": "mesh-verify", "app.kubernetes.io/component": "worker"}}}
		if _, err := admin.Client.CoreV1().ConfigMaps(workersNS).Create(ctx, unknown, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Before anything expired nothing goes.
		if deleted, err := coord.SweepWorkers(ctx, workersNS, time.Now()); err != nil || len(deleted) != 0 {
			t.Fatalf("sweep now: deleted %v, %v; want nothing", deleted, err)
		}
		// Half an hour on: the 1 s run's expiry (10 min margin) has passed,
		// the 2 h run's has not.
		deleted, err := coord.SweepWorkers(ctx, workersNS, time.Now().Add(30*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(deleted, "job/"+old.Name) || slices.ContainsFunc(deleted, func(s string) bool { return strings.HasSuffix(s, "/"+live.Name) || strings.HasSuffix(s, "/mv-unknown") }) {
			t.Errorf("sweep deleted %v: want job/%s and nothing of %s or mv-unknown", deleted, old.Name, live.Name)
		}
		e2etest.Poll(t, 90*time.Second, "the expired run to be gone", func() error { return gone(ctx, admin, old.Name, old.RunID) })
		if _, err := admin.Client.BatchV1().Jobs(workersNS).Get(ctx, live.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("the live run's Job: %v", err)
		}
		if _, err := admin.Client.CoreV1().ConfigMaps(workersNS).Get(ctx, live.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("the live run's ConfigMap: %v", err)
		}
		if _, err := admin.Client.CoreV1().ConfigMaps(workersNS).Get(ctx, "mv-unknown", metav1.GetOptions{}); err != nil {
			t.Errorf("the ConfigMap without expires-at: %v", err)
		}
	})

	t.Run("the scenario's pod template reaches the pods and stays restricted", func(t *testing.T) {
		runID := newRunID(t, "90d000")
		spec := workerSpec(runID, 2, time.Minute)
		secs := int64(30)
		spec.Pod = kube.WorkerPodTemplate{
			Labels:       map[string]string{"team": "load", "sidecar.istio.io/inject": "true"},
			Annotations:  map[string]string{"sidecar.istio.io/inject": "true", "kuma.io/sidecar-injection": "enabled"},
			NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "load", Effect: corev1.TaintEffectNoSchedule},
				{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
			ImagePullSecrets: []string{"regcred"},
			Sidecar:          kube.SidecarIstio,
		}
		_, job := createWorkers(t, coord, admin, spec)
		tpl := job.Spec.Template
		for k, v := range map[string]string{"team": "load", "sidecar.istio.io/inject": "true", "app.kubernetes.io/name": "mesh-verify", "mesh-verify.io/run": runID} {
			if tpl.Labels[k] != v {
				t.Errorf("pod template label %s=%q, want %q", k, tpl.Labels[k], v)
			}
		}
		for k, v := range spec.Pod.Annotations {
			if tpl.Annotations[k] != v {
				t.Errorf("pod template annotation %s=%q, want %q", k, tpl.Annotations[k], v)
			}
		}
		ps := tpl.Spec
		if !maps.Equal(ps.NodeSelector, spec.Pod.NodeSelector) {
			t.Errorf("nodeSelector %v, want %v", ps.NodeSelector, spec.Pod.NodeSelector)
		}
		if len(ps.Tolerations) != 2 || ps.Tolerations[0] != spec.Pod.Tolerations[0] || ps.Tolerations[1].TolerationSeconds == nil || *ps.Tolerations[1].TolerationSeconds != 30 {
			t.Errorf("tolerations %+v, want %+v", ps.Tolerations, spec.Pod.Tolerations)
		}
		if len(ps.ImagePullSecrets) != 1 || ps.ImagePullSecrets[0].Name != "regcred" {
			t.Errorf("imagePullSecrets %+v, want regcred", ps.ImagePullSecrets)
		}
		c := ps.Containers[0]
		// cpu named by the scenario: its request replaces the default's, the
		// default cpu limit goes; memory named: its limit replaces both.
		if got := c.Resources.Requests.Cpu().String(); got != "500m" {
			t.Errorf("cpu request %s, want 500m", got)
		}
		if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
			t.Errorf("cpu limit %s: want none (the scenario named cpu without a limit)", c.Resources.Limits.Cpu())
		}
		if _, ok := c.Resources.Requests[corev1.ResourceMemory]; ok || c.Resources.Limits.Memory().String() != "1Gi" {
			t.Errorf("memory %+v: want a limit of 1Gi and no default request", c.Resources)
		}
		if !slices.Equal(c.Args[len(c.Args)-2:], []string{"--sidecar", "istio"}) {
			t.Errorf("args %v: want --sidecar istio", c.Args)
		}

		// The real PodSecurity admission of the API server, level
		// restricted: a dry-run pod of the Job's template in a namespace
		// that enforces it (its default ServiceAccount: the pod is never
		// created).
		lab.Apply(t, "c1", "apiVersion: v1\nkind: Namespace\nmetadata: {name: restricted, labels: {pod-security.kubernetes.io/enforce: restricted}}\n")
		e2etest.Poll(t, 30*time.Second, "the default ServiceAccount of namespace restricted", func() error {
			_, err := admin.Client.CoreV1().ServiceAccounts("restricted").Get(ctx, "default", metav1.GetOptions{})
			return err
		})
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "restricted-check", Namespace: "restricted", Labels: tpl.Labels, Annotations: tpl.Annotations}, Spec: *ps.DeepCopy()}
		pod.Spec.ServiceAccountName = "default"
		if _, err := admin.Client.CoreV1().Pods("restricted").Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("the worker pod in a namespace enforcing PodSecurity restricted: %v", err)
		}
		// And the check can fail: the same pod with privilege escalation.
		yes := true
		pod.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = &yes
		if _, err := admin.Client.CoreV1().Pods("restricted").Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil || !strings.Contains(err.Error(), "restricted") {
			t.Fatalf("a privileged pod in the restricted namespace: %v, want a PodSecurity refusal", err)
		}
	})

	t.Run("the worker's own labels cannot be overridden", func(t *testing.T) {
		spec := workerSpec(newRunID(t, "0ab000"), 1, time.Minute)
		spec.Pod.Labels = map[string]string{"mesh-verify.io/run": "other"}
		if _, err := coord.CreateWorkers(ctx, spec); err == nil || !strings.Contains(err.Error(), "pod label mesh-verify.io/run: the worker's own label, not overridable") {
			t.Fatalf("CreateWorkers overriding the run label: %v", err)
		}
	})

	t.Run("a missing ServiceAccount is refused before the Job exists", func(t *testing.T) {
		runID := newRunID(t, "5a0000")
		spec := workerSpec(runID, 2, time.Minute)
		spec.ServiceAccount = "absent"
		_, err := coord.CreateWorkers(ctx, spec)
		if err == nil || !strings.Contains(err.Error(), "the workers' ServiceAccount does not exist: apply `mesh-verify rbac SCENARIO --cluster c1`") ||
			!strings.Contains(err.Error(), "get serviceaccounts absent in namespace "+workersNS) {
			t.Fatalf("CreateWorkers with ServiceAccount absent: %v", err)
		}
		if _, err := admin.Client.BatchV1().Jobs(workersNS).Get(ctx, kube.WorkerName(runID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the refused run's Job: %v, want not found", err)
		}
	})

	t.Run("a denied call names the verb, resource and namespace", func(t *testing.T) {
		if _, err := admin.Client.CoreV1().ServiceAccounts(workersNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		nobody := connectAs(t, lab, "c1", "system:serviceaccount:"+workersNS+":nobody")
		runID := newRunID(t, "dead00")
		_, err := nobody.CreateWorkers(ctx, workerSpec(runID, 2, time.Minute))
		var ce *kube.ClusterError
		if !errors.As(err, &ce) || ce.Reason != kube.ReasonForbidden || !kube.IsDenied(err) {
			t.Fatalf("CreateWorkers as an unbound ServiceAccount: %v, want a Forbidden *ClusterError", err)
		}
		for _, w := range []string{"cluster c1", "forbidden to get serviceaccounts mesh-verify-worker in namespace " + workersNS, `cannot get resource "serviceaccounts" in API group ""`} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not say %q", err, w)
			}
		}
		other := &kube.WorkerRun{Cluster: nobody, Namespace: workersNS, Name: kube.WorkerName(runID), RunID: runID}
		err = other.WatchPods(ctx, func([]kube.WorkerPod) { t.Error("WatchPods called fn after a denied list") })
		if !kube.IsDenied(err) || !strings.Contains(err.Error(), "forbidden to list pods of job "+other.Name+" in namespace "+workersNS) {
			t.Errorf("WatchPods as an unbound ServiceAccount: %v", err)
		}
		_, err = nobody.SweepWorkers(ctx, workersNS, time.Now())
		if !kube.IsDenied(err) || !strings.Contains(err.Error(), "forbidden to list jobs.batch in namespace "+workersNS) {
			t.Errorf("SweepWorkers as an unbound ServiceAccount: %v", err)
		}
	})
}

// gone reports what is left of a run: its Job, its pods or its ConfigMap.
func gone(ctx context.Context, admin *kube.Cluster, name, runID string) error {
	if _, err := admin.Client.BatchV1().Jobs(workersNS).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("Job %s: %v", name, err)
	}
	pods, err := admin.Client.CoreV1().Pods(workersNS).List(ctx, metav1.ListOptions{LabelSelector: "mesh-verify.io/run=" + runID})
	if err != nil || len(pods.Items) > 0 {
		return fmt.Errorf("%d pods left (%v)", len(pods.Items), err)
	}
	if _, err := admin.Client.CoreV1().ConfigMaps(workersNS).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("ConfigMap %s: %v", name, err)
	}
	if _, err := admin.Client.CoreV1().Secrets(workersNS).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("Secret %s: %v", name, err)
	}
	return nil
}

// checkSecret checks the workers' Secret as the API server stored it:
// immutable, labelled like the Job, owned by it, holding data exactly.
func checkSecret(t *testing.T, admin *kube.Cluster, job *batchv1.Job, labels, data map[string]string) {
	t.Helper()
	sec, err := admin.Client.CoreV1().Secrets(workersNS).Get(context.Background(), job.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the workers' Secret: %v", err)
	}
	if sec.Immutable == nil || !*sec.Immutable || sec.Type != corev1.SecretTypeOpaque {
		t.Errorf("Secret %s: immutable %v, type %s; want an immutable Opaque Secret", sec.Name, sec.Immutable, sec.Type)
	}
	if !maps.Equal(sec.Labels, labels) || sec.Annotations["mesh-verify.io/expires-at"] != job.Annotations["mesh-verify.io/expires-at"] {
		t.Errorf("Secret labels %v annotations %v", sec.Labels, sec.Annotations)
	}
	if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != job.UID || sec.OwnerReferences[0].Kind != "Job" || sec.OwnerReferences[0].APIVersion != "batch/v1" {
		t.Errorf("Secret owner references %+v: want the Job %s", sec.OwnerReferences, job.UID)
	}
	got := map[string]string{}
	for k, v := range sec.Data {
		got[k] = string(v)
	}
	if !maps.Equal(got, data) {
		t.Errorf("Secret data %v, want %v", got, data)
	}
}

// checkJob checks every field CreateWorkers promises, on the Job the API
// server stored.
func checkJob(t *testing.T, job *batchv1.Job, name string, labels map[string]string, spec kube.WorkerSpec) {
	t.Helper()
	js := job.Spec
	i32 := func(p *int32) string {
		if p == nil {
			return "nil"
		}
		return fmt.Sprint(*p)
	}
	i64 := func(p *int64) string {
		if p == nil {
			return "nil"
		}
		return fmt.Sprint(*p)
	}
	b := func(p *bool) string {
		if p == nil {
			return "nil"
		}
		return fmt.Sprint(*p)
	}
	mode := "nil"
	if js.CompletionMode != nil {
		mode = string(*js.CompletionMode)
	}
	n := fmt.Sprint(spec.Workers)
	for _, c := range []struct{ what, got, want string }{
		{"completionMode", mode, "Indexed"},
		{"completions", i32(js.Completions), n},
		{"parallelism", i32(js.Parallelism), n},
		{"backoffLimitPerIndex", i32(js.BackoffLimitPerIndex), "0"},
		{"backoffLimit", i32(js.BackoffLimit), n},
		{"ttlSecondsAfterFinished", i32(js.TTLSecondsAfterFinished), "300"},
		{"activeDeadlineSeconds", i64(js.ActiveDeadlineSeconds), fmt.Sprint(int64(spec.Deadline / time.Second))},
		{"suspend (resumed once the ConfigMap exists)", b(js.Suspend), "false"},
	} {
		if c.got != c.want {
			t.Errorf("Job %s: %s %s, want %s", name, c.what, c.got, c.want)
		}
	}
	if !maps.Equal(job.Labels, labels) {
		t.Errorf("Job labels %v, want %v", job.Labels, labels)
	}
	for k, v := range labels {
		if job.Spec.Template.Labels[k] != v {
			t.Errorf("pod template label %s=%q, want %q", k, job.Spec.Template.Labels[k], v)
		}
	}
	ps := job.Spec.Template.Spec
	if ps.RestartPolicy != corev1.RestartPolicyNever || ps.ServiceAccountName != kube.DefaultWorkerServiceAccount || b(ps.AutomountServiceAccountToken) != "true" {
		t.Errorf("pod spec: restartPolicy %s, serviceAccountName %s, automount %s", ps.RestartPolicy, ps.ServiceAccountName, b(ps.AutomountServiceAccountToken))
	}
	if sc := ps.SecurityContext; sc == nil || b(sc.RunAsNonRoot) != "true" || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v: want runAsNonRoot and seccomp RuntimeDefault", sc)
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%d containers", len(ps.Containers))
	}
	c := ps.Containers[0]
	if c.Image != spec.Image || !slices.Equal(c.Args, []string{"worker", "--configmap", name, "--namespace", workersNS}) || len(c.Command) != 0 {
		t.Errorf("container image %s command %v args %v", c.Image, c.Command, c.Args)
	}
	if sc := c.SecurityContext; sc == nil || b(sc.ReadOnlyRootFilesystem) != "true" || b(sc.AllowPrivilegeEscalation) != "false" ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context %+v: want a read-only root, no privilege escalation, ALL capabilities dropped", sc)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() ||
		c.Resources.Limits.Memory().Cmp(*c.Resources.Requests.Memory()) < 0 {
		t.Errorf("container resources %+v: want requests and a memory limit above them", c.Resources)
	}
}

// statusOf reads a worker Job's status as the admin: the coordinator's
// Role has no get on jobs.
func statusOf(ctx context.Context, admin *kube.Cluster, w *kube.WorkerRun) (kube.WorkerJobStatus, error) {
	job, err := admin.Client.BatchV1().Jobs(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		return kube.WorkerJobStatus{}, err
	}
	if job.UID != w.JobUID {
		return kube.WorkerJobStatus{}, fmt.Errorf("job %s replaced (uid %s, created as %s)", w.Name, job.UID, w.JobUID)
	}
	return kube.JobStatus(job), nil
}

// createWorkers creates a run's workers as the coordinator, deleted when
// the test ends, and reads their Job back as the admin.
func createWorkers(t *testing.T, coord, admin *kube.Cluster, spec kube.WorkerSpec) (*kube.WorkerRun, *batchv1.Job) {
	t.Helper()
	ctx := context.Background()
	w, err := coord.CreateWorkers(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Delete(context.Background()) })
	job, err := admin.Client.BatchV1().Jobs(workersNS).Get(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return w, job
}
