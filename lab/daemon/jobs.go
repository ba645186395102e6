package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/lab/crilog"
	"github.com/mesh-verify/mesh-verify/worker"
)

// mesh-verify's own Job pods (lab/README.md, "mesh-verify's Job pods"): a
// pod labelled JobLabel=JobLabelValue whose container runs mesh-verify's
// image gets a real process of the daemon's own executable — the built
// mesh-verify — with the container's arguments and environment, its
// output in the container's log, and the pod's phase set from its exit
// code, so the Job controller of the lab's real kube-controller-manager
// counts it. The daemon plays the kubelet for these pods from start to
// deletion; kwok's stages leave them alone (lab/kwok/stages.yaml) except
// pod-ready, which makes them Running (and gives them their pod IP) before
// the process starts.

// The label the daemon watches and the image it runs.
const (
	JobLabel      = kube.LabelName
	JobLabelValue = kube.LabelNameValue
	// JobImage is the last path element of the image repository
	// (ghcr.io/mesh-verify/mesh-verify:v0.1.0) a container must run.
	JobImage = "mesh-verify"
)

const (
	// jobDefaultGrace is Kubernetes' default terminationGracePeriodSeconds.
	jobDefaultGrace = 30 * time.Second
	// jobStopGrace bounds the grace a stopping daemon gives the processes:
	// `lab down` kills the daemon 10 s after its SIGTERM.
	jobStopGrace = 7 * time.Second
	// jobLogChunk is where a long output line is split into partial (P)
	// records, as container runtimes do (16 KiB).
	jobLogChunk = 16 << 10
	// jobOutputDrain bounds the wait for the output pipes after the
	// process exited (a grandchild that kept them was killed with the group).
	jobOutputDrain = 5 * time.Second
	// jobDirName holds each Job pod's working directory in the lab dir.
	jobDirName = "jobs"
)

// Container state reasons the daemon reports, as a kubelet does.
const (
	reasonCompleted   = "Completed"
	reasonError       = "Error"
	reasonConfigError = "CreateContainerConfigError"
	reasonStartError  = "StartError"
	// reasonDaemonGone: a previous daemon ran the process, which died with it.
	reasonDaemonGone = "LabDaemonStopped"
)

// jobRT is one Job pod's process.
type jobRT struct {
	ref       podRef
	uid       types.UID
	pod       *corev1.Pod
	container string
	cmd       *exec.Cmd // nil when the pod failed before a process started
	dir       string
	// proxy is the pod's outbound data planes and injected sidecar
	// (workerproxy.go), nil when no workers entry applies to it.
	proxy *workerProxy

	mu       sync.Mutex
	exited   bool // the process exited: its pid must not be signalled any more
	deleting bool // the pod has a deletionTimestamp: delete it once the process ended
	stopping bool // the daemon stops: the next daemon reports the pod
	termOnce sync.Once
	done     chan struct{} // closed when the process ended and the pod was reported

	status JobPod // guarded by Daemon.mu
}

// isJobImage reports whether an image's repository ends in /mesh-verify
// (or is mesh-verify), whatever its registry, tag or digest.
func isJobImage(image string) bool {
	repo, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	return repo[strings.LastIndexByte(repo, '/')+1:] == JobImage
}

// jobContainer is the index of the pod's first container running
// mesh-verify's image, -1 if none does.
func jobContainer(pod *corev1.Pod) int {
	return slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return isJobImage(c.Image) })
}

func jobGrace(pod *corev1.Pod) time.Duration {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return jobDefaultGrace
}

// jobDir is the pod's working directory; the uid keeps a pod recreated
// under the same name apart, and its existence tells a new daemon that a
// previous one started the pod.
func (d *Daemon) jobDir(ref podRef, uid types.UID) string {
	return filepath.Join(d.cfg.Dir, jobDirName, ref.cluster, ref.namespace+"_"+ref.name+"_"+string(uid))
}

func (d *Daemon) processNextJob(ctx context.Context) bool {
	ref, shutdown := d.jobQueue.Get()
	if shutdown {
		return false
	}
	defer d.jobQueue.Done(ref)
	if err := d.syncJob(ctx, ref); err != nil {
		if ctx.Err() != nil {
			return true
		}
		d.log.Error("job pod sync failed; retrying", "pod", ref.String(), "err", err)
		d.jobQueue.AddRateLimited(ref)
		return true
	}
	d.jobQueue.Forget(ref)
	return true
}

// syncJob plays the kubelet for one Job pod: start its process once
// kwok made it Running, stop it when the pod is deleted.
func (d *Daemon) syncJob(ctx context.Context, ref podRef) error {
	pod, err := d.jobListers[ref.cluster].Pods(ref.namespace).Get(ref.name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get pod %s/%s from the cache of cluster %s: %w", ref.namespace, ref.name, ref.cluster, err)
	}
	if err != nil {
		pod = nil
	}
	d.mu.Lock()
	rt := d.jobs[ref]
	d.mu.Unlock()
	if rt != nil && (pod == nil || pod.UID != rt.uid) {
		// Gone without a grace period of its own (force-deleted), or
		// replaced: its process gets the pod's grace period.
		d.retireJob(rt, time.Now().Add(jobGrace(rt.pod)))
		rt = nil
	}
	if pod == nil {
		return nil
	}
	if pod.DeletionTimestamp != nil {
		if rt != nil && !rt.finished() {
			rt.mu.Lock()
			rt.deleting = true
			rt.mu.Unlock()
			d.log.Info("job pod deleted: SIGTERM to its process", "pod", ref.String(), "pid", rt.cmd.Process.Pid)
			d.killJob(rt, pod.DeletionTimestamp.Add(-drainMargin))
			if rt.proxy != nil {
				rt.proxy.stop(d) // the sidecar goes with the pod
			}
			return nil
		}
		if pod.Spec.NodeName != "" {
			return d.clusters[ref.cluster].deleteNow(ctx, pod) // nothing of it runs
		}
		return nil
	}
	if rt != nil || pod.Spec.NodeName == "" || pod.Status.Phase != corev1.PodRunning {
		return nil
	}
	return d.startJob(ctx, ref, pod)
}

func (rt *jobRT) finished() bool {
	select {
	case <-rt.done:
		return true
	default:
		return false
	}
}

// retireJob stops a job whose pod is gone and forgets it once ended,
// removing its directory (it holds the lab's credentials).
func (d *Daemon) retireJob(rt *jobRT, deadline time.Time) {
	d.mu.Lock()
	if d.jobs[rt.ref] == rt {
		delete(d.jobs, rt.ref)
	}
	d.dying[rt] = true
	d.mu.Unlock()
	d.killJob(rt, deadline)
	if rt.proxy != nil {
		rt.proxy.stop(d)
	}
	go func() {
		<-rt.done
		d.mu.Lock()
		delete(d.dying, rt)
		d.mu.Unlock()
		if err := os.RemoveAll(rt.dir); err != nil {
			d.log.Warn("remove job pod directory", "dir", rt.dir, "err", err)
		}
		d.markDirty()
	}()
}

// killJob sends the process group SIGTERM (once) and SIGKILL at deadline
// unless it ended before.
func (d *Daemon) killJob(rt *jobRT, deadline time.Time) {
	if rt.cmd == nil {
		return
	}
	rt.termOnce.Do(func() { rt.signal(syscall.SIGTERM) })
	go func() {
		t := time.NewTimer(max(time.Until(deadline), 0))
		defer t.Stop()
		select {
		case <-rt.done:
			return
		case <-t.C:
		}
		if rt.signal(syscall.SIGKILL) {
			d.log.Warn("job pod's process outlived its grace period: SIGKILL", "pod", rt.ref.String(), "pid", rt.cmd.Process.Pid)
		}
	}()
}

// signal signals the process's group while the process has not exited
// (waitJob keeps it unreaped until it sets exited, so the id is still
// the group's).
func (rt *jobRT) signal(sig syscall.Signal) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.exited {
		return false
	}
	return syscall.Kill(-rt.cmd.Process.Pid, sig) == nil
}

// startJob runs the pod's mesh-verify container as a process.
func (d *Daemon) startJob(ctx context.Context, ref podRef, pod *corev1.Pod) error {
	dir := d.jobDir(ref, pod.UID)
	rt := &jobRT{ref: ref, uid: pod.UID, pod: pod, dir: dir, done: make(chan struct{}),
		status: JobPod{Cluster: ref.cluster, Namespace: ref.namespace, Name: ref.name, Dir: dir}}
	fail := func(reason, msg string) error {
		d.log.Warn("job pod failed before its process started", "pod", ref.String(), "reason", reason, "message", msg)
		return d.failJob(ctx, rt, reason, msg)
	}
	i := jobContainer(pod)
	if i < 0 {
		images := make([]string, len(pod.Spec.Containers))
		for j, c := range pod.Spec.Containers {
			images[j] = c.Image
		}
		return fail(reasonConfigError, fmt.Sprintf("the lab runs pods labelled %s=%s only as mesh-verify: no container's image is .../%s (images: %s)",
			JobLabel, JobLabelValue, JobImage, strings.Join(images, ", ")))
	}
	c := &pod.Spec.Containers[i]
	rt.container, rt.status.Container = c.Name, c.Name
	rt.status.LogFile = d.logFile(ref, c.Name)
	if _, err := os.Stat(dir); err == nil {
		return fail(reasonDaemonGone, "the lab daemon that ran this pod's process stopped, and the process with it")
	}
	if d.exeErr != nil {
		return fail(reasonStartError, "the lab runs this pod as mesh-verify: "+d.exeErr.Error())
	}
	podEnv, err := jobEnv(pod, c)
	if err != nil {
		return fail(reasonConfigError, err.Error())
	}
	wp, err := d.startWorkerProxy(ctx, ref, pod)
	if err != nil {
		return fail(reasonConfigError, err.Error())
	}
	rt.proxy = wp
	own := map[[2]string]string{}
	if wp != nil {
		for _, prt := range wp.planes {
			e := prt.plane.entry
			own[[2]string{e.Namespace, e.To}] = prt.plane.dp.Addr()
		}
	}
	// Until the process runs, a failure stops the planes with the pod.
	started := false
	defer func() {
		if !started && wp != nil {
			wp.stop(d)
		}
	}()
	connectTo, n, err := d.connectTo(ctx, ref.cluster, ref.namespace, own)
	if err != nil {
		return fail(reasonConfigError, err.Error())
	}
	rt.status.ConnectTo = n
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("job pod %s: %w", ref, err)
	}
	// An error returned from here on is retried by the work queue: the
	// directory goes with it (its kubeconfig too), or the retry would
	// take it for a stopped daemon's pod.
	retry := func(err error) error {
		_ = os.RemoveAll(dir)
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := d.writeJobKubeconfig(kubeconfig, ref.cluster, ref.namespace); err != nil {
		return fail(reasonConfigError, err.Error())
	}
	// What the process sees: a few variables of the daemon's, the lab's
	// stand-ins for the ServiceAccount and cluster DNS, then the
	// container's own (which win, as they would in the image).
	env := map[string]string{"KUBECONFIG": kubeconfig, attack.ConnectToEnv: connectTo}
	var order []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
			order = append(order, k)
		}
	}
	order = append(order, "KUBECONFIG", attack.ConnectToEnv)
	if wp != nil && wp.addr != "" {
		env[worker.SidecarAdminEnv] = wp.addr
		order = append(order, worker.SidecarAdminEnv)
	}
	for _, kv := range podEnv {
		if _, seen := env[kv[0]]; !seen {
			order = append(order, kv[0])
		}
		env[kv[0]] = expandVars(kv[1], env)
	}
	var args []string
	if len(c.Command) > 0 {
		args = append(args, c.Command[1:]...) // Command[0] is the image's binary: this one
	}
	args = append(args, c.Args...)
	for j := range args {
		args[j] = expandVars(args[j], env)
	}
	log, err := crilog.Open(rt.status.LogFile)
	if err != nil {
		return retry(fmt.Errorf("job pod %s: %w", ref, err))
	}
	if err := d.clusters[ref.cluster].applyKwok(ctx, pod, []containerLog{{c.Name, rt.status.LogFile}}, nil); err != nil {
		log.Close()
		return retry(err)
	}
	cmd := exec.Command(d.exe, args...)
	cmd.Dir = dir
	for _, k := range order {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	cmd.SysProcAttr = jobSysProcAttr()
	outR, outW, err := os.Pipe()
	if err != nil {
		log.Close()
		return retry(fmt.Errorf("job pod %s: %w", ref, err))
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		log.Close()
		outR.Close()
		outW.Close()
		return retry(fmt.Errorf("job pod %s: %w", ref, err))
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close() // the child has its copies; EOF comes when it (and its group) is gone
	errW.Close()
	if err != nil {
		log.Close()
		outR.Close()
		errR.Close()
		return fail(reasonStartError, fmt.Sprintf("start %s: %v", d.exe, err))
	}
	rt.cmd = cmd
	started = true
	rt.status.PID, rt.status.Args, rt.status.Started = cmd.Process.Pid, args, time.Now()
	d.mu.Lock()
	d.jobs[ref] = rt
	d.mu.Unlock()
	d.markDirty()
	d.log.Info("job pod started", "pod", ref.String(), "pid", cmd.Process.Pid, "args", args, "connectTo", n)
	go d.waitJob(rt, log, outR, errR)
	return nil
}

// waitJob copies the process's output to the container log until it
// exits, kills what is left of its group (a container ends with its main
// process), then reports the pod's end.
func (d *Daemon) waitJob(rt *jobRT, log *crilog.Log, outR, errR *os.File) {
	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); log.Copy(outR, crilog.Stdout, jobLogChunk) }()
	go func() { defer copies.Done(); log.Copy(errR, crilog.Stderr, jobLogChunk) }()
	pid := rt.cmd.Process.Pid
	if waitExitedNoReap(pid) {
		rt.mu.Lock()
		_ = syscall.Kill(-pid, syscall.SIGKILL) // its group's stragglers; the zombie keeps the id ours
		rt.exited = true
		rt.mu.Unlock()
	}
	_ = rt.cmd.Wait()
	rt.mu.Lock()
	rt.exited = true
	stopping := rt.stopping
	rt.mu.Unlock()
	drained := make(chan struct{})
	go func() { copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(jobOutputDrain):
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()
	_ = log.Close()
	code := exitCode(rt.cmd.ProcessState)
	finished := time.Now()
	d.mu.Lock()
	rt.status.ExitCode, rt.status.Finished = &code, &finished
	d.mu.Unlock()
	d.markDirty()
	d.log.Info("job pod's process exited", "pod", rt.ref.String(), "pid", pid, "exitCode", code)
	if wp := rt.proxy; wp != nil {
		if wp.flavor != "" && !stopping {
			// An injected sidecar keeps the pod running until it exits:
			// the worker asks it to (quitquitquit), or the pod is deleted.
			d.log.Info("job pod's worker exited; its sidecar runs until asked to quit", "pod", rt.ref.String(), "sidecar", wp.flavor)
			<-wp.stopped
		}
		wp.stop(d)
	}
	rt.mu.Lock()
	stopping, deleting := rt.stopping, rt.deleting
	rt.mu.Unlock()
	if !stopping {
		reason := reasonCompleted
		if code != 0 {
			reason = reasonError
		}
		ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
		err := d.clusters[rt.ref.cluster].reportJob(ctx, rt.pod, rt.container, code, reason, "", rt.status.Started, finished, deleting)
		cancel()
		if err != nil {
			d.log.Error("report job pod", "pod", rt.ref.String(), "err", err)
		}
	}
	close(rt.done)
	d.jobQueue.Add(rt.ref)
}

// exitCode is the container's exit code: the process's, or 128+signal
// when a signal ended it, as container runtimes report.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// failJob reports a pod whose process could not start as failed, with
// the reason in its status; the Job controller counts it as a failure.
func (d *Daemon) failJob(ctx context.Context, rt *jobRT, reason, msg string) error {
	code := 128
	now := time.Now()
	rt.status.ExitCode, rt.status.Finished, rt.status.Error = &code, &now, msg
	if err := d.clusters[rt.ref.cluster].reportJob(ctx, rt.pod, rt.container, code, reason, msg, now, now, false); err != nil {
		return err
	}
	close(rt.done)
	d.mu.Lock()
	d.jobs[rt.ref] = rt
	d.mu.Unlock()
	d.markDirty()
	return nil
}

// reportJob sets the pod's containers terminated (container gets code
// and reason, any other container 0) and its phase Succeeded or Failed,
// then, for a deleted pod, deletes it with grace 0. Both are tied to the
// pod's uid.
func (c *Cluster) reportJob(ctx context.Context, pod *corev1.Pod, container string, code int, reason, msg string, started, finished time.Time, del bool) error {
	phase, condReason := corev1.PodSucceeded, "PodCompleted"
	if code != 0 {
		phase, condReason = corev1.PodFailed, "PodFailed"
	}
	var statuses []map[string]any
	for _, ct := range pod.Spec.Containers {
		term := map[string]any{"exitCode": 0, "reason": reasonCompleted,
			"startedAt": metav1.NewTime(started), "finishedAt": metav1.NewTime(finished)}
		if ct.Name == container || container == "" {
			term["exitCode"], term["reason"] = code, reason
			if msg != "" {
				term["message"] = msg
			}
		}
		statuses = append(statuses, map[string]any{
			"name": ct.Name, "image": ct.Image, "ready": false, "started": false, "restartCount": 0,
			"state": map[string]any{"terminated": term},
		})
	}
	now := metav1.Now()
	st := map[string]any{
		"phase":             phase,
		"containerStatuses": statuses,
		"conditions": []map[string]any{
			{"type": string(corev1.PodReady), "status": string(corev1.ConditionFalse), "lastTransitionTime": now, "reason": condReason},
			{"type": string(corev1.ContainersReady), "status": string(corev1.ConditionFalse), "lastTransitionTime": now, "reason": condReason},
		},
	}
	if msg != "" {
		st["reason"], st["message"] = reason, msg
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID}, "status": st})
	if err != nil {
		return fmt.Errorf("encode status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	_, err = c.cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}, "status")
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone or replaced meanwhile
	}
	if err != nil {
		return fmt.Errorf("report job pod %s/%s in cluster %s %s (exit code %d): %w", pod.Namespace, pod.Name, c.Name, phase, code, err)
	}
	if del {
		return c.deleteNow(ctx, pod)
	}
	return nil
}

// stopJobs ends every process on the daemon's stop: SIGTERM, SIGKILL
// after the pod's grace period (at most jobStopGrace). The pods are not
// reported: the clusters usually go with the lab, and a new daemon
// reports a pod whose process it did not start as failed.
func (d *Daemon) stopJobs() {
	d.mu.Lock()
	var all []*jobRT
	for _, rt := range d.jobs {
		all = append(all, rt)
	}
	for rt := range d.dying {
		all = append(all, rt)
	}
	d.mu.Unlock()
	for _, rt := range all {
		rt.mu.Lock()
		rt.stopping = true
		rt.mu.Unlock()
		d.killJob(rt, time.Now().Add(min(jobGrace(rt.pod), jobStopGrace)))
		if rt.proxy != nil {
			rt.proxy.stop(d)
		}
	}
	for _, rt := range all {
		select {
		case <-rt.done:
		case <-time.After(jobStopGrace + jobOutputDrain + time.Second):
			d.log.Error("job pod's process did not end after SIGKILL", "pod", rt.ref.String())
		}
	}
}

// jobEnv resolves the container's environment: literal values, and the
// pod fields a Downward API fieldRef may name. Anything else (Secrets,
// ConfigMaps, resource fields, envFrom) the lab cannot provide: an error
// that fails the pod, naming the variable.
func jobEnv(pod *corev1.Pod, c *corev1.Container) ([][2]string, error) {
	if len(c.EnvFrom) > 0 {
		return nil, fmt.Errorf("container %s: envFrom is not supported by the lab (only env with value or valueFrom.fieldRef)", c.Name)
	}
	var out [][2]string
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			out = append(out, [2]string{e.Name, e.Value})
			continue
		}
		if e.ValueFrom.FieldRef == nil {
			kind := "secretKeyRef"
			switch {
			case e.ValueFrom.ConfigMapKeyRef != nil:
				kind = "configMapKeyRef"
			case e.ValueFrom.ResourceFieldRef != nil:
				kind = "resourceFieldRef"
			case e.ValueFrom.SecretKeyRef == nil:
				kind = "this valueFrom"
			}
			return nil, fmt.Errorf("container %s: env %s: valueFrom.%s is not supported by the lab (only value and valueFrom.fieldRef)", c.Name, e.Name, kind)
		}
		v, err := podField(pod, e.ValueFrom.FieldRef.FieldPath)
		if err != nil {
			return nil, fmt.Errorf("container %s: env %s: %w", c.Name, e.Name, err)
		}
		out = append(out, [2]string{e.Name, v})
	}
	return out, nil
}

// podField is the value of a Downward API field path.
func podField(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		rest, ok := strings.CutPrefix(path, prefix+"['")
		if !ok {
			continue
		}
		key, ok := strings.CutSuffix(rest, "']")
		if !ok || key == "" {
			break
		}
		return m[key], nil // a missing key is "", as the kubelet gives
	}
	return "", fmt.Errorf("valueFrom.fieldRef.fieldPath %q is not supported by the lab (metadata.name, metadata.namespace, metadata.uid, metadata.labels['KEY'], metadata.annotations['KEY'], spec.nodeName, status.podIP)", path)
}

// expandVars expands $(NAME) from vars as Kubernetes does in command,
// args and env values: $$ is a literal $, an undefined $(NAME) stays as
// written.
func expandVars(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				name := s[i+2 : i+2+end]
				if v, ok := vars[name]; ok {
					b.WriteString(v)
				} else {
					b.WriteString(s[i : i+3+end])
				}
				i += 2 + end
				continue
			}
		}
		b.WriteByte('$')
	}
	return b.String()
}

// connectTo maps every Service of the cluster to where a client in that
// cluster enters the mesh: the running pods of the gateway entry behind
// the Service (each pod's data plane), else the Service's ready app pods
// (their sidecar if they have one). Names: svc (for the pod's own
// namespace only, as cluster DNS resolves it), svc.ns, svc.ns.svc and
// svc.ns.svc.cluster.local, each with every TCP port of the Service.
// own maps a Service (namespace, name) to the pod's own outbound data
// plane, which replaces every other candidate (workerproxy.go).
// It is worked out once, when the process starts.
func (d *Daemon) connectTo(ctx context.Context, cluster, podNamespace string, own map[[2]string]string) (string, int, error) {
	svcs, err := d.clusters[cluster].cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", 0, fmt.Errorf("list Services of cluster %s for %s: %w", cluster, attack.ConnectToEnv, err)
	}
	type key struct{ ns, name string }
	entries, apps := map[key][]string{}, map[key][]string{}
	topo := d.cfg.Topology
	d.mu.Lock()
	for _, rt := range d.pods {
		if rt.status.Cluster != cluster || rt.status.Terminating {
			continue
		}
		switch {
		case rt.status.Role == RoleEntry && rt.plane != nil:
			if e := topo.Entry(rt.status.App); e != nil && e.Gateway() {
				k := key{e.Namespace, e.Service}
				entries[k] = append(entries[k], rt.plane.dp.Addr())
			}
		case rt.status.Role == RoleApp && rt.server != nil && rt.status.Ready:
			if a := topo.App(rt.status.App); a != nil {
				// Every Service whose selector picks the pod: Flagger's
				// apex reaches the primary's pods, not the canary's.
				for _, s := range topo.Services {
					if topo.SelectedBy(a, s.Namespace, s.Name) {
						k := key{s.Namespace, s.Name}
						apps[k] = append(apps[k], rt.inboundAddr())
					}
				}
			}
		}
	}
	d.mu.Unlock()
	slices.SortFunc(svcs.Items, func(a, b corev1.Service) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	var items []string
	for _, s := range svcs.Items {
		k := key{s.Namespace, s.Name}
		addrs := entries[k]
		if len(addrs) == 0 {
			addrs = apps[k]
		}
		if a, ok := own[[2]string{s.Namespace, s.Name}]; ok {
			addrs = []string{a}
		}
		if len(addrs) == 0 {
			continue
		}
		slices.Sort(addrs)
		names := []string{s.Name + "." + s.Namespace, s.Name + "." + s.Namespace + ".svc", s.Name + "." + s.Namespace + ".svc.cluster.local"}
		if s.Namespace == podNamespace {
			names = append([]string{s.Name}, names...)
		}
		for _, p := range s.Spec.Ports {
			if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
				continue
			}
			for _, n := range names {
				for _, a := range addrs {
					host, port, err := net.SplitHostPort(a)
					if err != nil {
						return "", 0, fmt.Errorf("%s: address %q of Service %s/%s: %w", attack.ConnectToEnv, a, s.Namespace, s.Name, err)
					}
					items = append(items, n+":"+strconv.Itoa(int(p.Port))+":"+host+":"+port)
				}
			}
		}
	}
	list := strings.Join(items, ",")
	// The consumer's own parser and limits: a list it would refuse fails
	// the pod here, with the reason.
	if _, err := attack.ParseConnectTo(list); err != nil {
		return "", 0, fmt.Errorf("%s for cluster %s: %w", attack.ConnectToEnv, cluster, err)
	}
	return list, len(items), nil
}

// writeJobKubeconfig writes the lab's stand-in for the pod's
// ServiceAccount: the lab kubeconfig cut down to the pod's cluster, its
// namespace the pod's, readable by the owner only.
func (d *Daemon) writeJobKubeconfig(path, cluster, namespace string) error {
	cfg, err := clientcmd.LoadFromFile(d.cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig for a job pod in cluster %s: %w", cluster, err)
	}
	if err := clientcmd.ResolveLocalPaths(cfg); err != nil {
		return fmt.Errorf("kubeconfig for a job pod in cluster %s: %w", cluster, err)
	}
	name := d.clusters[cluster].Context
	kc := cfg.Contexts[name]
	if kc == nil || cfg.Clusters[kc.Cluster] == nil || cfg.AuthInfos[kc.AuthInfo] == nil {
		return fmt.Errorf("kubeconfig for a job pod in cluster %s: context %s is missing or incomplete in %s", cluster, name, d.cfg.Kubeconfig)
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[kc.Cluster] = cfg.Clusters[kc.Cluster]
	out.AuthInfos[kc.AuthInfo] = cfg.AuthInfos[kc.AuthInfo]
	own := kc.DeepCopy()
	own.Namespace = namespace
	out.Contexts[name] = own
	out.CurrentContext = name
	b, err := clientcmd.Write(*out)
	if err != nil {
		return fmt.Errorf("kubeconfig for a job pod in cluster %s: %w", cluster, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write kubeconfig for a job pod: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write kubeconfig for a job pod: %w", err)
	}
	return f.Close()
}
