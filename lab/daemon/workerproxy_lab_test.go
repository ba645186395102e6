package daemon_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// oneClusterIstioWorkers is labtest.OneCluster with an Istio and a Kuma
// workers entry: the sidecars the lab gives an injected mesh-verify
// worker pod, as each mesh's injector decides.
const oneClusterIstioWorkers = labtest.OneCluster + `  - name: client-sidecar
    workers: true
    cluster: c1
    to: echo
    accessLog: istio
    mesh: istio
  - name: kuma-client-sidecar
    workers: true
    cluster: c1
    to: echo
    accessLog: kuma
    mesh: kuma
`

// An injected worker pod lives as one with Istio's sidecar does: its
// process gets MESH_VERIFY_SIDECAR_ADMIN, the pod stays Running after the
// worker exited until the proxy is asked to quit (a real proxy container
// keeps it, and the Job, running), then it succeeds and its planes are
// gone. A pod that opts out of injection gets no proxy and completes as
// soon as its process exits. Real parts: the lab's kube-apiserver and Job
// controller, the built binary as the pods' process, the daemon's admin
// endpoints over HTTP.
func TestInjectedWorkerPodWaitsForItsProxy(t *testing.T) {
	l, cs := jobsLabOf(t, oneClusterIstioWorkers)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	// `mesh-verify version` exits at once and never quits the proxy.
	create := func(name, inject string) {
		job := meshVerifyJob(name, 1, 2, []string{"version"})
		job.Spec.Template.Labels["sidecar.istio.io/inject"] = inject
		if _, err := cs.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("mv-injected", "true")
	create("mv-plain", "false")
	kuma := meshVerifyJob("mv-kuma", 1, 2, []string{"version"})
	kuma.Spec.Template.Annotations = map[string]string{"kuma.io/sidecar-injection": "enabled"}
	if _, err := cs.BatchV1().Jobs("default").Create(ctx, kuma, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Three Jobs' pods are created, scheduled and started by the lab's
	// real controllers: minutes, not seconds, on a loaded CI machine (it
	// once took more than one).
	waitFor(t, "Job mv-plain to complete", 3*time.Minute, func() (bool, string) {
		c, s := jobCondition(ctx, cs, "mv-plain")
		return c == batchv1.JobComplete, string(c) + " " + s
	})
	plain := jobStatus(t, l.Dir, jobPods(ctx, t, cs, "mv-plain")[0].Name)
	if plain.Sidecar != "" || plain.SidecarAdmin != "" || len(plain.Planes) != 0 {
		t.Errorf("a pod that opts out of injection got a proxy: %+v", plain)
	}

	pod := jobPods(ctx, t, cs, "mv-injected")[0]
	var j daemon.JobPod
	waitFor(t, "mv-injected's worker to exit", time.Minute, func() (bool, string) {
		j = jobStatus(t, l.Dir, pod.Name)
		return j.ExitCode != nil, "no exit code yet"
	})
	if j.Sidecar != "istio" || !strings.HasPrefix(j.SidecarAdmin, "127.0.0.1:") || j.SidecarQuit || len(j.Planes) != 1 ||
		j.Planes[0].Role != daemon.RoleWorker || j.Planes[0].App != "client-sidecar" || len(j.Planes[0].Backends) != 1 {
		t.Fatalf("the injected pod's record: %+v; want an istio sidecar with one plane to echo, not yet asked to quit", j)
	}
	// The worker has exited, its proxy has not: the pod runs on.
	if c, s := jobCondition(ctx, cs, "mv-injected"); c != "" {
		t.Fatalf("Job mv-injected ended %s (%s) while its proxy runs", c, s)
	}
	if p, err := cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("pod %s: %v %v, want Running while its proxy runs", pod.Name, p.Status.Phase, err)
	}
	readyThenQuit(ctx, t, cs, "mv-injected", j.SidecarAdmin, "/healthz/ready")
	j = jobStatus(t, l.Dir, pod.Name)
	if !j.SidecarQuit || !strings.Contains(readFile(j.SidecarLogFile), "quitquitquit: the proxy exits") {
		t.Errorf("after the quit: %+v, log %q", j, readFile(j.SidecarLogFile))
	}
	if _, err := http.Get("http://" + j.SidecarAdmin + "/healthz/ready"); err == nil {
		t.Errorf("the proxy's admin endpoint still answers after quitquitquit")
	}

	// Kuma's injector, asked by the pod's annotation: Envoy's admin paths.
	kpod := jobPods(ctx, t, cs, "mv-kuma")[0]
	var k daemon.JobPod
	waitFor(t, "mv-kuma's worker to exit", time.Minute, func() (bool, string) {
		k = jobStatus(t, l.Dir, kpod.Name)
		return k.ExitCode != nil, "no exit code yet"
	})
	if k.Sidecar != "kuma" || len(k.Planes) != 1 || k.Planes[0].App != "kuma-client-sidecar" || !strings.HasSuffix(k.SidecarLogFile, "_kuma-sidecar.log") {
		t.Fatalf("the kuma-injected pod's record: %+v; want a kuma sidecar with one plane", k)
	}
	readyThenQuit(ctx, t, cs, "mv-kuma", k.SidecarAdmin, "/ready")
}

// readyThenQuit checks the sidecar's readiness path answers 200, asks
// it to quit, and waits for the job to complete.
func readyThenQuit(ctx context.Context, t *testing.T, cs kubernetes.Interface, job, admin, ready string) {
	t.Helper()
	resp, err := http.Get("http://" + admin + ready)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: GET %s: %v %v, want 200", job, ready, resp, err)
	}
	resp.Body.Close()
	resp, err = http.Post("http://"+admin+"/quitquitquit", "", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: POST /quitquitquit: %v %v, want 200", job, resp, err)
	}
	resp.Body.Close()
	waitFor(t, "Job "+job+" to complete once its proxy quit", time.Minute, func() (bool, string) {
		c, s := jobCondition(ctx, cs, job)
		return c == batchv1.JobComplete, string(c) + " " + s
	})
}
