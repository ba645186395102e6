package kwok_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// Two real clusters side by side: contexts renamed like kind's, a node and
// a pod in each, and nothing left running afterwards (checked by labtest).
func TestTwoClustersSideBySide(t *testing.T) {
	l := labtest.Clusters(t, "c1", "c2")
	for _, c := range []string{"c1", "c2"} {
		l.Apply(t, c, labtest.Node("node-"+c))
		l.Apply(t, c, `apiVersion: v1
kind: Pod
metadata: {name: p-`+c+`, namespace: default}
spec:
  nodeName: node-`+c+`
  containers: [{name: app, image: fake}]
`)
	}
	for _, c := range []string{"c1", "c2"} {
		out := l.Kubectl(t, c, "get", "pods", "-o", "name")
		if strings.TrimSpace(out) != "pod/p-"+c {
			t.Errorf("cluster %s pods: %q", c, out)
		}
	}
	// The clusters' CA and admin keys are their owner's only.
	keys, _ := filepath.Glob(filepath.Join(l.Dir, "kwok", "clusters", "*", "pki", "*.key"))
	if len(keys) < 4 {
		t.Errorf("keys of two clusters: %v", keys)
	}
	for _, k := range keys {
		fi, err := os.Stat(k)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("key %s: mode %v; want 0600", k, fi.Mode().Perm())
		}
	}
	// The shared kubeconfig has both renamed contexts; each cluster's own
	// (what the lab's kubectl reads) has its context only.
	shared, err := clientcmd.LoadFromFile(l.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if shared.Contexts["kind-c1"] == nil || shared.Contexts["kind-c2"] == nil || shared.Contexts["kwok-c1"] != nil || shared.Contexts["kwok-c2"] != nil {
		t.Errorf("contexts of %s: %v", l.Kubeconfig, shared.Contexts)
	}
	ctxs := l.Kubectl(t, "c1", "config", "get-contexts", "-o", "name")
	if strings.TrimSpace(ctxs) != "kind-c1" {
		t.Errorf("contexts of c1's own kubeconfig: %q", ctxs)
	}
}

// start runs a process and waits until its command line is the new one
// (not the forked test binary's); it is stopped by pid when the test ends.
func start(t *testing.T, path string, args ...string) int {
	t.Helper()
	cmd := exec.Command(path, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if p, ok := kwok.ReadProc(pid); ok && p.Args[0] == path {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d (%s) did not start", pid, path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Only the lab's own processes count as leftovers: those started from
// inside the lab directory (as kwokctl starts its components) and the lab
// daemon. A process that merely names the directory, or runs from another
// lab whose directory shares a prefix, is at most reported by pid.
func TestLeftoversOnlyTheLabsOwn(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	tail, err := exec.LookPath("tail")
	if err != nil {
		t.Skip("no tail")
	}
	root := t.TempDir()
	dir := filepath.Join(root, "mvlab-123")
	other := filepath.Join(root, "mvlab-1234") // shares dir's prefix as text
	for _, d := range []string{dir, other} {
		if err := os.MkdirAll(filepath.Join(d, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(sleep, filepath.Join(d, "bin", "sleep")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "daemon.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	own := start(t, filepath.Join(dir, "bin", "sleep"), "30")
	stranger := start(t, tail, "-f", filepath.Join(dir, "daemon.log"))
	otherLab := start(t, filepath.Join(other, "bin", "sleep"), "31")

	l := &kwok.Lab{Dir: dir}
	left := l.Leftovers()
	if len(left) != 1 || left[0] != fmt.Sprintf("%d %s", own, filepath.Join(dir, "bin", "sleep")) {
		t.Errorf("leftovers of %s: %q, want only pid %d", dir, left, own)
	}
	strangers := l.Strangers()
	if !slices.Contains(strangers, stranger) || slices.Contains(strangers, own) {
		t.Errorf("strangers of %s: %v, want %d (tail -f) and not %d", dir, strangers, stranger, own)
	}
	if !kwok.Owned(own, dir) || kwok.Owned(stranger, dir) || kwok.Owned(otherLab, dir) || !kwok.Owned(otherLab, other) {
		t.Errorf("Owned: own %v, tail %v, other lab's %v in %s, in its own %v",
			kwok.Owned(own, dir), kwok.Owned(stranger, dir), kwok.Owned(otherLab, dir), dir, kwok.Owned(otherLab, other))
	}
	for _, s := range left {
		if strings.Contains(s, "daemon.log") {
			t.Errorf("a leftover shows a stranger's command line: %q", s)
		}
	}
}

func TestIsDaemon(t *testing.T) {
	dir := "/tmp/mvlab-123"
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"/usr/bin/mesh-verify", "lab", "serve", "--dir", dir}, true},
		{[]string{"mesh-verify", "lab", "serve", "--dir=" + dir}, true},
		{[]string{"mesh-verify", "lab", "serve", "--dir", dir + "/"}, false}, // not exactly dir
		{[]string{"mesh-verify", "lab", "serve", "--dir", dir + "4"}, false},
		{[]string{"mesh-verify", "lab", "down", "--dir", dir}, false},
		{[]string{"/opt/bin/mesh-verify-lab", "serve", "--dir", dir}, true},
		{[]string{"mesh-verify-lab", "serve", "--dir=" + dir}, true},
		{[]string{"mesh-verify-lab", "down", "--dir", dir}, false},
		{[]string{"mesh-verify-lab", "serve", "--dir", dir + "4"}, false},
		{[]string{"/usr/bin/mesh-verify", "serve", "--dir", dir}, false}, // not the lab's program
		{[]string{"nginx", "mesh-verify-lab", "serve", "--dir", dir}, false},
		{[]string{"tail", "-f", dir + "/daemon.log"}, false},
		{[]string{"sh", "-c", "mesh-verify lab serve --dir " + dir}, false},
	} {
		if got := kwok.IsDaemon(c.args, dir); got != c.want {
			t.Errorf("IsDaemon(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

// A cancelled FindBinaries stops the whole build.sh process group, not
// only bash: here a child the script left running in the background.
func TestFindBinariesCancelStopsTheBuild(t *testing.T) {
	t.Setenv("MESH_VERIFY_LAB_BIN", "")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "tools", "lab"), 0o755); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(root, "child.pid")
	script := "sleep 60 & echo $! >" + pidFile + "\nwait\n"
	if err := os.WriteFile(filepath.Join(root, "tools", "lab", "build.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := kwok.FindBinaries(ctx, root)
		done <- err
	}()
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 {
		if b, err := os.ReadFile(pidFile); err == nil {
			child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("the fake build.sh did not start its child")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a cancelled FindBinaries returned no error")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("FindBinaries did not return after cancel")
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		if _, alive := kwok.ReadProc(child); !alive {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("build.sh's child %d outlived the cancel", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// portTaker plays the process that takes a port kwokctl chose before the
// component it chose it for binds it: it watches the cluster's kwokctl
// configuration appear and listens on its kube-apiserver port at once,
// for the first `times` creates.
type portTaker struct {
	taken []int
	lns   []net.Listener
	stop  chan struct{}
	done  chan struct{}
}

var apiserverPort = regexp.MustCompile(`(?m)^\s*kubeApiserverPort:\s*(\d+)\s*$`)

func takePorts(t *testing.T, clusterDir string, times int) *portTaker {
	pt := &portTaker{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(pt.done)
		seen := ""
		for len(pt.taken) < times {
			select {
			case <-pt.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			b, err := os.ReadFile(filepath.Join(clusterDir, "kwok.yaml"))
			m := apiserverPort.FindSubmatch(b)
			if err != nil || m == nil || string(m[1]) == seen {
				continue
			}
			seen = string(m[1])
			ln, err := net.Listen("tcp", "127.0.0.1:"+seen)
			if err != nil {
				continue // the API server was quicker this time
			}
			port, _ := strconv.Atoi(seen)
			pt.taken, pt.lns = append(pt.taken, port), append(pt.lns, ln)
		}
	}()
	t.Cleanup(pt.release)
	return pt
}

func (pt *portTaker) release() {
	select {
	case <-pt.stop:
	default:
		close(pt.stop)
	}
	<-pt.done
	for _, ln := range pt.lns {
		ln.Close()
	}
}

// A port kwokctl chose and another process took before the API server
// bound it: the create notices at once (not after kwokctl's two-minute
// wait and its misleading CRD error), creates the cluster again on other
// ports, and says so; when every create loses its port, the error names
// the port, the component and the process holding it.
func TestCreateRetriesAPortTakenAfterKwokctlChoseIt(t *testing.T) {
	bin := labtest.Binaries(t)
	cases := []struct {
		name  string
		takes int
	}{
		{"taken once: created again on other ports", 1},
		{"taken every time: the error names the port and its holder", 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "mvlab-")
			if err != nil {
				t.Fatal(err)
			}
			l, err := kwok.New(bin, dir)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			l.Out = &out
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := l.DeleteAll(ctx); err != nil {
					t.Errorf("delete: %v", err)
				}
				for deadline := time.Now().Add(10 * time.Second); len(l.Leftovers()) > 0 && time.Now().Before(deadline); {
					time.Sleep(100 * time.Millisecond)
				}
				if left := l.Leftovers(); len(left) > 0 {
					t.Errorf("processes left: %v", left)
				}
				os.RemoveAll(dir)
			})
			pt := takePorts(t, filepath.Join(dir, "kwok", "clusters", "c1"), tc.takes)
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			begin := time.Now()
			err = l.Start(ctx, "c1")
			took := time.Since(begin)
			pt.release()
			if len(pt.taken) != tc.takes {
				t.Fatalf("took the API server's port %d times (%v), want %d: the API server bound it first", len(pt.taken), pt.taken, tc.takes)
			}
			// kwokctl alone waits two minutes for an API server that could
			// not bind before it fails; each create must end before that.
			if took >= time.Duration(tc.takes)*2*time.Minute {
				t.Errorf("%d creates took %v: the conflicts were not noticed before kwokctl's own two-minute wait", tc.takes, took)
			}
			if tc.takes < 3 {
				if err != nil {
					t.Fatalf("create after one lost port: %v", err)
				}
				if !strings.Contains(out.String(), fmt.Sprintf("port %d", pt.taken[0])) || !strings.Contains(out.String(), "creating it again") {
					t.Errorf("progress %q does not tell of the retry", out.String())
				}
				cfg, _ := os.ReadFile(filepath.Join(dir, "kwok", "clusters", "c1", "kwok.yaml"))
				if m := apiserverPort.FindSubmatch(cfg); m == nil || string(m[1]) == strconv.Itoa(pt.taken[0]) {
					t.Errorf("the API server's port is still the one taken (%d)", pt.taken[0])
				}
				return
			}
			var pc *kwok.PortConflictError
			if !errors.As(err, &pc) || pc.Attempts != 3 || pc.Component != "kube-apiserver" {
				t.Fatalf("create with every port taken: %v; want a port conflict of kube-apiserver after 3 attempts", err)
			}
			for _, want := range []string{fmt.Sprintf("port %d", pc.Port), fmt.Sprintf("pid %d", os.Getpid()), "without reserving"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if !slices.Contains(pt.taken, pc.Port) {
				t.Errorf("the error names port %d, not one that was taken (%v)", pc.Port, pt.taken)
			}
		})
	}
}

// Start (kwokctl without waiting for the controllers) returns, and lets
// another lab's create choose ports, only once every component of the
// cluster listens on the port kwokctl chose for it. Here the
// controller-manager binds 3 s late, as a starved one does on a loaded
// machine: a wrapper sleeps before it execs the real one (the other
// binaries are the real ones, linked).
func TestStartWaitsForEveryComponentToListen(t *testing.T) {
	real := labtest.Binaries(t)
	bin := t.TempDir()
	for _, n := range []string{"kwokctl", "kwok", "etcd", "kube-apiserver", "kube-scheduler", "kubectl"} {
		if err := os.Symlink(real.Path(n), filepath.Join(bin, n)); err != nil {
			t.Fatal(err)
		}
	}
	// --version answers at once: kwokctl reads it to pick flags.
	wrapper := "#!/bin/bash\n[ \"$1\" = --version ] || sleep 3\nexec -a \"$0\" " + real.Path("kube-controller-manager") + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "kube-controller-manager"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "mvlab-")
	if err != nil {
		t.Fatal(err)
	}
	l, err := kwok.New(kwok.Binaries(bin), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := l.DeleteAll(ctx); err != nil {
			t.Errorf("delete: %v", err)
		}
		os.RemoveAll(dir)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := l.Start(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	waiting, err := kwok.NotListeningIn(filepath.Join(dir, "kwok", "clusters", "c1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(waiting) > 0 {
		t.Errorf("Start returned (and let other creates choose ports) before %v listened", waiting)
	}
}

// ControllerManagerRunning tells a controller-manager that runs (slow,
// perhaps) from one that is gone: true for a new cluster's, false once it
// is killed, and for a cluster that does not exist.
func TestControllerManagerRunning(t *testing.T) {
	l := labtest.Clusters(t, "c1")
	if !l.ControllerManagerRunning("c1") {
		t.Fatal("the controller-manager of a new cluster does not run")
	}
	b, err := os.ReadFile(filepath.Join(l.Dir, "kwok", "clusters", "c1", "pids", "kube-controller-manager.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); kwok.Alive(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("controller-manager pid %d still runs after SIGKILL", pid)
		}
	}
	if l.ControllerManagerRunning("c1") {
		t.Error("a killed controller-manager runs")
	}
	if l.ControllerManagerRunning("c9") {
		t.Error("the controller-manager of a cluster that does not exist runs")
	}
}

// A kwok controller whose informer lost the race with kwokctl's CRDs
// (tools/lab/NOTES.md, "kwok's CRD watches") is found and restarted: the
// race is replayed by taking the Logs CRD away until kwok's reflector has
// backed off several times, then putting it back. Without the restart a
// new pod's logs stay unreadable until the reflector's next retry, which
// by then is 13-26 s away.
func TestEnsureWatchesRestartsAKwokThatMissedItsCRDs(t *testing.T) {
	l := labtest.Clusters(t, "c1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := filepath.Join(l.Dir, "kwok", "clusters", "c1")
	crd := l.Kubectl(t, "c1", "get", "crd", "logs.kwok.x-k8s.io", "-o", "json")
	var obj map[string]any
	if err := json.Unmarshal([]byte(crd), &obj); err != nil {
		t.Fatal(err)
	}
	delete(obj, "status")
	meta := obj["metadata"].(map[string]any)
	for _, k := range []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"} {
		delete(meta, k)
	}
	again, _ := json.Marshal(obj)
	l.Kubectl(t, "c1", "delete", "crd", "logs.kwok.x-k8s.io")
	kwokLog := filepath.Join(dir, "logs", "kwok-controller.log")
	deadline := time.Now().Add(90 * time.Second)
	for failedLists(t, kwokLog) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("kwok's log shows %d failed lists of Logs after 90 s; want 4", failedLists(t, kwokLog))
		}
		time.Sleep(200 * time.Millisecond)
	}
	oldPID := pidOf(t, dir)
	if _, err := l.Lab.Kubectl(ctx, "c1", again, "create", "-f", "-"); err != nil {
		t.Fatal(err)
	}

	begin := time.Now()
	restarted, err := l.EnsureWatches(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if !restarted {
		t.Fatal("EnsureWatches did not restart a kwok controller whose Logs informer was backing off")
	}
	t.Logf("EnsureWatches restarted kwok in %v", time.Since(begin).Round(time.Millisecond))
	newPID := pidOf(t, dir)
	if newPID == oldPID || kwok.Alive(oldPID) || !kwok.Owned(newPID, l.Dir) {
		t.Fatalf("kwok controller pid %d -> %d (old alive %v, new owned by the lab %v)", oldPID, newPID, kwok.Alive(oldPID), kwok.Owned(newPID, l.Dir))
	}

	// A pod's logs answer through the API server at once, as on a cluster
	// whose kwok never missed its CRDs (0.7-1.9 s, tools/lab/NOTES.md).
	logFile := filepath.Join(t.TempDir(), "p.log")
	if err := os.WriteFile(logFile, []byte("2026-12-01T00:00:00Z stdout F hello from p\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.Apply(t, "c1", labtest.Node("node-c1"))
	l.Apply(t, "c1", `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  nodeName: node-c1
  containers: [{name: app, image: fake}]
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Logs
metadata: {name: p, namespace: default}
spec:
  logs: [{containers: [app], logsFile: `+strconv.Quote(logFile)+`}]
`)
	begin = time.Now()
	for {
		out, err := l.Lab.Kubectl(ctx, "c1", nil, "logs", "p", "-c", "app")
		if err == nil && strings.Contains(out, "hello from p") {
			break
		}
		if time.Since(begin) > 8*time.Second {
			t.Fatalf("logs of pod p unreadable %v after EnsureWatches: %v %q", time.Since(begin), err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// failedLists counts the reflector's failed lists of kwok's Logs type.
func failedLists(t *testing.T, log string) int {
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), `failed to list *v1alpha1.Logs`)
}

func pidOf(t *testing.T, clusterDir string) int {
	b, err := os.ReadFile(filepath.Join(clusterDir, "pids", "kwok-controller.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
