package lab_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/kube/portforward"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/lab/topologies"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// slowApp is one cluster, one callme pod whose answers take 2 s, behind
// a gateway entry: long enough to delete the pod while a request is in
// flight through the API server's port-forward. The entry is a Skupper
// router without links: callme exposed in its own site (slowExpose,
// c1/expose.yaml) it reaches c1's pod and, unlike Istio's sidecar,
// retries nothing.
const slowApp = `apiVersion: lab.mesh-verify.io/v1alpha1
kind: Topology
metadata: {name: slow, seed: "one slow callme pod behind a gateway"}
clusters: [c1]
apps:
  - name: callme
    kind: callme
    service: callme
    delay: 2s
    replicas: {c1: 1}
services:
  - name: callme
    port: 8080
entries:
  - name: gateway
    cluster: c1
    service: gateway
    to: callme
    mesh: skupper
`

// slowExpose is what `skupper expose deployment/callme --port 8080`
// leaves in slowApp's c1 (Skupper 1.x's skupper-services entry): without
// it the router has no target.
const slowExpose = `apiVersion: v1
kind: ConfigMap
metadata: {name: skupper-services, namespace: default}
data:
  callme: '{"address":"callme","protocol":"tcp","ports":[8080],"targets":[{"name":"callme","selector":"app=callme"}]}'
`

// writeTopologyDir writes a topology directory: lab.yaml and the
// manifests (path under the directory → content).
func writeTopologyDir(t *testing.T, lab string, manifests map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "topology")
	ms := map[string][]byte{}
	for k, v := range manifests {
		ms[k] = []byte(v)
	}
	if err := topologies.WriteDir(dir, []byte(lab), ms); err != nil {
		t.Fatal(err)
	}
	return dir
}

func clientset(t *testing.T, l *lab.Lab, cluster string) kubernetes.Interface {
	t.Helper()
	cfg, err := daemon.RESTConfig(l.Kubeconfig, l.Context(cluster))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// podEvent is one change of the watched pod, stamped when the test saw it.
type podEvent struct {
	at         time.Time
	typ        watch.EventType
	deleting   bool
	terminated bool // every container reported terminated
}

// A deleted pod terminates as on a real cluster: it keeps its
// deletionTimestamp while it drains, leaves the gateway's backends
// before its app gets SIGTERM, answers the request it had in flight (and
// logs it), takes no new one, reports its container terminated, and only
// then goes away — before its grace period ends. Its logs stay readable
// while it terminates.
func TestPodTerminatesGracefully(t *testing.T) {
	tl := newTestLab(t)
	seed := uint64(1234)
	tl.opts.Seed = &seed
	l := tl.up(writeTopologyDir(t, slowApp, map[string]string{"c1/expose.yaml": slowExpose}))
	cs := clientset(t, l, "c1")
	// The seed is recorded, and the gateway's simulator has one derived
	// from it (lab/daemon's entrySeed: another seed, not the lab's).
	if l.State.Seed != seed || l.Status.Seed != seed {
		t.Errorf("lab seed: state %d, daemon %d; want %d", l.State.Seed, l.Status.Seed, seed)
	}
	for _, p := range l.Status.Pods {
		if p.Role == daemon.RoleEntry && (p.Seed == 0 || p.Seed == seed) {
			t.Errorf("gateway pod %s: simulator seed %d, want one derived from %d", p.Name, p.Seed, seed)
		}
	}
	var victim daemon.Pod
	for _, p := range l.Status.Pods {
		if p.Role == daemon.RoleApp {
			victim = p
		}
	}
	if victim.Name == "" {
		t.Fatalf("no app pod in %+v", l.Status.Pods)
	}
	gw := tl.portForward("--context", "kind-c1", "port-forward", "svc/gateway", ":8080")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + victim.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var evMu sync.Mutex
	var events []podEvent
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			e := podEvent{at: time.Now(), typ: ev.Type, deleting: p.DeletionTimestamp != nil, terminated: len(p.Status.ContainerStatuses) > 0}
			for _, c := range p.Status.ContainerStatuses {
				e.terminated = e.terminated && c.State.Terminated != nil
			}
			evMu.Lock()
			events = append(events, e)
			evMu.Unlock()
		}
	}()

	// A request in flight when the pod is deleted.
	type answer struct {
		code int
		body string
		err  error
		at   time.Time
	}
	inflight := make(chan answer, 1)
	go func() {
		c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil}}
		resp, err := c.Get(gw + "/callme/ping")
		if err != nil {
			inflight <- answer{err: err, at: time.Now()}
			return
		}
		defer resp.Body.Close()
		b := make([]byte, 512)
		n, _ := resp.Body.Read(b)
		inflight <- answer{code: resp.StatusCode, body: string(b[:n]), at: time.Now()}
	}()
	time.Sleep(500 * time.Millisecond) // the request has reached the app
	deleted := time.Now()
	tl.kubectl("--context", "kind-c1", "delete", "pod", victim.Name, "--wait=false")

	// While it terminates (its request still in flight): the pod is still
	// there, deletionTimestamp set, and its logs answer.
	if p, err := cs.CoreV1().Pods("default").Get(ctx, victim.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp == nil {
		t.Errorf("pod %s right after its deletion: %v; want it there with a deletionTimestamp", victim.Name, err)
	}
	if _, err := cs.CoreV1().Pods("default").GetLogs(victim.Name, &corev1.PodLogOptions{}).DoRaw(ctx); err != nil {
		t.Errorf("logs of the terminating pod %s: %v", victim.Name, err)
	}

	// A new request meanwhile goes to the replacement or gets the mesh's
	// 503, never to the terminating pod.
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	if resp, err := c.Get(gw + "/callme/ping"); err == nil {
		resp.Body.Close()
	}

	a := <-inflight
	if a.err != nil || a.code != http.StatusOK || !strings.Contains(a.body, "callme") {
		t.Fatalf("the request in flight at deletion: %d %q %v; want the app's 200 (drained, not reset)", a.code, a.body, a.err)
	}
	waitFor(t, "the pod to go away", 10*time.Second, func() bool {
		evMu.Lock()
		defer evMu.Unlock()
		return len(events) > 0 && events[len(events)-1].typ == watch.Deleted
	})
	evMu.Lock()
	var sawTerminated bool
	var gone time.Time
	for _, e := range events {
		if e.typ == watch.Modified && e.deleting && e.terminated {
			sawTerminated = true
		}
		if e.typ == watch.Deleted {
			gone = e.at
		}
	}
	evMu.Unlock()
	if !sawTerminated {
		t.Errorf("the pod was never reported with its containers terminated before it went away: %+v", events)
	}
	if gone.Before(a.at) {
		t.Errorf("the pod went away at %v, before its in-flight request was answered at %v", gone, a.at)
	}
	// At the latest at the end of its grace period (plus a second for the
	// watch to deliver it on a loaded machine).
	if grace := time.Duration(topology.TerminationGracePeriod) * time.Second; gone.Sub(deleted) > grace+time.Second {
		t.Errorf("the pod went away %v after its deletion, past its %v grace period", gone.Sub(deleted), grace)
	}
	t.Logf("deleted → answered %v → gone %v", a.at.Sub(deleted).Round(time.Millisecond), gone.Sub(deleted).Round(time.Millisecond))

	// The app logged the request it drained, and only that one: the
	// second request never reached it.
	appLines := requestLines(readFile(victim.LogFile))
	if len(appLines) != 1 {
		t.Errorf("the terminating app logged %d request lines, want exactly the drained one: %q", len(appLines), appLines)
	}
	// The gateway dropped it before the app stopped.
	var entryLog string
	for _, p := range l.Status.Pods {
		if p.Role == daemon.RoleEntry {
			entryLog = readFile(p.LogFile)
		}
	}
	if !strings.Contains(entryLog, "backends of default/callme: none") {
		t.Errorf("the gateway's log never shows the pod leaving its backends:\n%s", entryLog)
	}
}

// requestLines are the lines of a CRI log file other than the app's
// start-up line.
// requestLines keeps the callme app's request lines (docs/real-apps.md:
// "Ping: name=…, version=…"), not its startup and first-request lines.
func requestLines(log string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		if strings.Contains(l, "CallmeController") && strings.Contains(l, ": Ping: name=") {
			out = append(out, l)
		}
	}
	return out
}

// attackThroughTunnel sends GETs from workers over keep-alive connections
// through mesh-verify's own port-forward (portforward.Tunnel) to svc/NAME until
// stop is closed (and at most maxRequests), and reports how many there
// were, which failed and which hung until the client's timeout.
type attackResult struct {
	requests, failed, hung int64
	samples                []string
}

func attackThroughTunnel(t *testing.T, l *lab.Lab, cluster, ns, svc, path string, workers int, timeout time.Duration, stop <-chan struct{}) attackResult {
	t.Helper()
	cfg, err := kube.LoadConfig(kube.Options{Kubeconfig: []string{l.Kubeconfig}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.Connect(context.Background(), kube.ClusterRef{Name: cluster, Context: l.Context(cluster)})
	if err != nil {
		t.Fatal(err)
	}
	tun, err := portforward.OpenTunnel(context.Background(), c, portforward.TunnelSpec{Namespace: ns, Resource: "svc/" + svc, Port: "8080"})
	if err != nil {
		t.Fatal(err)
	}
	defer tun.Close()
	tr := &http.Transport{DialContext: tun.DialContext, MaxIdleConnsPerHost: workers, Proxy: nil}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: timeout}
	const maxRequests = 200_000 // bounds the loop whatever stop does
	var mu sync.Mutex
	var res attackResult
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				if res.requests >= maxRequests {
					mu.Unlock()
					return
				}
				res.requests++
				mu.Unlock()
				begin := time.Now()
				resp, err := client.Get("http://" + svc + path)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %s", resp.Status)
					}
				}
				if err != nil {
					mu.Lock()
					res.failed++
					if time.Since(begin) >= timeout-50*time.Millisecond {
						res.hung++
					}
					if len(res.samples) < 10 {
						res.samples = append(res.samples, fmt.Sprintf("after %v: %v", time.Since(begin).Round(time.Millisecond), err))
					}
					mu.Unlock()
				}
				time.Sleep(2 * time.Millisecond) // about 500 rps per worker at most: bounded load
			}
		}()
	}
	wg.Wait()
	return res
}

// Scale events while requests flow through mesh-verify's port-forward to
// a data plane that reloads (nginx closes its idle keep-alive connections
// on every reload): no request may hang until its timeout because a
// backend's close did not reach the client (lab/README.md, "Connections
// behind a port-forward").
func TestScaleDuringAttackNoRequestHangs(t *testing.T) {
	needNginx(t)
	tl := newTestLab(t)
	tl.opts.DataPlane = "nginx"
	l := tl.up("kuma-canary")
	stop := make(chan struct{})
	done := make(chan attackResult, 1)
	go func() {
		done <- attackThroughTunnel(t, l, "c1", "kuma-demo", "edge-gateway", "/", 6, 4*time.Second, stop)
	}()
	time.Sleep(time.Second)
	for i := range 6 {
		replicas := []string{"3", "1"}[i%2]
		tl.kubectl("--context", "kind-c1", "-n", "kuma-demo", "scale", "deployment/test-server-primary", "--replicas", replicas)
		time.Sleep(1500 * time.Millisecond)
	}
	time.Sleep(time.Second)
	close(stop)
	res := <-done
	t.Logf("%d requests, %d failed, %d hung until the timeout; samples: %q", res.requests, res.failed, res.hung, res.samples)
	// The test is only worth something if backends did close idle
	// connections under the clients (nginx's reloads): the relay in
	// front of the gateway counts them.
	st, err := daemon.ReadStatus(tl.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Pods {
		if p.Role == daemon.RoleEntry {
			if p.Relay == nil || p.Relay.Redials+p.Relay.Replays == 0 {
				t.Errorf("gateway relay %+v: no idle close happened during the scale events", p.Relay)
			}
			t.Logf("gateway relay: %+v", *p.Relay)
		}
	}
	if res.hung > 0 {
		t.Errorf("%d of %d requests hung until the client's timeout after scale events: %q", res.hung, res.requests, res.samples)
	}
	if res.requests < 1000 {
		t.Errorf("only %d requests in the attack: too few to show anything", res.requests)
	}
}

// A daemon killed with SIGKILL leaves its nginx data planes running,
// answering 502 from apps that died with it. lab status must not call
// that lab ready; the next up starts a daemon again, which stops them (by
// pid) before starting its own; and any nginx of the lab the daemon does
// not run keeps the lab from being ready until it is gone.
func TestRestartedDaemonStopsWhatTheCrashedOneLeft(t *testing.T) {
	needNginx(t)
	tl := newTestLab(t)
	tl.opts.DataPlane = "nginx"
	seed := uint64(7)
	tl.opts.Seed = &seed // and the next up keeps it without being asked
	l := tl.up("kuma-canary")
	tl.opts.Seed = nil
	entry := func(st *daemon.Status) daemon.Pod {
		for _, p := range st.Pods {
			if p.Role == daemon.RoleEntry {
				return p
			}
		}
		t.Fatalf("no entry pod in %+v", st.Pods)
		return daemon.Pod{}
	}
	old := entry(l.Status)
	if old.DataPlanePID == 0 || !kwok.Alive(old.DataPlanePID) {
		t.Fatalf("entry %s: nginx master pid %d not running", old.Name, old.DataPlanePID)
	}

	if err := syscall.Kill(l.DaemonPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed daemon to exit", 10*time.Second, func() bool { return !kwok.Alive(l.DaemonPID) })
	if !kwok.Alive(old.DataPlanePID) {
		t.Fatalf("nginx %d stopped with the daemon; the test needs it left behind", old.DataPlanePID)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	if resp, err := c.Get("http://" + old.Addr + "/"); err != nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("the orphaned nginx answered %v, %v; want 502 from apps that are gone", resp, err)
	} else {
		resp.Body.Close()
	}
	r, err := lab.Status(context.Background(), lab.Options{Dir: tl.dir})
	if err != nil {
		t.Fatal(err)
	}
	if r.Ready || !strings.Contains(r.Why, fmt.Sprintf("nginx pid %d", old.DataPlanePID)) {
		t.Fatalf("status after the crash: ready %v, %q; want not ready, naming nginx pid %d", r.Ready, r.Why, old.DataPlanePID)
	}

	again := tl.up("kuma-canary")
	if !again.Reused || again.DaemonPID == l.DaemonPID {
		t.Fatalf("up after the crash: reused %v, daemon %d (crashed %d); want the lab kept and a new daemon", again.Reused, again.DaemonPID, l.DaemonPID)
	}
	if kwok.Alive(old.DataPlanePID) {
		t.Errorf("the crashed daemon's nginx %d still runs after a new daemon started", old.DataPlanePID)
	}
	if cur := entry(again.Status); cur.DataPlanePID == 0 || cur.DataPlanePID == old.DataPlanePID || !kwok.Alive(cur.DataPlanePID) {
		t.Errorf("the new daemon's nginx: pid %d (old %d)", cur.DataPlanePID, old.DataPlanePID)
	}
	r, err = lab.Status(context.Background(), lab.Options{Dir: tl.dir})
	if err != nil || !r.Ready {
		t.Fatalf("status after the restart: %v, %v", r.Why, err)
	}
	if again.State.Seed != seed || again.Status.Seed != seed {
		t.Errorf("seed after the restart: state %d, daemon %d; want the lab's %d kept", again.State.Seed, again.Status.Seed, seed)
	}
	var printed strings.Builder
	r.Print(&printed)
	if !strings.Contains(printed.String(), "seed        7 ") {
		t.Errorf("lab status does not show the seed:\n%s", printed.String())
	}
	gw := tl.portForward("--context", "kind-c1", "-n", "kuma-demo", "port-forward", "svc/edge-gateway", ":8080")
	get(t, gw+"/", "labtest-restarted")

	// An nginx of the lab that the daemon does not run: not ready until it
	// is gone.
	conf := filepath.Join(t.TempDir(), "nginx.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("daemon off; pid %[1]s/nginx.pid; error_log %[1]s/error.log;\nevents {}\nhttp { access_log off; server { listen unix:%[1]s/stray.sock; return 200; } }\n",
		filepath.Dir(conf))), 0o644); err != nil {
		t.Fatal(err)
	}
	stray := exec.Command(daemon.NginxBinary(tl.dir), "-p", filepath.Dir(conf), "-c", conf)
	stray.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	strayDone := make(chan struct{})
	go func() { _ = stray.Wait(); close(strayDone) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-stray.Process.Pid, syscall.SIGKILL) // its group: master and workers
		<-strayDone
	})
	waitFor(t, "lab status to name the stray nginx", 10*time.Second, func() bool {
		r, err := lab.Status(context.Background(), lab.Options{Dir: tl.dir})
		return err == nil && !r.Ready && strings.Contains(r.Why, fmt.Sprintf("nginx pid %d", stray.Process.Pid))
	})
	_ = syscall.Kill(-stray.Process.Pid, syscall.SIGTERM)
	<-strayDone
	waitFor(t, "the lab to be ready again", 10*time.Second, func() bool {
		r, err := lab.Status(context.Background(), lab.Options{Dir: tl.dir})
		return err == nil && r.Ready
	})
}
