package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// jobsLab brings up the one-cluster lab with the built mesh-verify as its
// daemon (so Job pods run that binary); labtest.DaemonLab takes it down
// when the test ends and checks that no process of it is left.
func jobsLab(t *testing.T) (*lab.Lab, kubernetes.Interface) {
	t.Helper()
	return jobsLabOf(t, labtest.OneCluster)
}

// jobsLabOf is jobsLab with the topology given as lab.yaml's text.
func jobsLabOf(t *testing.T, topology string) (*lab.Lab, kubernetes.Interface) {
	t.Helper()
	l := labtest.DaemonLabOf(t, labtest.BuildMeshVerify(t, false), topology)
	cfg, err := daemon.RESTConfig(l.Kubeconfig, l.Context("c1"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l, cs
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// meshVerifyJob is an Indexed Job of mesh-verify's image as the
// coordinator creates it: n workers, none retried, the label the lab
// watches on the pod template.
func meshVerifyJob(name string, n int32, grace int64, args []string, env ...corev1.EnvVar) *batchv1.Job {
	indexed := batchv1.IndexedCompletion
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: batchv1.JobSpec{
			CompletionMode: &indexed, Completions: &n, Parallelism: &n, BackoffLimit: new(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{daemon.JobLabel: daemon.JobLabelValue, "run": name}},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					TerminationGracePeriodSeconds: &grace,
					NodeSelector:                  map[string]string{"type": "kwok"},
					Containers: []corev1.Container{{
						Name: "worker", Image: "ghcr.io/mesh-verify/mesh-verify:test",
						Command: []string{"/mesh-verify"}, Args: args, Env: env,
					}},
				},
			},
		},
	}
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s; last: %s", d, what, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func jobCondition(ctx context.Context, cs kubernetes.Interface, name string) (batchv1.JobConditionType, string) {
	j, err := cs.BatchV1().Jobs("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err.Error()
	}
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type, c.Reason
		}
	}
	return "", fmt.Sprintf("active %d, succeeded %d, failed %d", j.Status.Active, j.Status.Succeeded, j.Status.Failed)
}

func jobPods(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) []corev1.Pod {
	t.Helper()
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "run=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func jobStatus(t *testing.T, dir, pod string) daemon.JobPod {
	t.Helper()
	st, err := daemon.ReadStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range st.Jobs {
		if j.Name == pod {
			return j
		}
	}
	t.Fatalf("pod %s is not among the daemon's jobs: %+v", pod, st.Jobs)
	return daemon.JobPod{}
}

// Job pods of mesh-verify's image run as real processes of the built
// binary in the lab (lab/README.md, "mesh-verify's Job pods"); one lab
// serves every case.
func TestJobPodsRunTheBinary(t *testing.T) {
	l, cs := jobsLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var echoLog, gatewayLog string
	for _, p := range l.Status.Pods {
		switch p.Role {
		case daemon.RoleApp:
			echoLog = p.LogFile
		case daemon.RoleEntry:
			gatewayLog = p.LogFile
		}
	}

	// Three workers run `mesh-verify run` against the gateway Service by
	// its cluster DNS name: only $MESH_VERIFY_CONNECT_TO makes that name
	// reach the lab's gateway, and the header each sends carries its
	// JOB_COMPLETION_INDEX (the Job controller's fieldRef, expanded in
	// args as a kubelet does), which the echo app behind it logs.
	t.Run("indexed job completes through the lab's data plane", func(t *testing.T) {
		args := []string{"run", "url-split", "--out", "runs", "-q",
			"--set", "target.url=http://gateway.default.svc.cluster.local:8080/",
			"--set", "attack.rate=20/s", "--set", "attack.duration=1s",
			"--set", "attack.headers.X-Worker=idx-$(JOB_COMPLETION_INDEX)-end",
			"--set", "expect=[{successRate: {atLeast: 50%}}]"}
		job := meshVerifyJob("mv-ok", 3, 2, args, corev1.EnvVar{Name: "MY_POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
		if _, err := cs.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "Job mv-ok to finish", 2*time.Minute, func() (bool, string) {
			c, s := jobCondition(ctx, cs, "mv-ok")
			return c != "", s
		})
		if c, reason := jobCondition(ctx, cs, "mv-ok"); c != batchv1.JobComplete {
			t.Errorf("Job mv-ok ended %s (%s), want Complete\ndaemon log:\n%s", c, reason, readFile(filepath.Join(l.Dir, "daemon.log")))
		}
		pods := jobPods(ctx, t, cs, "mv-ok")
		if len(pods) != 3 {
			t.Fatalf("%d pods, want 3", len(pods))
		}
		echo := readFile(echoLog)
		for _, p := range pods {
			idx := p.Annotations[batchv1.JobCompletionIndexAnnotation]
			// The Job controller's own fieldRef, as the lab's real
			// kube-controller-manager (v1.36) writes it: the pod index
			// label (it sets the annotation too).
			var ref string
			for _, e := range p.Spec.Containers[0].Env {
				if e.Name == "JOB_COMPLETION_INDEX" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
					ref = e.ValueFrom.FieldRef.FieldPath
				}
			}
			if ref != "metadata.labels['batch.kubernetes.io/job-completion-index']" || p.Labels[batchv1.JobCompletionIndexAnnotation] != idx {
				t.Errorf("pod %s: JOB_COMPLETION_INDEX comes from %q", p.Name, ref)
			}
			cst := p.Status.ContainerStatuses
			if p.Status.Phase != corev1.PodSucceeded || len(cst) != 1 || cst[0].State.Terminated == nil || cst[0].State.Terminated.ExitCode != 0 {
				t.Errorf("pod %s (index %s): phase %s, containers %+v; want Succeeded, exit code 0", p.Name, idx, p.Status.Phase, cst)
			}
			logs, err := cs.CoreV1().Pods("default").GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil || !strings.Contains(string(logs), "VERDICT: PASS") {
				t.Errorf("kubectl logs %s: %v\n%s\nwant the run's verdict", p.Name, err, logs)
			}
			if want := "idx-" + idx + "-end"; idx == "" || !strings.Contains(echo, want) {
				t.Errorf("the echo app behind the gateway never logged worker %s's header %s", p.Name, want)
			}
			j := jobStatus(t, l.Dir, p.Name)
			if j.ConnectTo == 0 || j.ExitCode == nil || *j.ExitCode != 0 || j.PID == 0 || kwok.Alive(j.PID) {
				t.Errorf("daemon's record of %s: %+v; want connect-to entries, exit 0, a pid no longer running", p.Name, j)
			}
			if fi, err := os.Stat(filepath.Join(j.Dir, "kubeconfig")); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("kubeconfig of %s: %v %v; want mode 0600", p.Name, fi, err)
			}
		}
		if n := strings.Count(readFile(gatewayLog), "\n"); n == 0 {
			t.Errorf("the gateway's log is empty")
		}
		// The workers are no backends of any data plane.
		st, _ := daemon.ReadStatus(l.Dir)
		for _, p := range st.Pods {
			for _, b := range p.Backends {
				if strings.Contains(b, "mv-ok") {
					t.Errorf("pod %s routes to a Job pod: %v", p.Name, p.Backends)
				}
			}
		}
	})

	t.Run("a failing worker fails the job with its exit code", func(t *testing.T) {
		job := meshVerifyJob("mv-fail", 1, 2, []string{"validate", "/nonexistent/scenario.yaml"})
		if _, err := cs.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "Job mv-fail to finish", time.Minute, func() (bool, string) {
			c, s := jobCondition(ctx, cs, "mv-fail")
			return c != "", s
		})
		if c, reason := jobCondition(ctx, cs, "mv-fail"); c != batchv1.JobFailed {
			t.Errorf("Job mv-fail ended %s (%s), want Failed", c, reason)
		}
		pods := jobPods(ctx, t, cs, "mv-fail")
		if len(pods) != 1 {
			t.Fatalf("%d pods, want 1", len(pods))
		}
		p := pods[0]
		cst := p.Status.ContainerStatuses
		if p.Status.Phase != corev1.PodFailed || len(cst) != 1 || cst[0].State.Terminated == nil || cst[0].State.Terminated.ExitCode != 4 {
			t.Errorf("pod %s: phase %s, containers %+v; want Failed with validate's exit code 4", p.Name, p.Status.Phase, cst)
		}
		logs, err := cs.CoreV1().Pods("default").GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil || !strings.Contains(string(logs), "/nonexistent/scenario.yaml") {
			t.Errorf("kubectl logs %s: %v\n%s\nwant validate's error (stderr)", p.Name, err, logs)
		}
	})

	t.Run("an environment the lab cannot give fails the pod, saying why", func(t *testing.T) {
		job := meshVerifyJob("mv-secret", 1, 2, []string{"version"}, corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}})
		if _, err := cs.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "Job mv-secret to fail", time.Minute, func() (bool, string) {
			c, s := jobCondition(ctx, cs, "mv-secret")
			return c == batchv1.JobFailed, s
		})
		p := jobPods(ctx, t, cs, "mv-secret")[0]
		if p.Status.Phase != corev1.PodFailed || !strings.Contains(p.Status.Message, "env TOKEN: valueFrom.secretKeyRef is not supported by the lab") {
			t.Errorf("pod %s: phase %s, message %q", p.Name, p.Status.Phase, p.Status.Message)
		}
	})

	// A worker that blocks (port-forward, through the pod's own
	// kubeconfig) stops when its Job is deleted: SIGTERM to its process,
	// the pod reported and gone.
	t.Run("deleting the job stops a long-running worker", func(t *testing.T) {
		job := meshVerifyJob("mv-long", 1, 5, []string{"port-forward", "svc/gateway", ":8080"})
		if _, err := cs.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var pod corev1.Pod
		waitFor(t, "the worker's port-forward to listen", time.Minute, func() (bool, string) {
			pods := jobPods(ctx, t, cs, "mv-long")
			if len(pods) != 1 {
				return false, fmt.Sprintf("%d pods", len(pods))
			}
			pod = pods[0]
			logs, err := cs.CoreV1().Pods("default").GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			return err == nil && strings.Contains(string(logs), "Forwarding from 127.0.0.1:"), fmt.Sprintf("phase %s, logs %q %v", pod.Status.Phase, logs, err)
		})
		if pod.Status.Phase != corev1.PodRunning || !slices.ContainsFunc(pod.Status.ContainerStatuses, func(c corev1.ContainerStatus) bool { return c.Ready && c.State.Running != nil }) {
			t.Errorf("running worker %s: phase %s, containers %+v", pod.Name, pod.Status.Phase, pod.Status.ContainerStatuses)
		}
		j := jobStatus(t, l.Dir, pod.Name)
		if j.PID == 0 || !kwok.Alive(j.PID) {
			t.Fatalf("worker %s: process %d not running", pod.Name, j.PID)
		}
		deleted := time.Now()
		bg := metav1.DeletePropagationBackground
		if err := cs.BatchV1().Jobs("default").Delete(ctx, "mv-long", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the worker's process to end and its pod to go", 30*time.Second, func() (bool, string) {
			_, err := cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
			alive := kwok.Alive(j.PID)
			return apierrors.IsNotFound(err) && !alive, fmt.Sprintf("pod: %v, process %d alive %v", err, j.PID, alive)
		})
		// port-forward ends on SIGTERM: well before the 5 s grace period
		// (plus the garbage collector's and the watch's delays).
		if took := time.Since(deleted); took > 5*time.Second {
			t.Errorf("the worker took %v to go after its Job's deletion", took)
		}
		t.Logf("Job deleted → worker process ended and pod gone in %v", time.Since(deleted).Round(time.Millisecond))
	})

	// A worker still running when the lab goes down: `lab down` stops the
	// daemon, which stops it (jobsLab's cleanup checks its pid is gone).
	t.Run("lab down stops a running worker", func(t *testing.T) {
		job := meshVerifyJob("mv-stay", 1, 30, []string{"port-forward", "svc/gateway", ":8080"})
		if _, err := cs.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the worker to run", time.Minute, func() (bool, string) {
			st, err := daemon.ReadStatus(l.Dir)
			if err != nil {
				return false, err.Error()
			}
			for _, j := range st.Jobs {
				if strings.HasPrefix(j.Name, "mv-stay-") && j.PID != 0 && kwok.Alive(j.PID) {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", st.Jobs)
		})
	})
}
