package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/reports"
)

// threeClusterTopology: callme pods in c1, c2 and c3 (1/1/2), each with
// an Istio sidecar, behind an Istio ingress gateway in c1 that routes by
// the VirtualService bound to its Gateway (threeClusterGateway): one
// destination without a subset, so per pod, per request, as Envoy
// balances over a Service's endpoints. callme logs no request id
// (docs/real-apps.md); its sidecar's access log does, as on a real mesh.
const threeClusterTopology = `apiVersion: lab.mesh-verify.io/v1alpha1
kind: Topology
metadata:
  name: three-clusters
  description: "callme in c1, c2, c3 (1/1/2) behind a per-pod gateway in c1"
clusters: [c1, c2, c3]
apps:
  - name: callme-service
    kind: callme
    service: callme-service
    version: v1
    replicas: {c1: 1, c2: 1, c3: 2}
    sidecar: istio
services:
  - name: callme-service
    port: 8080
entries:
  - name: edge-gateway
    cluster: c1
    service: edge-gateway
    port: {number: 8080, name: http}
    to: callme-service
    mesh: istio
`

// threeClusterGateway binds the gateway's routes as the tutorials'
// helloworld-gateway.yaml does: a Gateway selecting Istio's default
// ingress gateway (the entry's pods carry istio: ingressgateway) and a
// VirtualService bound to it sending everything to callme-service.
const threeClusterGateway = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: edge-gateway, namespace: default}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: callme-service, namespace: default}
spec:
  hosts: ["*"]
  gateways: [edge-gateway]
  http:
  - route:
    - destination: {host: callme-service, port: {number: 8080}}
`

// threeClusterLab is threeClusterTopology's lab.
var threeClusterLab = e2etest.LabSpec{Source: threeClusterTopology, Manifests: threeClusterGateway, ManifestsCluster: "c1"}

const threeClusterScenario = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: three-clusters-logs}
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
  - {name: c3, context: kind-c3}
target:
  portForward: {cluster: c1, namespace: default, resource: svc/edge-gateway, port: http}
  path: /callme/ping
attack:
  rate: 200/s
  duration: 12s
observe:
  - name: callme
    selector: app=callme-service
    container: istio-proxy
    logs:
      match: '"GET /callme/ping HTTP/1\.1" 200 .* "(?P<request_id>[^"]+)" "[^"]+" "[^"]+" inbound\|'

expect:
  - name: equal per pod, from the pods' logs
    split: {by: cluster, model: equal-per-pod}
  - reached: {by: cluster, buckets: [c1, c2, c3]}
`

// Sidecar logs from three clusters, joined to the attack by request id
// through the lab's real kube-apiservers, while c2's log streams are cut mid-run
// (its kwok controller, which serves the kubelet API, is killed and
// restarted): the counts in the report must equal, per cluster, the
// requests of the run the apps wrote to their log files.
func TestLogAttributionAcrossThreeClustersSurvivesACut(t *testing.T) {
	// Reads the lab and restarts the controller it cut: the lab is as it
	// was, and the next test takes it.
	l := mv.SharedLab(t, threeClusterLab)
	dir := l.Dir
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	scenario := writeScenario(t, threeClusterScenario)

	// Reaped on every exit, a t.Fatal in cutKwokController or restart
	// included (before the lab is taken down).
	bg := startRun(t, ctx, cancel, scenario, l.Kubeconfig)
	so := bg.stdout
	// Cut once c2's logs are being read for this run: the first line of
	// the run is in c2's log files (the streams follow from the attack's
	// start), plus a moment for the stream to deliver it.
	waitLogged(t, bg, dir, "c2", 60*time.Second)
	time.Sleep(time.Second)
	restart := cutKwokController(t, dir, "c2")
	time.Sleep(2 * time.Second)
	restart()
	err := bg.wait()
	rep, _ := readReport(t, bg.out)
	if rep == nil {
		t.Fatalf("no report: %v\n%s\n%s", err, so.String(), bg.stderr.String())
	}

	served := runLinesPerCluster(t, dir, rep.RunID)
	var logs map[string]int64
	for _, d := range rep.Dimensions {
		if d.Source == "logs" && d.Name == "cluster" {
			logs = map[string]int64{}
			for _, b := range d.Buckets {
				logs[b.Name] = b.Count
			}
		}
	}
	if logs == nil {
		t.Fatalf("no cluster counts from logs in the report\n%s", so.String())
	}
	var total int64
	for _, c := range []string{"c1", "c2", "c3"} {
		if logs[c] != served[c] || served[c] == 0 {
			t.Errorf("cluster %s: report counts %d requests from logs, the apps logged %d", c, logs[c], served[c])
		}
		total += served[c]
	}
	if total != rep.Metrics.Successes {
		t.Errorf("apps logged %d requests of the run, the attack got %d answers", total, rep.Metrics.Successes)
	}
	// The cut shows as a reconnect of a following stream, or, when the
	// attack ended before the follower's retry (a loaded machine), as the
	// stream's error with the rest read by the drain after the attack;
	// either way the counts above must be whole.
	reconnects, cut := int64(0), false
	for _, s := range rep.Kubernetes.Logs {
		if strings.HasPrefix(s.Target, "c2/") {
			reconnects += s.Reconnects
			cut = cut || s.Reconnects > 0 || s.LastError != ""
		}
	}
	if !cut {
		t.Errorf("c2's log streams were never cut: %+v", rep.Kubernetes.Logs)
	}
	if rep.Verdict.String() != "PASS" {
		t.Errorf("verdict %s\n%s", rep.Verdict, so.String())
	}
	t.Logf("served per cluster %v, report %v, c2 reconnects %d", served, logs, reconnects)
}

// A pod scaled down mid-attack keeps serving until its app stops: its
// stream is read until its log ends, so every answered request is counted
// (in the window, without request ids) and the counts per pod equal the
// lines the apps wrote.
func TestDeletedPodLinesAreCounted(t *testing.T) {
	// It scales a workload down and kills an API server: the last test of
	// the three-cluster lab, it takes the lab TestLogAttributionAcross…
	// shared (or brings up its own when run alone).
	l := mv.TakeLab(t, threeClusterLab)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	scenario := writeScenario(t, `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: scale-down}
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
  - {name: c3, context: kind-c3}
target:
  portForward: {cluster: c1, namespace: default, resource: svc/edge-gateway, port: http}
  path: /callme/ping
attack: {rate: 200/s, duration: 10s}
observe:
  - {name: callme, selector: app=callme-service, logs: {match: `+yamlQuote(anyCallme)+`}}
expect:
  - reached: {buckets: [c1, c2, c3]}
`)
	bg := startRun(t, ctx, cancel, scenario, l.Kubeconfig)
	waitLogged(t, bg, l.Dir, "c3", 60*time.Second)
	time.Sleep(2 * time.Second)
	e2etest.Kubectl(t, l, "c3", "scale", "deploy/callme-service", "--replicas", "1")
	err := bg.wait()
	rep, _ := readReport(t, bg.out)
	if rep == nil {
		t.Fatalf("no report: %v\n%s\n%s", err, bg.stdout.String(), bg.stderr.String())
	}
	var deleted []string
	for _, s := range rep.Kubernetes.Logs {
		if s.Deleted {
			deleted = append(deleted, s.Target)
		}
	}
	if len(deleted) != 1 {
		t.Fatalf("deleted pods' streams %v, want one: %+v", deleted, rep.Kubernetes.Logs)
	}
	rc := reconciliation(t, rep, "logs")
	// Every answered request is counted. On a loaded machine some requests
	// the apps served reach the client after its timeout: they are counted
	// served and reported failed, so the count may exceed the answered by
	// at most the failures, never fall short of the answered.
	answered, failed := float64(rep.Metrics.Successes), float64(rep.Metrics.Requests-rep.Metrics.Successes)
	if rc.Status != reports.ReconcileOK || rc.Counted < answered || rc.Counted > answered+failed || rep.ExitCode != 0 {
		t.Errorf("reconciliation %s: counted %v of %v answered and %v failed (exit %d)\n%s", rc.Status, rc.Counted, answered, failed, rep.ExitCode, bg.stdout.String())
	}
	for _, p := range rc.Pods {
		logged := labLines(t, l, p.Cluster, p.Pod, anyCallme, rep)
		if p.Lines != logged {
			t.Errorf("pod %s/%s: counted %d lines, the app logged %d", p.Cluster, p.Pod, p.Lines, logged)
		}
		if strings.HasSuffix(deleted[0], "/"+p.Pod) && logged == 0 {
			t.Errorf("the deleted pod %s served nothing: the test cannot tell", p.Pod)
		}
	}

	// The same lab, a second run: c3's API server is killed mid-attack and
	// stays down. Every request is still answered through c1, but c3's
	// log lines can no longer be read: an infrastructure fault, reported
	// as a setup error or INCONCLUSIVE with its reason, never as a FAIL
	// of the mesh.
	t.Run("an API server killed mid-run is no FAIL", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		split := writeScenario(t, strings.Replace(strings.Replace(readFileString(t, scenario), "name: scale-down", "name: api-server-killed", 1),
			"  - reached: {buckets: [c1, c2, c3]}", "  - reached: {buckets: [c1, c2, c3]}\n  - split: {by: cluster, model: equal}", 1))
		bg := startRun(t, ctx, cancel, split, l.Kubeconfig)
		time.Sleep(6 * time.Second) // the attack starts 2 s after the run, then runs 10 s
		killAPIServer(t, l.Dir, "c3")
		err := bg.wait()
		rep, _ := readReport(t, bg.out)
		if rep == nil {
			t.Fatalf("no report: %v\n%s\n%s", err, bg.stdout.String(), bg.stderr.String())
		}
		if rep.ExitCode != 2 && rep.ExitCode != 3 {
			t.Fatalf("exit %d (%s), want 2 or 3\n%s", rep.ExitCode, rep.Verdict, bg.stdout.String())
		}
		why := rep.SetupError + " " + strings.Join(rep.Warnings, " ")
		for _, e := range rep.Expectation {
			why += " " + e.Reason
		}
		t.Logf("exit %d (%s): %s", rep.ExitCode, rep.Verdict, why)
		if !strings.Contains(why, "c3") {
			t.Errorf("exit %d, but nothing names c3: %s\n%s", rep.ExitCode, why, bg.stdout.String())
		}
	})
}

// waitLogged waits until a sidecar in cluster has logged a request of
// the background run: a line with its request id ("<run id>-<seq>"), not
// one of the lab's own requests nor of an earlier run on the same lab.
// The run id is the name of the run directory the run makes under its
// --out at its start.
func waitLogged(t *testing.T, bg *background, labDir, cluster string, limit time.Duration) {
	t.Helper()
	runID := ""
	for deadline := time.Now().Add(limit); ; time.Sleep(100 * time.Millisecond) {
		if runID == "" {
			if entries, _ := os.ReadDir(bg.out); len(entries) == 1 && entries[0].IsDir() {
				runID = entries[0].Name()
			}
		}
		files, _ := filepath.Glob(filepath.Join(labDir, "logs", cluster, "*_istio-proxy.log"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && runID != "" &&
				bytes.Contains(b, []byte(`"GET /callme/ping HTTP/1.1" 200 `)) && bytes.Contains(b, []byte(`"`+runID+"-")) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request of run %q logged in cluster %s after %v", runID, cluster, limit)
		}
	}
}

// runLinesPerCluster counts, in the sidecars' log files, the lines of run
// runID: the ground truth of who served what.
func runLinesPerCluster(t *testing.T, labDir, runID string) map[string]int64 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(labDir, "logs", "*", "*_istio-proxy.log"))
	out := map[string]int64{}
	for _, f := range files {
		cluster := filepath.Base(filepath.Dir(f))
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"GET /callme/ping HTTP/1.1" 200 `) && strings.Contains(sc.Text(), `"`+runID+"-") {
				out[cluster]++
			}
		}
		fh.Close()
	}
	return out
}

// cutKwokController kills the kwok controller of one lab cluster — it
// serves the kubelet API, so every log stream of that cluster drops — and
// returns a function that starts it again as it was, recording the new pid
// where kwokctl will find it to stop it.
func cutKwokController(t *testing.T, labDir, cluster string) func() {
	t.Helper()
	pidFiles, _ := filepath.Glob(filepath.Join(labDir, "*", "clusters", cluster, "pids", "kwok-controller.pid"))
	if len(pidFiles) == 0 {
		pidFiles, _ = filepath.Glob(filepath.Join(labDir, "*", "*", "clusters", cluster, "pids", "kwok-controller.pid"))
	}
	if len(pidFiles) != 1 {
		t.Fatalf("kwok controller pid file of %s: found %v", cluster, pidFiles)
	}
	pf := pidFiles[0]
	b, err := os.ReadFile(pf)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", pf, err)
	}
	proc := fmt.Sprintf("/proc/%d", pid)
	rawArgs, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	rawEnv, _ := os.ReadFile(proc + "/environ")
	cwd, _ := os.Readlink(proc + "/cwd")
	args := strings.Split(strings.TrimRight(string(rawArgs), "\x00"), "\x00")
	env := strings.Split(strings.TrimRight(string(rawEnv), "\x00"), "\x00")
	var addr string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--server-address="); ok {
			addr = v
		}
	}
	if addr == "" {
		t.Fatalf("kwok controller %d: no --server-address in %q", pid, args)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Hold the kubelet port while the controller is down: other lab
	// clusters being created meanwhile (test packages run in parallel)
	// pick free ports, and one took this one once — the restarted
	// controller then could not bind, and log requests reached an HTTP
	// server of another cluster. The holder answers nothing, like a dead
	// kubelet: it closes every connection.
	var holder net.Listener
	for deadline := time.Now().Add(10 * time.Second); holder == nil; time.Sleep(20 * time.Millisecond) {
		if holder, err = net.Listen("tcp", addr); err != nil && time.Now().After(deadline) {
			t.Fatalf("hold the kubelet port %s of the killed kwok controller: %v", addr, err)
		}
	}
	go func() {
		for {
			c, err := holder.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { holder.Close() })
	return func() {
		c := exec.Command(args[0], args[1:]...)
		c.Env, c.Dir = env, cwd
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		logf, err := os.OpenFile(filepath.Join(filepath.Dir(filepath.Dir(pf)), "kwok-controller.restarted.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			c.Stdout, c.Stderr = logf, logf
			defer logf.Close()
		}
		// The old process is gone (its port is held here): hand the port
		// to the new one, with lab creates held off until it listens.
		unlock, err := kwok.LockCreates()
		if err != nil {
			t.Fatal(err)
		}
		defer unlock()
		holder.Close()
		if err := c.Start(); err != nil {
			t.Fatalf("restart kwok controller: %v", err)
		}
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("restarted kwok controller does not listen on %s", addr)
			}
		}
		// kwokctl delete stops it by this pid file; reap it here too.
		if err := os.WriteFile(pf, []byte(strconv.Itoa(c.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
		go func() { _ = c.Wait() }()
	}
}
