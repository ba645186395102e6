package lab_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
	"github.com/mesh-verify/mesh-verify/lab/nginx"
	"github.com/mesh-verify/mesh-verify/lab/topologies"
)

// The test binary doubles as the lab daemon: `<test binary> lab serve
// --dir DIR` runs lab.Serve, as `mesh-verify-lab serve --dir DIR` does, so
// the tests need no separately built mesh-verify-lab.
func TestMain(m *testing.M) {
	if len(os.Args) == 5 && os.Args[1] == "lab" && os.Args[2] == "serve" && os.Args[3] == "--dir" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := lab.Serve(ctx, os.Args[4])
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testDaemon(dir string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(exe, "lab", "serve", "--dir", dir), nil
}

// testLab is a lab directory with a guaranteed teardown: whatever the
// test does, Down runs and nothing of the lab may be left running.
type testLab struct {
	t    *testing.T
	bin  kwok.Binaries
	dir  string
	opts lab.Options
}

func newTestLab(t *testing.T) *testLab {
	bin := labtest.Binaries(t)
	// Short: kwokctl puts unix sockets and long pki paths in it.
	dir, err := os.MkdirTemp("", "mvlab-")
	if err != nil {
		t.Fatal(err)
	}
	tl := &testLab{t: t, bin: bin, dir: dir, opts: lab.Options{
		Dir: dir, Bin: string(bin), Daemon: testDaemon, ReadyTimeout: time.Minute, Out: testWriter{t},
	}}
	t.Cleanup(func() {
		pid := readPID(dir)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := lab.Down(ctx, tl.opts); err != nil {
			t.Errorf("lab down: %v", err)
		}
		k, err := kwok.New(bin, dir)
		if err == nil {
			if left := k.Leftovers(); len(left) > 0 {
				t.Errorf("processes left behind by the lab: %v", left)
			}
		}
		if pid != 0 && kwok.Alive(pid) {
			t.Errorf("lab daemon pid %d still running", pid)
		}
		os.RemoveAll(dir)
	})
	return tl
}

func (tl *testLab) up(topology string) *lab.Lab {
	tl.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := tl.opts
	o.Topology = topology
	start := time.Now()
	l, err := lab.Up(ctx, o)
	if err != nil {
		tl.t.Fatalf("lab up %s: %v\ndaemon log:\n%s", topology, err, readFile(filepath.Join(tl.dir, "daemon.log")))
	}
	tl.t.Logf("lab up %s: %.1fs (reused %v)", topology, time.Since(start).Seconds(), l.Reused)
	return l
}

// kubectl runs the lab's kubectl exactly as a user would, with the lab's
// kubeconfig and its own cache directory.
func (tl *testLab) kubectl(args ...string) string {
	tl.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, tl.bin.Path("kubectl"), append([]string{"--kubeconfig", filepath.Join(tl.dir, "kubeconfig")}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(tl.dir, "kubecache"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		tl.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) ->`)

// portForward starts `kubectl port-forward` and returns the local base
// URL; the process is killed by pid when the test ends.
func (tl *testLab) portForward(args ...string) string {
	tl.t.Helper()
	full := append([]string{"--kubeconfig", filepath.Join(tl.dir, "kubeconfig")}, args...)
	cmd := exec.Command(tl.bin.Path("kubectl"), append(full, "--address", "127.0.0.1")...)
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(tl.dir, "kubecache"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tl.t.Fatal(err)
	}
	cmd.Stderr = testWriter{tl.t}
	if err := cmd.Start(); err != nil {
		tl.t.Fatal(err)
	}
	tl.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := forwarding.FindStringSubmatch(sc.Text()); m != nil {
				port <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case p := <-port:
		return "http://127.0.0.1:" + p
	case <-time.After(20 * time.Second):
		tl.t.Fatalf("kubectl port-forward %v printed no Forwarding line", args)
		return ""
	}
}

// get sends one request on a new connection (like siege's default
// `connection: close`), so connection-balancing entries decide again.
func get(t *testing.T, url, requestID string) string {
	t.Helper()
	code, b := getStatus(t, url, requestID)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d: %s", url, code, b)
	}
	return b
}

// getStatus is get for any answer: its status code and body.
func getStatus(t *testing.T, url, requestID string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-Request-Id", requestID)
	req.Close = true
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLab drives the lab the way a user does with kubectl: the Skupper
// tutorial's second scenario, then a scale, a repeated up, a crashed
// daemon and another topology, and down.
func TestLab(t *testing.T) {
	tl := newTestLab(t)
	l := tl.up("skupper-2")
	if l.Reused {
		t.Fatal("first up reused a lab")
	}

	// kubectl get pods lists the topology's pods per cluster.
	c2 := tl.kubectl("get", "pods", "-A", "--context", "kind-c2", "-o", "name")
	c3 := tl.kubectl("get", "pods", "-A", "--context", "kind-c3", "-o", "name")
	if strings.Count(c2, "pod/sample-spring-kotlin-microservice-") != 1 || strings.Count(c3, "pod/sample-spring-kotlin-microservice-") != 2 {
		t.Fatalf("pods: c2 %q, c3 %q; want 1 and 2 sample app pods", c2, c3)
	}
	if cur := strings.TrimSpace(tl.kubectl("config", "current-context")); cur != "kind-c1" {
		t.Errorf("current context %q, want kind-c1", cur)
	}

	// The tutorial's port-forward reaches the router, which answers with
	// the sample app's JSON from c2 or c3; the logs of those clusters'
	// pods show one line of the app's own per request (it logs no request
	// id: docs/real-apps.md), findById(7) for GET /persons/7.
	base := tl.portForward("--context", "kind-c1", "-n", "interconnect", "port-forward", "svc/sample-spring-kotlin-microservice", ":8080")
	person := regexp.MustCompile(`^\{"id":7,"name":"[^"]+","age":\d+,"gender":"(MALE|FEMALE)"\}$`)
	for i := range 8 {
		if body := get(t, base+"/persons/7", fmt.Sprintf("labtest-a-%d", i)); !person.MatchString(body) {
			t.Fatalf("GET /persons/7 = %q, want the sample app's person 7", body)
		}
	}
	logs := func(ctx string) string {
		return tl.kubectl("--context", ctx, "-n", "interconnect", "logs", "deploy/sample-spring-kotlin-microservice", "--all-pods=true")
	}
	lines := func(logs, call string) int {
		return len(regexp.MustCompile(`(?m) INFO 1 --- \[[ a-z0-9-]{15}\] p\.p\.s\.controller\.PersonController        : \(\d+\) `+regexp.QuoteMeta(call)+`$`).FindAllString(logs, -1))
	}
	all := logs("kind-c2") + logs("kind-c3")
	if n := lines(all, "findById(7)"); n != 8 {
		t.Errorf("c2 and c3 logged findById(7) %d times for 8 requests:\n%s", n, all)
	}
	if strings.Contains(all, "labtest-a-") {
		t.Errorf("an app logged the client's request id:\n%s", all)
	}

	// kubectl scale changes what the router routes to: with c3 at 0
	// replicas, everything goes to c2.
	tl.kubectl("--context", "kind-c3", "-n", "interconnect", "scale", "deploy/sample-spring-kotlin-microservice", "--replicas=0")
	routerBackends := func(want func([]string) bool) func() bool {
		return func() bool {
			st, err := daemon.ReadStatus(tl.dir)
			if err != nil {
				return false
			}
			for _, p := range st.Pods {
				if p.Role == daemon.RoleEntry {
					return want(p.Backends)
				}
			}
			return false
		}
	}
	onlyC2 := func(bs []string) bool { return len(bs) == 1 && strings.HasPrefix(bs[0], "c2/") }
	waitFor(t, "the router to drop c3", 30*time.Second, routerBackends(onlyC2))
	for i := range 6 {
		get(t, base+"/persons/2", fmt.Sprintf("labtest-b-%d", i))
	}
	if n := lines(logs("kind-c2"), "findById(2)"); n != 6 {
		t.Errorf("after scaling c3 to 0, c2 logged findById(2) %d times for 6 requests", n)
	}
	// The router's own log records the change, as `kubectl logs` of it.
	if rl := tl.kubectl("--context", "kind-c1", "-n", "interconnect", "logs", "deploy/skupper-router"); !strings.Contains(rl, "backends of interconnect/sample-spring-kotlin-microservice: c2/") {
		t.Errorf("router log lacks the backend change:\n%s", rl)
	}

	// Skupper connects only what is exposed: `skupper unexpose` in c2
	// (its skupper-services entry gone, here the whole ConfigMap, with
	// kubectl) leaves the router no target, and a request fails without
	// reaching any app; applying the exposure again restores c2.
	tl.kubectl("--context", "kind-c2", "-n", "interconnect", "delete", "configmap", "skupper-services")
	waitFor(t, "the router to have no target", 30*time.Second, routerBackends(func(bs []string) bool { return len(bs) == 0 }))
	before := lines(logs("kind-c2"), "findById(3)")
	if code, body := getStatus(t, base+"/persons/3", "labtest-unexposed"); code != http.StatusServiceUnavailable {
		t.Errorf("GET with nothing exposed = %d %q, want 503 (no target)", code, body)
	}
	if n := lines(logs("kind-c2"), "findById(3)"); n != before {
		t.Errorf("c2 served findById(3) %d times while not exposed", n-before)
	}
	ms, err := topologies.Manifests("skupper-2")
	if err != nil {
		t.Fatal(err)
	}
	exposure := filepath.Join(t.TempDir(), "expose.yaml")
	if err := os.WriteFile(exposure, ms["c2/expose.yaml"], 0o644); err != nil {
		t.Fatal(err)
	}
	tl.kubectl("--context", "kind-c2", "apply", "-f", exposure)
	waitFor(t, "the router to reach c2 again", 30*time.Second, routerBackends(onlyC2))
	if body := get(t, base+"/persons/3", "labtest-exposed"); !strings.Contains(body, `"id":3`) {
		t.Errorf("GET /persons/3 after exposing again = %q", body)
	}

	// up again with the same topology re-applies it (c3 back to 2 pods)
	// and keeps the clusters and the daemon.
	again := tl.up("skupper-2")
	if !again.Reused || again.DaemonPID != l.DaemonPID {
		t.Errorf("second up: reused %v, daemon %d (first %d)", again.Reused, again.DaemonPID, l.DaemonPID)
	}
	if c3 := tl.kubectl("get", "pods", "-A", "--context", "kind-c3", "-o", "name"); strings.Count(c3, "pod/") != 2 {
		t.Errorf("after the second up c3 has pods %q, want 2", c3)
	}

	// A crashed daemon: the next up (another topology) cleans up the old
	// lab — clusters c1..c3 — and brings up c1, c2 only.
	if err := syscall.Kill(l.DaemonPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed daemon to exit", 10*time.Second, func() bool { return !kwok.Alive(l.DaemonPID) })
	istio := tl.up("istio-mirror")
	if istio.Reused || istio.DaemonPID == l.DaemonPID {
		t.Fatalf("up after a crash reused the lab (daemon %d)", istio.DaemonPID)
	}
	k, _ := kwok.New(tl.bin, tl.dir)
	if got := strings.Join(k.Existing(), ","); got != "c1,c2" {
		t.Errorf("clusters after switching to istio-mirror: %s, want c1,c2", got)
	}
	for _, p := range k.Leftovers() {
		if strings.Contains(p, "/clusters/c3/") {
			t.Errorf("c3 process left: %s", p)
		}
	}
	caller := tl.portForward("--context", "kind-c1", "port-forward", "svc/caller-service", ":8080")
	if body := get(t, caller+"/caller/ping", "labtest-istio"); body != "I'm caller-service v1. Calling... I'm callme-service v1" {
		t.Errorf("caller answered %q", body)
	}

	// status and env describe it.
	r, err := lab.Status(context.Background(), lab.Options{Dir: tl.dir})
	if err != nil || !r.Ready || r.DaemonPID != istio.DaemonPID {
		t.Fatalf("status: %+v, %v", r, err)
	}
	if e, err := lab.Env(lab.Options{Dir: tl.dir}); err != nil || e.Kubeconfig != filepath.Join(tl.dir, "kubeconfig") || e.KubeCacheDir != filepath.Join(tl.dir, "kubecache") {
		t.Errorf("env = %+v, %v", e, err)
	}

	// down leaves nothing: no daemon, no cluster process, no files.
	rep, err := lab.Down(context.Background(), tl.opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.DaemonPID != istio.DaemonPID || strings.Join(rep.Clusters, ",") != "c1,c2" {
		t.Errorf("down report %+v", rep)
	}
	if kwok.Alive(istio.DaemonPID) {
		t.Errorf("daemon %d alive after down", istio.DaemonPID)
	}
	if left := k.Leftovers(); len(left) > 0 {
		t.Errorf("left after down: %v", left)
	}
	if _, err := os.Stat(tl.dir); !os.IsNotExist(err) {
		t.Errorf("lab directory still there after down: %v", err)
	}
	if _, err := lab.Status(context.Background(), lab.Options{Dir: tl.dir}); err == nil {
		t.Error("status found a lab after down")
	}
}

func readPID(dir string) int {
	var pid int
	_, _ = fmt.Sscan(readFile(filepath.Join(dir, daemon.PIDFile)), &pid)
	return pid
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// needNginx skips a test without nginx, or fails it in CI (.ci/run
// installs nginx-light).
func needNginx(t *testing.T) {
	t.Helper()
	if _, err := nginx.Find(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// cancelOn is an Out that cancels the up once a line contains marker.
type cancelOn struct {
	testWriter
	marker string
	cancel context.CancelFunc
	pid    *int
}

func (w cancelOn) Write(p []byte) (int, error) {
	if i := strings.Index(string(p), w.marker); i >= 0 {
		_, _ = fmt.Sscan(string(p[i+len(w.marker):]), w.pid)
		w.cancel()
	}
	return w.testWriter.Write(p)
}

// A failed or interrupted up removes what it started (daemon, clusters,
// files) unless --keep-on-failure asks to keep it.
func TestUpFailureRemovesWhatItStarted(t *testing.T) {
	tl := newTestLab(t)
	topo := filepath.Join(t.TempDir(), "one.yaml")
	if err := os.WriteFile(topo, []byte(labtest.OneCluster), 0o644); err != nil {
		t.Fatal(err)
	}
	k := &kwok.Lab{Dir: tl.dir}

	// Interrupted (Ctrl-C) once the daemon runs.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var pid int
	o := tl.opts
	o.Topology = topo
	o.Out = cancelOn{testWriter{t}, "daemon pid ", cancel, &pid}
	_, err := lab.Up(ctx, o)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "is removed") {
		t.Fatalf("interrupted up: %v; want context.Canceled and that what it started is removed", err)
	}
	if pid == 0 || kwok.Alive(pid) {
		t.Errorf("daemon pid %d: alive after an interrupted up", pid)
	}
	if left := k.Leftovers(); len(left) > 0 {
		t.Errorf("left after an interrupted up: %v", left)
	}
	if _, err := os.Stat(tl.dir); !os.IsNotExist(err) {
		t.Errorf("lab directory still there after an interrupted up: %v", err)
	}

	// Failed (the daemon dies at once), with --keep-on-failure: the
	// cluster stays, and the error says how to remove it.
	o = tl.opts
	o.Topology, o.KeepOnFailure = topo, true
	o.Daemon = func(string) (*exec.Cmd, error) { return exec.Command("false"), nil }
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel2()
	_, err = lab.Up(ctx2, o)
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "mesh-verify lab down --dir "+tl.dir) {
		t.Fatalf("failed up with --keep-on-failure: %v; want the daemon's exit and how to remove the lab", err)
	}
	if got := strings.Join(k.Existing(), ","); got != "c1" {
		t.Errorf("clusters kept after a failed up: %q, want c1", got)
	}
	if len(k.Leftovers()) == 0 {
		t.Error("no process of the kept cluster is running")
	}
	// newTestLab's cleanup runs lab down and checks nothing is left.
}

// The nginx data plane (`lab up --data-plane nginx`): the entry pod is
// served by the lab's own copy of nginx; `kubectl scale` reloads it with
// the new pods; a crashed daemon leaves nginx running, and `down` finds
// it as the lab's and stops it.
func TestNginxDataPlane(t *testing.T) {
	needNginx(t)
	tl := newTestLab(t)
	tl.opts.DataPlane = "nginx"
	l := tl.up("kuma-canary")
	var master int
	for _, p := range l.Status.Pods {
		if p.Role == daemon.RoleEntry {
			if p.DataPlane != "nginx" {
				t.Fatalf("entry %s: data plane %q, want nginx", p.Name, p.DataPlane)
			}
			b := readFile(filepath.Join(filepath.Dir(p.DataPlaneLog), "nginx.pid"))
			_, _ = fmt.Sscan(b, &master)
		}
	}
	if master == 0 || !kwok.Owned(master, tl.dir) {
		t.Fatalf("nginx master pid %d: not running as the lab's own process", master)
	}

	// Two primaries after a scale: nginx is reloaded and uses both.
	gw := tl.portForward("--context", "kind-c1", "-n", "kuma-demo", "port-forward", "svc/edge-gateway", ":8080")
	tl.kubectl("--context", "kind-c1", "-n", "kuma-demo", "scale", "deployment/test-server-primary", "--replicas", "2")
	waitFor(t, "nginx to route to two primaries", 30*time.Second, func() bool {
		r, err := lab.Status(context.Background(), lab.Options{Dir: tl.dir})
		if err != nil || r.Status == nil {
			return false
		}
		for _, p := range r.Status.Pods {
			if p.Role != daemon.RoleEntry || p.BackendsStale {
				continue
			}
			// A pod scaled up is a backend "[not ready]" until its app
			// serves, and nginx gets only ready ones.
			ready := 0
			for _, b := range p.Backends {
				if strings.Contains(b, "test-server-primary") && !strings.Contains(b, "[not ready]") {
					ready++
				}
			}
			if ready == 2 {
				return true
			}
		}
		return false
	})
	hosts := map[string]int{}
	for i := range 40 {
		// Kuma's test-server names its pod as "instance".
		var answer struct{ Instance string }
		if body := get(t, gw+"/", fmt.Sprintf("labtest-nginx-%d", i)); json.Unmarshal([]byte(body), &answer) != nil || answer.Instance == "" {
			t.Fatalf("answer %q: want Kuma test-server's JSON", body)
		}
		hosts[answer.Instance]++
	}
	primaries := 0
	for h := range hosts {
		if strings.HasPrefix(h, "test-server-primary") {
			primaries++
		}
	}
	if primaries != 2 {
		t.Errorf("answers came from %v, want both primary pods", hosts)
	}

	// A crashed daemon cannot stop nginx; down must.
	if err := syscall.Kill(l.DaemonPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed daemon to exit", 10*time.Second, func() bool { return !kwok.Alive(l.DaemonPID) })
	if !kwok.Alive(master) {
		t.Fatalf("nginx master %d stopped with the daemon; the test needs it orphaned", master)
	}
	if _, err := lab.Down(context.Background(), tl.opts); err != nil {
		t.Fatal(err)
	}
	if kwok.Alive(master) {
		t.Errorf("nginx master %d alive after down", master)
	}
	if _, err := os.Stat(tl.dir); !os.IsNotExist(err) {
		t.Errorf("lab directory still there after down (nginx's files are the lab's too): %v", err)
	}
}
